"""Records the vehicles' trace (``trace/vehicles.parquet``) as an observer of the scheduler.

Rows are copied into preallocated (steps x robots) buffers, one slice assignment per column per recorded instant,
and written as a Parquet row group when a buffer fills or the roster changes. The file is closed on every exit
path, so a failed run leaves a readable trace up to the failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .ports import STATE_FIELDS
from .robots import RobotSpec
from .scheduler import BaseObserver
from .tables import ParquetAppender

# (column, port, field)
COLUMNS: tuple[tuple[str, str, str], ...] = (
    *((name, "state", name) for name in STATE_FIELDS),
    *((f"est_{name}", "estimate", name) for name in ("x", "y", "yaw", "v")),
    ("cmd_speed", "commands", "speed"),
    ("cmd_accel", "commands", "accel"),
    ("cmd_steer", "commands", "steer"),
    ("cmd_yaw_rate", "commands", "yaw_rate"),
    ("pred_age_s", "commands", "pred_age_s"),
    ("desired_gap_m", "commands", "desired_gap_m"),
    ("pred_x", "commands", "pred_x"),
    ("pred_y", "commands", "pred_y"),
    ("pred_v", "commands", "pred_v"),
)


class VehicleRecorder(BaseObserver):
    """Samples ``state``, ``estimate`` and ``commands`` every ``period_ns`` (on instants where ``trigger`` ran)."""

    def __init__(self, path: Path, period_ns: int, trigger: str = "physics", chunk_steps: int = 2048) -> None:
        self.path = Path(path)
        self.period_ns = period_ns
        self.trigger = trigger
        self.chunk_steps = chunk_steps
        self._table = ParquetAppender(self.path, flush_rows=0)
        self._next_ns = 0
        self._ids = np.empty(0, np.int64)
        self._times: list[int] = []
        self._buffers: dict[str, np.ndarray] = {}

    def _allocate(self, ids: np.ndarray) -> None:
        self._ids = ids.copy()
        n = len(ids)
        self._buffers = {col: np.empty((self.chunk_steps, n)) for col, _, _ in COLUMNS}
        self._times = []

    def on_spawn(self, t_ns: int, robots: Sequence[RobotSpec]) -> None:
        self.flush()

    def on_despawn(self, t_ns: int, robot_ids: Sequence[int]) -> None:
        self.flush()

    def on_instant(self, t_ns: int, bus: dict, stepped: Sequence[str]) -> None:
        if t_ns < self._next_ns or self.trigger not in stepped:
            return
        self._next_ns = t_ns + self.period_ns
        state = bus.get("state")
        if state is None or not len(state["id"]):
            return
        if len(self._times) == 0 or not np.array_equal(state["id"], self._ids):
            if self._times:
                self.flush()
            self._allocate(state["id"])
        k = len(self._times)
        self._times.append(t_ns)
        buffers = self._buffers
        for col, port, field in COLUMNS:
            data = bus.get(port)
            if data is None or field not in data or len(data[field]) != len(self._ids):
                buffers[col][k] = np.nan
            else:
                buffers[col][k] = data[field]
        if k + 1 == self.chunk_steps:
            self.flush()

    def flush(self) -> None:
        """Write buffered rows (time-major, robots in roster order within an instant)."""
        k = len(self._times)
        if k == 0:
            return
        n = len(self._ids)
        t_ns = np.repeat(np.asarray(self._times, np.int64), n)
        columns = {"t_ns": t_ns, "t_s": t_ns / 1e9, "robot": np.tile(self._ids, k)}
        for col, _, _ in COLUMNS:
            columns[col] = self._buffers[col][:k].reshape(-1)
        self._table.append(columns)
        self._table.flush()
        self._times = []

    def on_end(self, t_ns: int, error: BaseException | None) -> None:
        self.flush()
        self._table.close()
