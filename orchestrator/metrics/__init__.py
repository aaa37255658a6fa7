"""Platoon metrics, computed from a run directory alone (``scenario.resolved.yaml`` and ``trace/*.parquet``).

``compute_metrics`` is the one code path: the runner calls it after a run and ``coopsim metrics RUN_DIR`` calls it
later, so both write the same ``metrics.json`` byte for byte. Each metric is one function in the ``METRICS``
registry (``registry.py``); installed plug-ins join through the ``coopsim.metrics`` entry-point group.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..recording.limits import PLOT_POINTS
from ..recording.safe_files import write_atomic

if TYPE_CHECKING:
    from .follower import FollowerView
    from .geometry import Series, l2_norm, path_projection, signed_path_distance, split_by_robot
    from .registry import METRICS, Metric, follower_metric, report_columns, run_metric
    from .rundata import DIGEST_TRACES, RunData, file_digest, read_traces

_LAZY = {
    "FollowerView": "follower", "Series": "geometry", "l2_norm": "geometry", "path_projection": "geometry",
    "signed_path_distance": "geometry", "split_by_robot": "geometry", "METRICS": "registry", "Metric": "registry",
    "follower_metric": "registry", "report_columns": "registry", "run_metric": "registry",
    "DIGEST_TRACES": "rundata", "RunData": "rundata", "file_digest": "rundata", "read_traces": "rundata",
}
"""Names this package exports from its modules, imported on first use: a process that needs one module (the
resource estimate reads ``limits``, a plot worker unpickles a ``Series``) does not pay for all of them."""

__all__ = [
    "DIGEST_TRACES", "METRICS", "PLOT_POINTS", "FollowerView", "Metric", "RunData", "Series", "compute_metrics",
    "file_digest", "follower_metric", "json_safe", "l2_norm", "metrics_json", "path_projection", "read_traces",
    "report_columns", "run_metric", "signed_path_distance", "split_by_robot", "write_metrics",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


ROLE_METRICS = ("collisions", "link", "transition")
"""The follower metrics that speak of the whole run (contacts, links, transitions): computed also for a robot that
never followed in steady state, whose steady-state metrics are absent."""


def compute_metrics(run: RunData) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]]]:
    """``metrics.json``'s content (``followers`` by name, ``run``, and whatever run metrics add, e.g. ``channel``)
    and, per follower name, the time series behind it for plots (``t_s``, ``spacing_error_m``, ``lateral_m``)."""
    from .follower import follower_views
    from .registry import selected
    from .transitions import roles_json

    metrics = selected()
    entries: dict[int, dict[str, Any]] = {}
    series: dict[str, dict[str, np.ndarray]] = {}
    followers: dict[str, dict[str, Any]] = {}
    for view in follower_views(run, entries):
        entry: dict[str, Any] = {}
        entries[view.robot.id] = entry
        for metric in metrics:
            if metric.scope == "follower" and (len(view.im) or metric.name in ROLE_METRICS):
                entry.update(metric.compute(view) or {})
        followers[view.robot.name] = entry
        series[view.robot.name] = _plot_series(view)
        del view  # a follower's series go before the next follower's are built, not after
    out: dict[str, Any] = {"followers": followers}
    out["roles"] = roles_json(run)
    for metric in metrics:
        if metric.scope == "run":
            block = metric.compute(run, followers)
            if block:
                out[metric.section] = block
    return out, series


def _plot_series(view: FollowerView) -> dict[str, np.ndarray]:
    """A follower's steady samples for plots, thinned to ``PLOT_POINTS`` and with a NaN where samples are missing
    (a transition left out), so a line is broken there instead of drawn straight across."""
    thin = slice(None, None, max(1, len(view.im) // PLOT_POINTS))  # plots need no more points than pixels
    t_ns = view.me.t_ns[view.im][thin]
    error, lateral = view.error_series[thin], view.lateral[view.im][thin]
    if len(t_ns) > 2:
        step = np.diff(t_ns)
        gaps = np.flatnonzero(step > 1.5 * np.median(step)) + 1
        t_ns = np.insert(t_ns, gaps, t_ns[gaps - 1] + step[gaps - 1] // 2)  # times stay finite and increasing
        error, lateral = np.insert(error, gaps, np.nan), np.insert(lateral, gaps, np.nan)
    return {"t_s": t_ns / 1e9, "spacing_error_m": error, "lateral_m": lateral}


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


def metrics_json(metrics: dict[str, Any]) -> str:
    """The exact text of ``metrics.json``."""
    return json.dumps(json_safe(metrics), indent=2)


def write_metrics(run: RunData) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]]]:
    """Compute the metrics of ``run`` and write ``metrics.json`` into its directory."""
    metrics, series = compute_metrics(run)
    write_atomic(Path(run.out_dir) / "metrics.json", metrics_json(metrics))  # whole or absent, never through a link
    return metrics, series
