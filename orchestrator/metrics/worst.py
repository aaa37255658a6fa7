"""The worst-follower rule, the only one: the run summary of ``metrics.json``, sweeps and comparisons all use it.

A run's value of a follower metric is the worst value over every follower of every platoon in the run. Worst is the
smallest for ``pdr`` and every ``min_*`` metric (``min_gap_m``, ``min_ttc_s``: less margin is worse) and the largest
for every other metric (errors, deviations, ratios, latencies, ages, intervals, collision counts). Followers that do
not report a metric are skipped; the value is None when none reports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def lowest_is_worst(metric: str) -> bool:
    """Whether a smaller value of ``metric`` is the worse one (``pdr`` and the ``min_*`` margins)."""
    return metric == "pdr" or metric.startswith("min_")


def worst_over_followers(followers: Mapping[str, Mapping[str, Any]], metric: str) -> float | None:
    """The worst follower's value of ``metric`` (None when no follower reports it)."""
    values = [float(f[metric]) for f in followers.values() if f.get(metric) is not None]
    if not values:
        return None
    return min(values) if lowest_is_worst(metric) else max(values)
