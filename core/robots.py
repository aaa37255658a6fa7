"""Robots as the orchestrator sees them: a spec handed to every federate at spawn, and the live roster.

Robot-indexed port data is ordered like the roster: robots in spawn order, a despawned robot's row removed. Every
federate that keeps per-robot arrays appends rows on ``spawn`` and deletes them on ``despawn`` in the order it is
given, so all ports line up row by row without any lookup in the hot path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .robot_blocks import (
    AT_ORIGIN,
    DEFAULT_VEHICLE,
    VEHICLE_DIMS,
    CommandSourceSpec,
    ControllerSpec,
    Dims,
    DriveSpec,
    InitialState,
    VehicleBlock,
)


@dataclass(frozen=True)
class RobotSpec:
    """Everything a federate may need to create its per-robot part: identity, timing, platoon role and the typed
    blocks the world resolved (``core.robot_blocks``).

    ``dims`` left out is the vehicle's; exactly one of ``controller`` (a follower), ``driver`` (a leader) and
    ``command_source`` (driven from outside) is set for a robot of the world (a hand-made one may set none: a
    leader then drives at constant speed). ``posed_by`` names the federate that poses the robot (a traffic
    simulator's vehicle): it takes no commands then."""

    id: int
    name: str
    spawn_ns: int = 0
    despawn_ns: int | None = None
    platoon: int = 0
    position_in_platoon: int = 0
    predecessor: int | None = None
    leader: int | None = None
    vehicle: VehicleBlock = DEFAULT_VEHICLE
    dims: Dims = VEHICLE_DIMS
    initial: InitialState = AT_ORIGIN
    controller: ControllerSpec | None = None
    driver: DriveSpec | None = None
    command_source: CommandSourceSpec | None = None
    posed_by: str | None = None
    universe: int = 0
    """The batch point the robot belongs to when many points share one world (``orchestrator.batch.batched``):
    robots of different universes never sense, touch or hear each other."""
    stream_id: int | None = None
    """The id its random draws are keyed by: its id in a separate run of its point (None: ``id``)."""

    def __post_init__(self) -> None:
        if self.dims is VEHICLE_DIMS:
            object.__setattr__(self, "dims", self.vehicle.dims)

    @property
    def draw_id(self) -> int:
        """The robot id its keyed random draws use (``stream_id``, else ``id``)."""
        return self.id if self.stream_id is None else self.stream_id

    @property
    def external(self) -> bool:
        """Whether an outside source, not the control federate, drives this robot."""
        return self.command_source is not None

    def driven_by(self, federate: str) -> bool:
        """Whether federate ``federate`` is this robot's command source."""
        return self.command_source is not None and self.command_source.federate == federate


ROLE_FIELDS = ("id", "name", "spawn_ns", "despawn_ns", "platoon", "position_in_platoon", "predecessor", "leader")
"""A robot's identity, timing and platoon role: the fields it has besides its blocks."""


def robot_config(robot: RobotSpec) -> dict[str, Any]:
    """A robot's blocks as the plain ``config`` mapping the remote protocol carries (the scenario's forms)."""
    config: dict[str, Any] = {"vehicle": robot.vehicle.plain(), "initial": robot.initial.plain(),
                              "dims": robot.dims.plain()}
    for name in ("command_source", "driver", "controller"):
        block = getattr(robot, name)
        if block is not None:
            config[name] = block.plain()
    if robot.posed_by is not None:
        config["posed_by"] = robot.posed_by
    return config


def robot_fields(robot: RobotSpec) -> dict[str, Any]:
    """A robot as plain data: its identity and role fields and its ``config`` (``robot_config``)."""
    return {**{name: getattr(robot, name) for name in ROLE_FIELDS}, "config": robot_config(robot)}


def robot_from_fields(fields: Mapping[str, Any]) -> RobotSpec:
    """The robot of plain ``fields`` (``robot_fields``' form; a plug-in's spawn request): its blocks resolved like
    the world's. Keys of ``config`` besides the blocks are not kept."""
    config = fields.get("config") or {}
    vehicle = VehicleBlock.from_plain(config.get("vehicle"))
    blocks: dict[str, Any] = {
        "vehicle": vehicle,
        "dims": Dims.of(config.get("dims") or {}, vehicle.dims),
        "initial": InitialState.from_plain(config.get("initial")),
        "controller": _optional(ControllerSpec, config.get("controller")),
        "driver": _optional(DriveSpec, config.get("driver")),
        "command_source": _optional(CommandSourceSpec, config.get("command_source")),
        "posed_by": None if config.get("posed_by") is None else str(config["posed_by"]),
    }
    return RobotSpec(**{name: fields[name] for name in ROLE_FIELDS if name in fields}, **blocks)


def _optional(block: Any, plain: Mapping[str, Any] | None) -> Any:
    return None if plain is None else block.from_plain(plain)


class Roster:
    """The robots alive now, in the canonical row order shared by all robot-indexed port data."""

    def __init__(self) -> None:
        self._ids: list[int] = []
        self._specs: dict[int, RobotSpec] = {}
        self.version = 0  # bumped on every spawn or despawn: consumers re-check row alignment once per change

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, robot_id: int) -> bool:
        return robot_id in self._specs

    @property
    def ids(self) -> np.ndarray:
        """Robot ids in row order."""
        return np.asarray(self._ids, dtype=np.int64)

    def spec(self, robot_id: int) -> RobotSpec:
        """The spec a robot was spawned with."""
        return self._specs[robot_id]

    def add(self, specs: Iterable[RobotSpec]) -> list[RobotSpec]:
        """Append robots; a robot that is already alive (or given twice) is an error."""
        added = list(specs)
        ids = [spec.id for spec in added]
        if len(set(ids)) != len(ids) or not self._specs.keys().isdisjoint(ids):
            seen = set(self._specs)
            for spec in added:  # the slow path only to name the offender
                if spec.id in seen:
                    raise ValueError(f"robot {spec.name} (id {spec.id}) is already alive")
                seen.add(spec.id)
        self._ids.extend(ids)
        self._specs.update(zip(ids, added, strict=True))
        self.version += 1
        return added

    def remove(self, robot_ids: Sequence[int]) -> list[int]:
        """Remove robots; unknown ids are ignored (a robot despawned twice is despawned once)."""
        removed = [rid for rid in robot_ids if rid in self._specs]
        if removed:
            gone = set(removed)
            self._ids = [rid for rid in self._ids if rid not in gone]  # one pass: no O(N^2) list.remove
            for rid in removed:
                del self._specs[rid]
            self.version += 1
        return removed


