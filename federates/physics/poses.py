"""Externally posed robots: the ``poses`` port a pose source (the SUMO federate) publishes, and the physics
federate's inbox that teleports the robots at the time each pose is valid.

A source publishes at instant t the poses its robots will have at ``t_ns`` >= t (SUMO has already advanced to
its next step); the physics federate takes the port delayed and queued, keeps the rows until their ``t_ns`` comes
and then overwrites those robots' state, after its vehicle models stepped. Only robots of the posed body model
(``models.posed.PosedBody``) move this way; a row naming another robot is counted as ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.ports import STATE_FIELDS, port
from core.robots import rows_of

POSE_FIELDS: dict[str, Any] = {
    "t_ns": ("int64", "ns"),
    "robot": ("int64", "robot id"),
    **{name: STATE_FIELDS[name] for name in ("x", "y", "yaw", "v", "a", "yaw_rate")},
}
"""Fields of ``poses``: the rear-axle pose and motion of a robot at ``t_ns``, in the local frame (REP-103)."""

POSES = port("poses", POSE_FIELDS, index="event", doc="poses of externally driven robots (traffic simulators), "
             "valid at t_ns")

_POSE_KEYS = ("x", "y", "yaw", "v", "a", "yaw_rate")


class PoseInbox:
    """Pose rows received but not yet due, and the counts for ``run.json``."""

    def __init__(self) -> None:
        self._pending: list[Mapping[str, np.ndarray]] = []
        self.applied = 0
        self.ignored = 0

    def receive(self, tables: Sequence[Mapping[str, np.ndarray]]) -> None:
        """Keep every table published since the last step (oldest first)."""
        self._pending.extend(table for table in tables if len(table["robot"]))

    def due(self, t_ns: int) -> list[Mapping[str, np.ndarray]]:
        """The rows valid at or before ``t_ns``, oldest first (each table cut to its due rows); the rest wait."""
        out, keep = [], []
        for table in self._pending:
            when = np.asarray(table["t_ns"])
            now = when <= t_ns
            if now.all():
                out.append(table)
            elif now.any():
                out.append({k: np.asarray(v)[now] for k, v in table.items()})
                keep.append({k: np.asarray(v)[~now] for k, v in table.items()})
            else:
                keep.append(table)
        self._pending = keep
        return out

    def apply(self, t_ns: int, ids: np.ndarray, groups: Mapping[Any, Any],
              group_rows: Mapping[Any, np.ndarray]) -> None:
        """Teleport the posed robots to their rows due at ``t_ns`` (rows in publication order: the newest wins)."""
        for table in self.due(t_ns):
            rows = rows_of(ids, np.asarray(table["robot"], np.int64), missing=-1)
            taken = np.zeros(len(rows), bool)
            for key, group in groups.items():
                members = group_rows[key]
                if not hasattr(group, "set_pose") or not len(members):
                    continue
                local = np.full(len(ids), -1, np.int64)  # roster row -> row within this group
                local[members] = np.arange(len(members))
                mine = rows >= 0
                mine[mine] = local[rows[mine]] >= 0
                if mine.any():
                    group.set_pose(local[rows[mine]], {k: np.asarray(table[k], np.float64)[mine] for k in _POSE_KEYS})
                    taken |= mine
            self.applied += int(taken.sum())
            self.ignored += int((~taken).sum())
