"""Run one scenario into a run directory: traces, run.json, metrics.json, plots and report.html.

A run directory is the unit of result: everything in it can be derived again from ``scenario.resolved.yaml`` and
``run.json`` (seed, version).
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import yaml

from . import __version__
from .advisories import lateral_stability_notes
from .core.federate import FederateError
from .core.timebase import seconds_to_ns
from .metrics import platoon_metrics, split_by_robot
from .recorder import VehicleRecorder
from .scenario import Problem, Scenario, ScenarioError
from .world import build_world


@dataclass
class RunResult:
    """What a run produced."""

    out_dir: Path
    run_info: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)
    error: FederateError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def resolved_dict(scenario: Scenario, seed: int) -> dict[str, Any]:
    """The scenario after defaults, overrides and the seed: what ``scenario.resolved.yaml`` holds."""
    data = scenario.model_dump(mode="json")
    data["seed"] = seed
    return data


def run_scenario(
    scenario: Scenario,
    out_dir: Path,
    seed: int | None = None,
    progress: bool = False,
    source: str = "<scenario>",
) -> RunResult:
    """Simulate ``scenario`` and write the run directory. Scenario-level inconsistencies raise ScenarioError;
    a failing federate is reported in the result (traces up to the failure are kept)."""
    seed = scenario.seed if seed is None else seed
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "scenario.resolved.yaml").write_text(
        yaml.safe_dump(resolved_dict(scenario, seed), sort_keys=False), encoding="utf-8"
    )
    try:
        world = build_world(scenario, out_dir=out_dir, seed=seed)
    except ValueError as exc:
        raise ScenarioError(source, [Problem("vehicles", str(exc))]) from None
    observers: list[Any] = []
    trace_path = out_dir / "trace" / "vehicles.parquet"
    if scenario.outputs.trace:
        period = seconds_to_ns(scenario.outputs.trace_period_s or scenario.step_s)
        observers.append(VehicleRecorder(trace_path, period))
    if progress:
        from .progress import ProgressObserver

        observers.append(ProgressObserver(scenario.name))
    error: FederateError | None = None
    t0 = time.perf_counter()
    try:
        world.scheduler.run(observers)
    except FederateError as exc:
        error = exc
    wall = time.perf_counter() - t0
    sim_s = world.scheduler.now_ns / 1e9
    run_info: dict[str, Any] = {
        "coopsim_version": __version__,
        "scenario": scenario.name,
        "seed": seed,
        "channel": scenario.channel.type,
        "robots": len(world.robots),
        "sim_time_s": sim_s,
        "wall_time_s": wall,
        "real_time_factor": sim_s / wall if wall > 0 else None,
        "steps": round(sim_s / scenario.step_s) + 1,
        "wall_time_by_federate_s": world.scheduler.wall_by_federate,
        "platform": {"python": sys.version.split()[0], "machine": platform.machine(), "system": platform.platform()},
        "status": "ok" if error is None else "failed",
        "notes": lateral_stability_notes(scenario, world.robots),
    }
    if error is not None:
        run_info["error"] = {"federate": error.federate, "robot": error.robot, "sim_time_s": error.t_ns / 1e9,
                             "message": str(error)}
    result = RunResult(out_dir, run_info, error=error)
    collisions = getattr(world.federates["physics"], "collisions", None)
    if collisions is not None and scenario.outputs.trace:
        _write_collisions(out_dir / "trace" / "collisions.parquet", collisions, world.robots)
    traces = _read_traces(out_dir)
    run_info["digest"] = trace_digest(traces)
    if error is None and "vehicles" in traces:
        control = world.federates["control"]
        gap_reference = {r.id: control.gap_reference(r.id) for r in world.robots if r.predecessor is not None}
        follower_series: dict[str, dict[str, np.ndarray]] = {}
        laws = {r.id: control.law_of(r.id).spacing_error for r in world.robots if control.law_of(r.id) is not None}
        metrics = platoon_metrics(traces["vehicles"], world.robots, gap_reference, traces.get("v2x"), follower_series,
                                  laws, collisions)
        channel_metrics = world.federates["v2x"].metrics()
        if channel_metrics:
            metrics["channel"] = json_safe(channel_metrics)
        result.metrics = metrics
        (out_dir / "metrics.json").write_text(json.dumps(json_safe(metrics), indent=2), encoding="utf-8")
        plots: list[Path] = []
        if scenario.outputs.plots:
            from .plots import plot_run

            plots = plot_run(out_dir / "plots", world.robots, split_by_robot(traces["vehicles"]), follower_series,
                             metrics["followers"])
        if scenario.outputs.report:
            from .report import write_run_report

            write_run_report(out_dir, run_info, metrics, plots)
    run_info["robot_names"] = {str(r.id): r.name for r in world.robots}
    (out_dir / "run.json").write_text(json.dumps(run_info, indent=2), encoding="utf-8")
    return result


def json_safe(value: Any) -> Any:
    """NaN and infinities become null, so every JSON file we write is strict JSON."""
    if isinstance(value, float):
        return value if np.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        return json_safe(value.item())
    return value


def _write_collisions(path: Path, events: list[tuple[int, int, int]], robots: list[Any]) -> None:
    """``trace/collisions.parquet``: one row per new contact between two bodies (oriented rectangles)."""
    import pyarrow as pa

    names = {r.id: r.name for r in robots}
    t, a, b = (np.asarray(col, np.int64) for col in zip(*events, strict=True)) if events else (
        np.empty(0, np.int64),) * 3
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"t_ns": t, "t_s": t / 1e9, "robot_a": a, "robot_b": b,
                             "name_a": [names.get(int(x), "") for x in a],
                             "name_b": [names.get(int(x), "") for x in b]}), path)


def _read_traces(out_dir: Path) -> dict[str, dict[str, np.ndarray]]:
    traces = {}
    for name in ("vehicles", "v2x"):
        path = out_dir / "trace" / f"{name}.parquet"
        if path.exists():
            table = pq.read_table(path)
            traces[name] = {
                col: _column(table.column(col)) for col in table.column_names
            }
    return traces


def _column(chunked: Any) -> np.ndarray:
    import pyarrow as pa

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