def shared_rows(values: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
    """The distinct objects among ``values`` (by identity, in first-seen order) and each value's index into them.

    Robots built from one template share their vehicle and controller blocks (the same object), so a federate does
    per-configuration work once per distinct block and broadcasts it with the index, instead of once per robot."""
    keys = list(map(id, values))
    by_key = dict(zip(keys, values, strict=True))  # one object per identity; insertion order is first-seen order
    number = {key: k for k, key in enumerate(by_key)}
    return list(by_key.values()), np.array(list(map(number.__getitem__, keys)), np.int64)


class SharedParams(Sequence[Mapping[str, Any]]):
    """Per-robot parameters stored once per distinct mapping (a vehicle's ``params``) with an index per robot.

    It reads as a sequence of per-robot dicts (the same dict for robots of one template: read-only), and its
    ``column`` and ``rows`` do the per-parameter work once per distinct block, so spawning a fleet costs no Python
    per robot (10,000 robots of one template: one preset merge, not 10,000)."""

    def __init__(self, distinct: Sequence[Mapping[str, Any]], index: np.ndarray) -> None:
        self.distinct = list(distinct)
        self.index = np.asarray(index, np.int64)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, row: int) -> Mapping[str, Any]:  # type: ignore[override]
        return self.distinct[int(self.index[row])]

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        distinct = self.distinct
        return (distinct[k] for k in self.index.tolist())

    def take(self, rows: Sequence[int] | np.ndarray) -> SharedParams:
        """The parameters of the robots at ``rows``."""
        return SharedParams(self.distinct, self.index[np.asarray(rows, np.int64)])

    def rows(self, row_of: Callable[[Mapping[str, Any]], Any]) -> np.ndarray:
        """``row_of(params)`` for every robot as a float array (evaluated once per distinct block)."""
        per_block = np.asarray([row_of(p) for p in self.distinct], np.float64)
        return per_block[self.index]

    def column(self, key: str, default: float | None = None) -> np.ndarray:
        """One parameter for every robot (``default`` where a block lacks it; no default: it must be there)."""
        return self.rows(lambda p: float(p[key]) if default is None else float(p.get(key, default)))


