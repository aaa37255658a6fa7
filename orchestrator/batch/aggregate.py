"""From follower metrics to one number per run and per point: the worst-follower rule, seed replicates, and
string stability.

The worst-follower rule is ``orchestrator.metrics.worst`` (the only one: metrics.json's run summary,
sweep.json/.csv/.html, comparison.json/.html and the tables the command line prints). With seed replicates a sweep
point reports the mean (and sample standard deviation) of the runs' worst values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..metrics.worst import lowest_is_worst, worst_over_followers
from .criteria import CHOICES, DEFAULT, Criterion, edge_note, parse_criterion

__all__ = ["lowest_is_worst", "worst_over_followers"]  # the rule lives with the metrics; re-exported for callers

STABILITY_METRIC = DEFAULT.metric
"""The default criterion's metric (``--criterion`` picks another: ``criteria.py``)."""
CRITERION_METRICS = tuple(dict.fromkeys(parse_criterion(c).metric for c in CHOICES))


def is_stable(ratio: float | None, collisions: float | None, tolerance: float = 0.0) -> bool | None:
    """String stability of one run: the worst follower's ratio of the criterion (by default the L2 spacing-error
    ratio) <= 1 + tolerance and no collision. None when it cannot be judged (no ratio: e.g. a platoon of two, a
    predecessor with nothing to amplify, or |Gamma| without a sinusoid leader)."""
    if collisions is not None and collisions > 0:
        return False
    if ratio is None:
        return None
    return ratio <= 1.0 + tolerance


def summarise_run(record: dict[str, Any], metrics: Mapping[str, Any], names: Sequence[str],
                  criterion: Criterion = DEFAULT) -> None:
    """Add to a run's record the worst follower of each metric of ``names``, every follower's value, the metrics
    the run reported (``available``) and what string stability is judged on: the criterion's worst ratio, and
    the worst ratio of every criterion (``ratios``) so a sweep can be judged again under another one."""
    followers = metrics.get("followers", {})
    record["available"] = sorted({k for f in followers.values() for k in f})
    record["worst"] = {m: worst_over_followers(followers, m) for m in names}
    record["followers"] = {name: {m: f.get(m) for m in names} for name, f in followers.items()}
    collisions = worst_over_followers(followers, "collisions")
    ratios = {m: worst_over_followers(followers, m) for m in CRITERION_METRICS}
    record["stability"] = {criterion.metric: ratios[criterion.metric], "ratios": ratios,
                           "collisions": None if collisions is None else int(collisions)}


