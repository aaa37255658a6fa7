"""Records the vehicles' trace (``trace/vehicles.parquet``) as an observer of the scheduler.

Published port values are immutable (see the scheduler), so an instant costs one list append of references; columns
are assembled with one ``np.concatenate`` per field when a chunk is written (every ``chunk_rows`` rows or when
the roster changes). The file is closed on every exit path, so a failed run leaves a readable trace up to the failure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.ports import BUILTIN_PORTS, STATE_FIELDS
from core.robots import RobotSpec, align_rows
from orchestrator.engine.scheduler import BaseObserver

from .tables import ParquetAppender

# (column, port, field)
COLUMNS: tuple[tuple[str, str, str], ...] = (
    *((name, "state", name) for name in STATE_FIELDS),
    *((f"est_{name}", "estimate", name) for name in ("x", "y", "yaw", "v")),
    ("cmd_speed", "commands", "speed"),
    ("cmd_accel", "commands", "accel"),
    ("cmd_steer", "commands", "steer"),
    ("cmd_yaw_rate", "commands", "yaw_rate"),
    ("pred_age_s", "control_diag", "pred_age_s"),
    ("desired_gap_m", "control_diag", "desired_gap_m"),
    ("pred_x", "control_diag", "pred_x"),
    ("pred_y", "control_diag", "pred_y"),
    ("pred_v", "control_diag", "pred_v"),
    ("degraded", "control_diag", "degraded"),
    ("range_m", "range", "range_m"),
)
_PORTS = ("state", "estimate", "commands", "control_diag", "range")


def column_units() -> dict[str, str]:
    """SI unit of every column of ``trace/vehicles.parquet`` (from the built-in port contracts)."""
    specs = {spec.name: spec for spec in BUILTIN_PORTS}
    units = {"t_ns": "ns", "t_s": "s", "robot": "robot id"}
    for column, port, field in COLUMNS:
        found = specs[port].field(field)
        if found is not None:
            units[column] = found.unit
    return units


class VehicleRecorder(BaseObserver):
    """Samples ``state``, ``estimate`` and ``commands`` every ``period_ns`` (on instants where ``trigger`` ran)."""

    def __init__(self, path: Path, period_ns: int, trigger: str = "physics", chunk_rows: int = 262_144,
                 appender: Callable[..., Any] = ParquetAppender) -> None:
        """``appender``: what takes the columns (a ``ParquetAppender``'s signature; a batched world's
        ``split.SplitAppender``)."""
        self.path = Path(path)
        self.period_ns = period_ns
        self.trigger = trigger
        self.chunk_rows = chunk_rows  # rows (instants x robots) per row group: bounds memory at any fleet size
        self._table = appender(self.path, flush_rows=0, units=column_units())
        self._next_ns = 0
        self._ids: np.ndarray | None = None
        self._samples: list[tuple[Any, ...]] = []  # (t_ns, state, estimate, commands, range)
        self._failures = ParquetAppender.failures

    def on_spawn(self, t_ns: int, robots: Sequence[RobotSpec]) -> None:
        self.flush()

    def on_despawn(self, t_ns: int, robot_ids: Sequence[int]) -> None:
        self.flush()

    def on_instant(self, t_ns: int, bus: dict, stepped: Sequence[str]) -> None:
        if ParquetAppender.failures != self._failures:  # a write failed somewhere: stop now if it was ours
            self._failures = ParquetAppender.failures
            self._table.check()
        if t_ns < self._next_ns or self.trigger not in stepped:
            return
        self._next_ns = t_ns + self.period_ns
        state = bus.get("state")
        if state is None or not len(state["id"]):
            return
        if self._ids is not state["id"] and (self._ids is None or not np.array_equal(self._ids, state["id"])):
            self.flush()
        self._ids = state["id"]
        self._samples.append((t_ns, *(bus.get(port) for port in _PORTS)))
        if len(self._samples) * len(self._ids) >= self.chunk_rows:
            self.flush()

    def flush(self) -> None:
        """Write buffered samples (time-major, robots in roster order within an instant)."""
        if not self._samples or self._ids is None:
            self._samples = []
            return
        k = len(self._samples)
        ids = np.asarray(self._samples[0][1]["id"])
        n = len(ids)
        t_ns = np.repeat(np.asarray([s[0] for s in self._samples], np.int64), n)
        columns: dict[str, np.ndarray] = {"t_ns": t_ns, "t_s": t_ns / 1e9, "robot": np.tile(ids, k)}
        missing = np.full(n, np.nan)
        same: set[int] = set()  # id() of id arrays equal to ``ids`` (held by the samples, so ids stay unique)
        for slot, port in enumerate(_PORTS, start=1):
            datas = [sample[slot] for sample in self._samples]
            usable = [d if d is None or _same_rows(d["id"], ids, same) else align_rows(d, ids) for d in datas]
            for col, col_port, field in COLUMNS:
                if col_port != port:
                    continue
                parts = [missing if d is None else d.get(field, missing) for d in usable]
                columns[col] = np.concatenate(parts).astype(np.float64, copy=False)
        self._table.append(columns)
        self._table.flush()
        self._samples = []

    def on_end(self, t_ns: int, error: BaseException | None) -> None:
        try:
            self.flush()
        finally:
            self._table.close()  # whatever failed, the file gets its footer: readable up to its last row group


def _same_rows(own: np.ndarray, ids: np.ndarray, same: set[int]) -> bool:
    """Whether a port value's ``id`` column is ``ids``; each distinct array is compared once per flush."""
    if id(own) in same or own is ids:
        return True
    if len(own) == len(ids) and np.array_equal(own, ids):
        same.add(id(own))
        return True
    return False
