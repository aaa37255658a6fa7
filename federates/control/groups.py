"""The control federate's follower groups: followers sharing one controller block (up to the parameters its law lets
each row carry, ``Controller.row_params``) run as one ``controllers.pipeline.ControlPipeline`` at the block's own
period, one vectorised call per group."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from controllers.base import Controller
from controllers.pipeline import ControlPipeline, block_key, law_from_block, law_row_params
from core.robot_blocks import ControllerSpec
from core.robots import RobotSpec, rows_of
from core.spawn_columns import shared_blocks
from core.timebase import NS_PER_S, seconds_to_ns


@dataclass
class Group:
    """Followers sharing one controller block: their pipeline, its period and their ids in group row order."""

    pipeline: ControlPipeline
    period_ns: int
    ids: np.ndarray


def _add_row_values(group: Group, blocks: Sequence[ControllerSpec | None]) -> None:
    """The law's ``row_params`` of the followers that just joined ``group`` with these controller blocks (nothing
    for a law whose parameters are the whole group's; the law keeps them only while some differ from its own)."""
    law = group.pipeline.law
    if not law.row_params:
        return
    fields = type(law).Params.model_fields  # a block that leaves a parameter out has the law's default
    settings = [{} if block is None else block.settings for block in blocks]
    group.pipeline.add_row_values({name: np.array([float(s.get(name, fields[name].default)) for s in settings])
                                   for name in law.row_params})


class FollowerGroups:
    """The groups by controller block key (created on first use, kept when empty) and each follower's group."""

    def __init__(self, period_ns: int, dt: float) -> None:
        self.period_ns = period_ns  # the control federate's period: a group's is a multiple of it
        self.dt = dt
        self.by_key: dict[str, Group] = {}  # controller block key -> group
        self.of: dict[int, Group] = {}  # follower id -> its group
        self._block_laws: dict[str, Controller] = {}  # block (as json) -> its law with the block's parameters

    def key(self, controller: ControllerSpec | None, name: str) -> str:
        """Key of the group of a controller block, created on first use (``name``: for the message)."""
        if controller is None:
            raise ValueError(f"robot {name}: a follower without a controller block")
        block = controller.settings
        key = block_key(block, law_row_params(block))
        if key not in self.by_key:
            period_ns = seconds_to_ns(self.dt if controller.period_s is None else controller.period_s)
            if period_ns % self.period_ns:
                raise ValueError(f"robot {name}: controller period {period_ns / 1e9:g} s is not a multiple of "
                                 f"the control federate's period {self.dt:g} s")
            pipeline = ControlPipeline.from_block(block, period_ns / NS_PER_S)
            self.by_key[key] = Group(pipeline, period_ns, np.empty(0, np.int64))
        return key

    def join(self, key: str, ids: np.ndarray, blocks: Sequence[ControllerSpec | None]) -> None:
        """Followers ``ids`` (with these controller blocks) join group ``key`` at its end, in one call."""
        group = self.by_key[key]
        group.pipeline.add_rows(len(ids))
        _add_row_values(group, blocks)
        group.ids = np.concatenate([group.ids, ids])
        self.of.update(dict.fromkeys(ids.tolist(), group))

    def spawn(self, robots: Sequence[RobotSpec], followers: np.ndarray, ids: np.ndarray) -> None:
        """The rows ``followers`` of ``robots`` (ids ``ids``) join their groups: one call per group, the block work
        once per distinct block (robots of one template share theirs)."""
        controllers, controller_of = shared_blocks([robots[k].controller for k in followers.tolist()])
        keys = [self.key(block, robots[int(followers[np.flatnonzero(controller_of == c)[0]])].name)
                for c, block in enumerate(controllers)]
        # equal blocks that are distinct objects (specs built one by one) still join one group, in one call
        number = {key: g for g, key in enumerate(dict.fromkeys(keys))}
        group_of_row = np.array([number[key] for key in keys], np.int64)[controller_of]
        for key, g in number.items():
            mine = followers[group_of_row == g]
            self.join(key, ids[mine], [robots[k].controller for k in mine.tolist()])

    def despawn(self, gone: np.ndarray) -> None:
        """The followers ``gone`` leave their groups."""
        for group in self.by_key.values():
            out = np.isin(group.ids, gone)
            if out.any():
                group.pipeline.remove_rows(np.flatnonzero(out))
                group.ids = group.ids[~out]
        for rid in gone.tolist():
            self.of.pop(rid, None)

    def leave(self, robot: int) -> None:
        """Follower ``robot`` leaves its group (a maneuver frees it), if it is in one."""
        group = self.of.pop(robot, None)
        if group is not None:
            out = np.flatnonzero(group.ids == robot)
            group.pipeline.remove_rows(out)
            group.ids = np.delete(group.ids, out)

    def forget_path(self, robot: int) -> None:
        """Follower ``robot``'s law forgets its predecessor's trail (a new predecessor's is not the old one's)."""
        group = self.of.get(robot)
        if group is not None:
            group.pipeline.forget_path(np.flatnonzero(group.ids == robot))

    def rows(self, ids: np.ndarray) -> list[tuple[Group, np.ndarray]]:
        """Each group with followers and their rows in ``ids`` (the federate's row order)."""
        return [(g, rows_of(ids, g.ids)) for g in self.by_key.values() if len(g.ids)]

    def law_of_block(self, controller: ControllerSpec, name: str) -> Controller:
        """The law a follower joining with this block runs, with the block's parameters (for a maneuver's slot and
        gap): its group's law, or for a law whose rows carry their own parameters (``row_params``: the group's
        ``params`` are those of the block that made it) one with the block's own."""
        law = self.by_key[self.key(controller, name)].pipeline.law
        if not law.row_params:
            return law
        key = json.dumps(controller.settings, sort_keys=True)
        if key not in self._block_laws:
            self._block_laws[key] = law_from_block(controller.settings)
        return self._block_laws[key]

    def law_at(self, robot_id: int) -> Controller | None:
        """The law as follower ``robot_id``'s row sees it (its own parameters; ``Controller.at_rows``), None for one
        in no group."""
        group = self.of.get(robot_id)
        return None if group is None else group.pipeline.law.at_rows(np.flatnonzero(group.ids == robot_id))

    def law_of(self, robot_id: int) -> Controller | None:
        """The control law instance a follower runs (None for one in no group)."""
        group = self.of.get(robot_id)
        return None if group is None else group.pipeline.law
