"""Simulation time is an integer number of nanoseconds; these helpers convert at the edges only."""

from __future__ import annotations

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000


def seconds_to_ns(seconds: float) -> int:
    """Round a duration in seconds to the nearest nanosecond."""
    return round(seconds * NS_PER_S)


def ns_to_seconds(t_ns: int) -> float:
    """Nanoseconds to float seconds (for models and reports, never for bookkeeping)."""
    return t_ns / NS_PER_S
