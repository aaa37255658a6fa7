"""Real-time pacing: simulation time follows the wall clock at a chosen factor, for anything with real time in the
loop (a ROS 2 stack, a robot, an ECU on a CAN bus).

The scheduler calls ``wait`` before each instant and ``finished`` after it. An instant at simulation time ``t``
starts no earlier than ``t / factor`` after the run's start, so the simulation never runs ahead of the wall clock
(an outside message that arrives at wall time ``w`` is taken at the first instant with ``t >= w * factor``).
Lateness is how far behind its wall-clock time each instant finished; it is kept in a logarithmic histogram
(bins 1.2 % wide, from 1 us to 1000 s), so a run of any length costs the same memory and the percentiles are exact
to a bin (and never above the maximum, which is kept exactly).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

SPIN_S = 0.0005
"""The last half millisecond before an instant is waited by polling the clock: ``time.sleep`` alone overshoots by
50-100 us on Linux, and more on a loaded machine."""

_EDGES = np.geomspace(1e-6, 1e3, 1801)  # lateness histogram bin edges [s]


class RealtimePacer:
    """Paces a run to ``factor`` x real time and measures lateness."""

    def __init__(self, factor: float, late_warning_s: float = 0.05,
                 warn: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if factor <= 0:
            raise ValueError(f"realtime factor must be positive, got {factor}")
        self.factor = factor
        self.late_warning_s = late_warning_s
        self._warn = warn
        self._clock = clock
        self._start: float | None = None
        self._last_finish: float | None = None
        self._t0_ns = 0
        self._counts = np.zeros(len(_EDGES) + 1, np.int64)
        self.max_late_s = 0.0
        self.instants = 0
        self.late_instants = 0  # instants that finished more than late_warning_s behind
        self.first_late_s: float | None = None  # simulation time of the first such instant

    def _target(self, t_ns: int) -> float:
        assert self._start is not None
        return self._start + (t_ns - self._t0_ns) / 1e9 / self.factor

    def wait(self, t_ns: int) -> None:
        """Block until the wall-clock time of simulation time ``t_ns`` (the first call starts the clock)."""
        if self._start is None:
            self._start, self._t0_ns = self._clock(), t_ns
            return
        target = self._target(t_ns)
        remaining = target - self._clock()
        if remaining > SPIN_S:
            time.sleep(remaining - SPIN_S)
        while self._clock() < target:
            pass

    def finished(self, t_ns: int) -> None:
        """Record how late the instant at ``t_ns`` finished."""
        now = self._clock()
        self._last_finish = now
        late = max(now - self._target(t_ns), 0.0)
        self.instants += 1
        self._counts[np.searchsorted(_EDGES, late)] += 1
        self.max_late_s = max(self.max_late_s, late)
        if late > self.late_warning_s:
            self.late_instants += 1
            if self.first_late_s is None:
                self.first_late_s = t_ns / 1e9
                if self._warn is not None:
                    self._warn(f"warning: the run cannot keep up with {self.factor:g}x real time: the instant at "
                               f"t = {t_ns / 1e9:.3f} s finished {late * 1e3:.1f} ms late")

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile of lateness [s]: the upper edge of its histogram bin, but never more than the
        largest lateness measured (the bin's edge can lie above every value in it); 0 below 1 us."""
        if not self.instants:
            return 0.0
        rank = int(np.searchsorted(np.cumsum(self._counts), q / 100 * self.instants))
        if rank == 0:
            return 0.0
        # the last bin (past the top edge) has no upper edge: the maximum bounds it
        edge = float(_EDGES[rank]) if rank < len(_EDGES) else self.max_late_s
        return min(edge, self.max_late_s)

    def summary(self) -> dict[str, Any]:
        """What ``run.json`` records under ``realtime`` (``wall_span_s``: from the start of the first instant to the
        end of the last)."""
        return {
            "factor": self.factor,
            "instants": self.instants,
            "wall_span_s": 0.0 if self._start is None or self._last_finish is None else self._last_finish - self._start,
            "lateness_s": {"p50": self.percentile(50), "p99": self.percentile(99), "max": self.max_late_s},
            "late_warning_s": self.late_warning_s,
            "late_instants": self.late_instants,
            "first_late_sim_time_s": self.first_late_s,
        }
