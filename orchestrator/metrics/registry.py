"""Metrics are a registry: a metric is one function, declared with ``@follower_metric`` or ``@run_metric``.

A follower metric gets a ``FollowerView`` (one follower's aligned series, see ``follower.py``) and returns the
keys it adds to that follower's entry of ``metrics.json``; a run metric gets the ``RunData`` and the follower
entries and returns a block of ``metrics.json`` (its ``section``), or None to add nothing. ``report`` names the
keys shown in the report's and terminal's tables. Built-ins run in the order below; installed plug-ins (entry
points in the ``coopsim.metrics`` group, each a ``Metric``) run after them, in name order, so a plug-in can read
what the built-ins computed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from core.registry import Registry

Scope = Literal["follower", "run"]


@dataclass(frozen=True)
class Metric:
    """One registered metric."""

    name: str
    scope: Scope
    compute: Callable[..., Mapping[str, Any] | None]
    report: tuple[str, ...] = ()
    section: str = "run"  # run metrics: the top-level key of metrics.json they fill
    doc: str = ""


def follower_metric(name: str, report: tuple[str, ...] = ()) -> Callable[[Callable[..., Any]], Metric]:
    """Declare ``fn(view: FollowerView) -> dict`` as a per-follower metric."""

    def wrap(fn: Callable[..., Any]) -> Metric:
        return Metric(name, "follower", fn, report, doc=(fn.__doc__ or "").strip())

    return wrap


def run_metric(name: str, section: str, report: tuple[str, ...] = ()) -> Callable[[Callable[..., Any]], Metric]:
    """Declare ``fn(run: RunData, followers: dict) -> dict | None`` as a run-level metric filling ``section``."""

    def wrap(fn: Callable[..., Any]) -> Metric:
        return Metric(name, "run", fn, report, section, (fn.__doc__ or "").strip())

    return wrap


_BUILTIN = "orchestrator.metrics.builtin"
BUILTIN_ORDER = (
    "spacing_error",
    "lateral_deviation",
    "min_gap",
    "l2_norms",
    "string_stability",
    "gamma",
    "leader_path",
    "min_ttc",
    "collisions",
    "aoi",
    "degradation",
    "detection",
    "link",
    "transition",
    "summary",
    "channel",
    "misbehaviour",
    "maneuvers",
    "cut_ins",
)
_ELSEWHERE = {"gamma": "orchestrator.metrics.excitation:gamma",
              "maneuvers": "orchestrator.metrics.maneuvers:maneuvers",
              "cut_ins": "orchestrator.metrics.maneuvers:cut_ins",
              "misbehaviour": "orchestrator.metrics.misbehaviour:misbehaviour",
              "detection": "orchestrator.metrics.misbehaviour:detection"}  # built-ins in a module of their own
METRICS = Registry("metric", {name: _ELSEWHERE.get(name, f"{_BUILTIN}:{name}") for name in BUILTIN_ORDER},
                   group="coopsim.metrics")


def selected() -> list[Metric]:
    """Every metric to compute, built-ins first (in their order), then installed plug-ins by name."""
    names = [n for n in BUILTIN_ORDER if n in METRICS.builtin_names()]
    names += [n for n in METRICS.names() if n not in BUILTIN_ORDER]
    metrics = []
    for name in names:
        metric = METRICS.get(name)
        if not isinstance(metric, Metric):
            raise TypeError(f"metric '{name}' is not a Metric (declare it with @follower_metric or @run_metric)")
        metrics.append(metric)
    return metrics


def report_columns(scope: Scope = "follower") -> list[str]:
    """The keys the report and terminal tables show, in metric order."""
    return [key for metric in selected() if metric.scope == scope for key in metric.report]