def param_rows(params: Sequence[Mapping[str, Any]], row_of: Callable[[Mapping[str, Any]], Any]) -> np.ndarray:
    """``row_of`` over per-robot parameters as a float array: once per distinct block for ``SharedParams``."""
    if isinstance(params, SharedParams):
        return params.rows(row_of)
    return np.asarray([row_of(p) for p in params], np.float64)


def param_column(params: Sequence[Mapping[str, Any]], key: str, default: float | None = None) -> np.ndarray:
    """One parameter of every robot as a float array (see ``SharedParams.column``)."""
    return param_rows(params, lambda p: float(p[key]) if default is None else float(p.get(key, default)))


def rows_of(ids: np.ndarray, wanted: Sequence[int] | np.ndarray, missing: int | None = None) -> np.ndarray:
    """Row indices of the ``wanted`` robot ids within ``ids`` (a roster order), vectorised.

    An id that is not in ``ids`` raises KeyError naming it, unless ``missing`` is given (e.g. -1), which is
    then its row. This is the one way coopsim finds a robot's row by id."""
    ids = np.asarray(ids, dtype=np.int64)
    wanted = np.asarray(wanted, dtype=np.int64)
    if not len(ids):
        rows = np.full(len(wanted), -1, np.int64)
        found = np.zeros(len(wanted), bool)
    else:
        order = np.argsort(ids, kind="stable")
        pos = np.searchsorted(ids, wanted, sorter=order).clip(0, len(ids) - 1)
        rows = order[pos]
        found = ids[rows] == wanted
    if not found.all():
        if missing is None:
            raise KeyError(f"robot id {int(wanted[~found][0])} is not among the rows")
        rows = np.where(found, rows, missing)
    return rows.astype(np.int64, copy=False)


def align_rows(data: Mapping[str, Any] | None, ids: np.ndarray, fill: float = np.nan) -> dict[str, Any] | None:
    """Robot-indexed port ``data`` re-indexed to the rows of ``ids``: as is when the rows already match (the
    usual case, no copy), else each column gathered by robot id, with ``fill`` where a robot has no row (a held
    value that has not seen a spawn yet). Integer columns are filled with -1."""
    if data is None:
        return None
    own = data["id"]
    if own is ids or (len(own) == len(ids) and np.array_equal(own, ids)):
        return dict(data)
    rows = rows_of(own, ids, missing=-1)
    present = rows >= 0
    out: dict[str, Any] = {"id": np.asarray(ids, np.int64)}
    for key, values in data.items():
        if key == "id":
            continue
        values = np.asarray(values)
        if values.dtype.kind in "iub":
            column = np.full(len(ids), -1, np.int64 if values.dtype.kind != "b" else np.int8)
        else:
            column = np.full(len(ids), fill, np.float64 if values.dtype.kind != "O" else object)
        column[present] = values[rows[present]]
        out[key] = column
    return out