def mean_std(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation of the known values (std None below two values)."""
    known = [float(v) for v in values if v is not None]
    if not known:
        return None, None
    mean = sum(known) / len(known)
    if len(known) < 2:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in known) / (len(known) - 1))


def aggregate_point(point: dict[str, Any], runs: list[dict[str, Any]], metrics: Sequence[str], replicated: bool,
                    tolerance: float, criterion: Criterion = DEFAULT) -> None:
    """Fill a point's status, metrics (mean over replicates of the worst follower, and per follower) and
    stability from its runs' records (summarised by ``summarise_run``)."""
    ok = [r for r in runs if r["status"] == "ok"]
    point["status"] = "ok" if len(ok) == len(runs) else "failed" if not ok else "partial"
    errors = [r["error"] for r in runs if r.get("error")]
    if errors:
        point["error"] = errors[0]
    result: dict[str, Any] = {}
    for m in metrics:
        mean, std = mean_std(r["worst"][m] for r in ok)
        entry: dict[str, Any] = {"worst": mean}
        if replicated:
            entry["std"] = std
        names = list(dict.fromkeys(n for r in ok for n in r["followers"]))
        entry["followers"] = {n: mean_std(r["followers"].get(n, {}).get(m) for r in ok)[0] for n in names}
        result[m] = entry
    point["metrics"] = result
    key = criterion.metric
    ratios = [r["stability"][key] for r in ok if r["stability"][key] is not None]
    collisions = [r["stability"]["collisions"] for r in ok if r["stability"]["collisions"] is not None]
    verdicts = [is_stable(r["stability"][key], r["stability"]["collisions"], tolerance) for r in ok]
    # worst over replicates: a point is string-stable only if every replicate is
    stable: bool | None
    if False in verdicts:
        stable = False
    elif ok and len(ok) == len(runs) and all(verdicts):
        stable = True
    else:
        stable = None
    every = {m: [r["stability"]["ratios"][m] for r in ok if r["stability"]["ratios"].get(m) is not None]
             for m in CRITERION_METRICS}
    point["stability"] = {key: max(ratios) if ratios else None,
                          "collisions": max(collisions) if collisions else None, "stable": stable,
                          "criterion": criterion.name,
                          "ratios": {m: max(v) if v else None for m, v in every.items()}}


def is_number(value: Any) -> bool:
    """A finite int or float (booleans are not numbers here)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def sort_key(value: Any) -> tuple[int, Any]:
    """Numbers in order, then everything else by its text."""
    return (0, value) if is_number(value) else (1, str(value))


def min_stable(points: Iterable[Mapping[str, Any]], param: str, tolerance: float = 0.0,
               criterion: Criterion = DEFAULT) -> dict[str, Any]:
    """For each combination of the other parameters, the smallest value of ``param`` whose point is string-stable
    under ``criterion`` (by default worst ``l2_ratio_spacing_error`` <= 1 + tolerance and no collision). A point
    judged under one criterion can be judged again under another from its ``ratios``. ``edge`` warns when the
    answer sits at the edge of the swept values.

    ``points`` are sweep points: ``{"params": {path: value}, "status": "ok", "stability":
    {"l2_ratio_spacing_error": float | None, "collisions": int | None}}``. Points that failed or cannot be judged
    count as neither stable nor unstable. ``consistent`` says whether every larger swept value is stable too (a
    False flags a non-monotonic result worth a closer look)."""
    groups: dict[str, dict[str, Any]] = {}
    for point in points:
        others = {k: v for k, v in point["params"].items() if k != param}
        key = json.dumps(others, sort_keys=True, default=str)
        group = groups.setdefault(key, {"others": others, "stable": [], "unstable": [], "undetermined": []})
        value = point["params"][param]
        stab = point.get("stability") or {}
        verdict = None
        if point.get("status") == "ok":
            ratio = (stab.get("ratios") or {}).get(criterion.metric, stab.get(criterion.metric))
            verdict = is_stable(ratio, stab.get("collisions"), tolerance)
        group["stable" if verdict else "unstable" if verdict is False else "undetermined"].append(value)
    out = []
    for group in groups.values():
        for k in ("stable", "unstable", "undetermined"):
            group[k].sort(key=sort_key)
        value = group["stable"][0] if group["stable"] else None
        above = [v for v in group["unstable"] + group["undetermined"]
                 if value is not None and sort_key(v) > sort_key(value)]
        entry = {"others": group["others"], "value": value, "consistent": value is not None and not above,
                 "stable": group["stable"], "unstable": group["unstable"], "undetermined": group["undetermined"]}
        entry["edge"] = edge_note(entry, group["stable"] + group["unstable"] + group["undetermined"])
        out.append(entry)
    return {"param": param, "tolerance": tolerance, "criterion": criterion.describe(tolerance),
            "criterion_name": criterion.name, "metric": criterion.metric, "groups": out}


RULE = "worst follower over all platoons (smallest for pdr and min_* metrics, largest for the others)"

__all__ = ["CRITERION_METRICS", "RULE", "STABILITY_METRIC", "aggregate_point",
           "is_number", "is_stable", "lowest_is_worst", "mean_std",
           "min_stable", "sort_key", "summarise_run", "worst_over_followers"]
