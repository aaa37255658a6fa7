"""Speed checks that hold on a loaded machine: never a wall-clock bound against a literal, but a ratio of two
timings taken in the same test, interleaved and each the best of several rounds, so that load slows both alike.
The ratio tells how the cost grows (vectorised or not, quadratic or not), which is what a speed test is about."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_times(*calls: Callable[[], object], rounds: int = 15, inner: int = 1) -> list[float]:
    """The best (smallest) time per call of each of ``calls``, run ``inner`` times per round, the calls taking
    turns round by round so that a burst of load falls on all of them."""
    best = [float("inf")] * len(calls)
    for call in calls:
        call()  # compiled, cached, warmed
    for _ in range(rounds):
        for index, call in enumerate(calls):
            start = time.perf_counter()
            for _ in range(inner):
                call()
            best[index] = min(best[index], (time.perf_counter() - start) / inner)
    return best
