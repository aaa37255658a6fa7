"""The control federate's maneuver layer: the state machines (``controllers.maneuvers.machine``), what each robot
heard from its maneuver partner, and the plan the world made of the scenario's ``maneuvers``.

The plan (plain data from ``orchestrator.build.world.maneuver_plan``): ``requests`` (``Request`` fields), ``settings``
(``ManeuverSettings`` values), ``paths`` ([points, closed] per reference path), ``lanes`` ({platoon id: [path,
offset]}) and ``blocks`` ({platoon id: controller block}).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from controllers.maneuvers.lanes import LanePath
from controllers.maneuvers.machine import (
    DRIVER,
    EXTERNAL,
    FOLLOWER,
    ManeuverMachine,
    ManeuverOutput,
    PlatoonLane,
    Request,
)
from core.robot_blocks import ControllerSpec
from core.robots import RobotSpec
from core.spawn_columns import block_column, spec_column
from federates.control.received import PEER_FIELDS, Received


class ManeuverLayer:
    """The machines of all rows, the partner messages they wait for, and the robots' dimensions by id."""

    def __init__(self, plan: Mapping[str, Any], law_of: Callable[..., Any]) -> None:
        self.blocks = {int(k): ControllerSpec.from_plain(v) for k, v in plan["blocks"].items()}
        paths = [LanePath(np.asarray(points, float), bool(closed)) for points, closed in plan["paths"]]
        lanes = {int(k): PlatoonLane(int(path), float(offset)) for k, (path, offset) in plan["lanes"].items()}
        requests = [Request(**r) for r in plan["requests"]]
        self.machine = ManeuverMachine(requests, SimpleNamespace(**plan["settings"]), paths, lanes, law_of)
        self.peer = Received(PEER_FIELDS)
        self._rear_overhang = np.zeros(1)  # by robot id

    def spawn(self, robots: Sequence[RobotSpec], external: Sequence[bool]) -> None:
        """Rows for new robots at the end: their platoon, position and role from the spec."""
        dims = {k: block_column(spec_column(robots, "dims"), k) for k in ("length_m", "width_m", "rear_overhang_m")}
        role = np.array([EXTERNAL if ext else DRIVER if s.predecessor is None else FOLLOWER
                         for s, ext in zip(robots, external, strict=True)], np.uint8)
        self.machine.add(np.array([s.id for s in robots], np.int64), role,
                         np.array([s.platoon for s in robots], np.int64),
                         np.array([s.position_in_platoon for s in robots], np.int64), dims,
                         block_column(spec_column(robots, "initial"), "v"))
        self.peer.add(np.full(len(robots), -1, np.int64))
        top = max(s.id for s in robots) + 1
        if top > len(self._rear_overhang):
            self._rear_overhang = np.concatenate([self._rear_overhang, np.zeros(top - len(self._rear_overhang))])
        self._rear_overhang[[s.id for s in robots]] = dims["rear_overhang_m"]

    def despawn(self, keep: np.ndarray) -> None:
        """Keeps the rows where ``keep`` is True."""
        self.machine.remove(keep)
        self.peer.remove(keep)

    def rear_overhang(self, ids: np.ndarray) -> np.ndarray:
        """Rear overhang [m] of robots by id (0 for unknown ids)."""
        ids = np.asarray(ids, np.int64)
        ok = (ids >= 0) & (ids < len(self._rear_overhang))
        return np.where(ok, self._rear_overhang[np.where(ok, ids, 0)], 0.0)

    def receive(self, rx: Mapping[str, np.ndarray], row_of_id: np.ndarray) -> None:
        """Keeps each row's newest message from its maneuver partner."""
        n = len(rx["receiver"])
        fields = np.stack([np.asarray(rx[name], np.float64) if name in rx else np.full(n, np.nan)
                           for name in PEER_FIELDS])
        self.peer.receive(rx, fields, row_of_id)

    def step(self, t_ns: int, est: Mapping[str, np.ndarray], pred: Received, leader: Received,
             kmax: np.ndarray) -> ManeuverOutput:
        """One step of every machine."""
        return self.machine.step(t_ns, est, self.peer.values, pred.values, pred.wanted, leader.wanted,
                                 self.rear_overhang, kmax)

    def platoon_state(self, ids: np.ndarray, pred: Received, leader: Received) -> dict[str, np.ndarray]:
        """The ``platoon_state`` port value: the message columns and whom each robot listens to."""
        def as_id(wanted: np.ndarray) -> np.ndarray:
            return np.where(wanted >= 0, wanted, np.nan).astype(np.float64)

        return {"id": ids, **self.machine.message(), "predecessor": as_id(pred.wanted), "leader": as_id(leader.wanted)}
