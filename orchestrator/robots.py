"""Robots as the orchestrator sees them: a spec handed to every federate at spawn, and the live roster.

Robot-indexed port data is ordered like the roster: robots in spawn order, a despawned robot's row removed. Every
federate that keeps per-robot arrays appends rows on ``spawn`` and deletes them on ``despawn`` in the order it is
given, so all ports line up row by row without any lookup in the hot path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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
        return added

    def remove(self, robot_ids: Sequence[int]) -> list[int]:
        """Remove robots; unknown ids are ignored (a robot despawned twice is despawned once)."""
        removed = [rid for rid in robot_ids if rid in self._specs]
        for rid in removed:
            self._ids.remove(rid)
            del self._specs[rid]
        return removed


def rows_of(ids: np.ndarray, wanted: Sequence[int]) -> np.ndarray:
    """Row indices of ``wanted`` robot ids within ``ids`` (the roster order)."""
    lookup = {int(rid): row for row, rid in enumerate(ids)}
    return np.asarray([lookup[int(w)] for w in wanted], dtype=np.int64)
