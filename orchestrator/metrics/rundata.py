"""A run directory read back: the resolved scenario, its robots, their control laws and the recorded traces.

This is everything metrics, plots and reports may use: nothing here touches a live federate, so any of them can be
recomputed later from the directory alone (``coopsim metrics RUN_DIR``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..core.robots import RobotSpec
from .geometry import Columns, Series, split_by_robot

DIGEST_TRACES = ("vehicles", "v2x")
"""The traces the run digest covers (``run.json`` ``digest``)."""


@dataclass
class RunData:
    """What a run directory holds, loaded."""

    out_dir: Path
    scenario: Any
    robots: list[RobotSpec]
    traces: dict[str, dict[str, np.ndarray]]
    laws: dict[int, Any] = field(default_factory=dict)  # follower id -> its control law (rebuilt from the scenario)
    _series: dict[int, Series] | None = None

    @classmethod
    def load(cls, out_dir: Path) -> RunData:
        """Read ``scenario.resolved.yaml`` and every ``trace/*.parquet`` of ``out_dir``."""
        from ..scenario import load_scenario
        from ..world import expand_robots

        out_dir = Path(out_dir)
        scenario = load_scenario(out_dir / "scenario.resolved.yaml")
        robots = expand_robots(scenario)
        trace_dir = out_dir / "trace"
        names = sorted(p.stem for p in trace_dir.glob("*.parquet")) if trace_dir.is_dir() else []
        return cls(out_dir, scenario, robots, read_traces(out_dir, names), build_laws(robots))

    @property
    def vehicles(self) -> dict[int, Series]:
        """The vehicles trace per robot, time-sorted (computed once)."""
        if self._series is None:
            self._series = split_by_robot(self.traces["vehicles"]) if "vehicles" in self.traces else {}
        return self._series

    def trace(self, name: str) -> Columns | None:
        """Columns of ``trace/<name>.parquet`` (None when the run did not write it)."""
        return self.traces.get(name)


def build_laws(robots: Iterable[RobotSpec]) -> dict[int, Any]:
    """Each follower's control law, built from its resolved controller block exactly as the run built it."""
    from controllers import CONTROLLERS

    from ..scenario.model import BLOCK_KEYS

    laws: dict[int, Any] = {}
    for robot in robots:
        config = robot.config.get("controller")
        if robot.predecessor is None or config is None:
            continue
        law_cls = CONTROLLERS.get(config["type"])
        laws[robot.id] = law_cls(law_cls.Params(**{k: v for k, v in config.items() if k not in BLOCK_KEYS}))
    return laws


def read_traces(out_dir: Path, names: Iterable[str] = DIGEST_TRACES) -> dict[str, dict[str, np.ndarray]]:
    """Columns of ``trace/<name>.parquet`` for each name that exists; strings as object arrays."""
    traces = {}
    for name in names:
        path = Path(out_dir) / "trace" / f"{name}.parquet"
        if path.exists():
            table = pq.read_table(path)
            traces[name] = {col: _column(table.column(col)) for col in table.column_names}
    return traces


def _column(chunked: Any) -> np.ndarray:
    if pa.types.is_dictionary(chunked.type):
        return np.asarray(chunked.cast(pa.string()).to_pylist(), dtype=object)
    if pa.types.is_string(chunked.type):
        return np.asarray(chunked.to_pylist(), dtype=object)
    return chunked.to_numpy()


def trace_digest(traces: dict[str, dict[str, np.ndarray]]) -> str:
    """SHA-256 over every trace column's name and bytes, in a fixed order: equal digests, identical traces."""
    h = hashlib.sha256()
    for name in sorted(traces):
        for col in sorted(traces[name]):
            h.update(f"{name}.{col}".encode())
            values = traces[name][col]
            if values.dtype == object:
                h.update("\x1f".join(map(str, values)).encode())
            else:
                h.update(np.ascontiguousarray(values).tobytes())
    return h.hexdigest()
