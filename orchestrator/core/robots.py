"""Robots as the orchestrator sees them: a spec handed to every federate at spawn, and the live roster.

Robot-indexed port data is ordered like the roster: robots in spawn order, a despawned robot's row removed. Every
federate that keeps per-robot arrays appends rows on ``spawn`` and deletes them on ``despawn`` in the order it is
given, so all ports line up row by row without any lookup in the hot path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class RobotSpec:
    """Everything a federate may need to create its per-robot part.

    ``config`` is the robot's validated scenario entry (vehicle, controller, V2X station settings) as plain data.
    """

    id: int
    name: str
    spawn_ns: int = 0
    despawn_ns: int | None = None
    platoon: int = 0
    position_in_platoon: int = 0
    predecessor: int | None = None
    leader: int | None = None
    config: dict[str, Any] = field(default_factory=dict)


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
        """Append robots; a robot that is already alive is an error."""
        added = []
        for spec in specs:
            if spec.id in self._specs:
                raise ValueError(f"robot {spec.name} (id {spec.id}) is already alive")
            self._ids.append(spec.id)
            self._specs[spec.id] = spec
            added.append(spec)
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
