"""Whether the medium's link loops run on one thread or on all of numba's threads, chosen by measured speed.

Opening and resolving the links of one frame touches one row per receiver and draws each link from its own key
(``links.open_links`` / ``links.close_links``), so the results are the same for any number of threads; only the
wall time differs. A parallel loop pays when the cores are free, and costs many times the serial time when they are
shared with other processes (each of the two loops per frame waits at a barrier for a thread the scheduler may
have parked). So the channel measures both: it runs serially; now and then it times how fast the threads wake
(``threads_wake_fast``, a few empty parallel loops that stop at the first slow one) and, if they do, tries the
parallel loops for a few steps; it keeps whichever spent less wall time per frame, and tries again less often each
time the parallel loops lose. A parallel step that costs ``STALL_FACTOR`` times the serial cost per frame ends the
parallel mode at once; the kernel hands back every ``CHECK_FRAMES`` parallel frames to be timed, so a machine that
gets busy mid-run loses a few milliseconds, not a step, a trial or a gap.
"""

from __future__ import annotations

import time

import numba
import numpy as np
from numba import njit, prange

PARALLEL_MIN_LINKS = 256
"""A frame with fewer links always opens and resolves them serially (waking the threads costs about a microsecond,
the serial work per link some ten nanoseconds)."""
NEVER = 2**62
"""``par_min`` that keeps every loop serial."""

# Trials and gaps count frames (the work a step does), not steps: with the ETSI rules a road of stations at constant
# speed sends in bursts, a few steps a second.
PROBE_FRAMES = 300  # frames per trial of the other mode (at least one step)
FIRST_GAP = 3000  # frames before the first trial
MAX_GAP = 400_000  # trials of a losing parallel mode become rarer up to this gap
WAKE_LAUNCHES = 8  # empty parallel loops timed before a trial
WAKE_FAST_S = 50e-6  # a launch slower than this (a thread the scheduler parked) cancels the trial
CHECK_FRAMES = 64
"""The kernel hands back after this many frames on the parallel loops, so that a stall ends them within a few
milliseconds even in a step that starts a thousand frames (the ETSI rules send in bursts)."""
STALL_FACTOR = 2.0  # a parallel step this many times slower per frame than serial ends the parallel mode at once


@njit(cache=True, parallel=True)
def _touch(a: np.ndarray) -> None:  # pragma: no cover - compiled
    for k in prange(a.shape[0]):
        a[k] += 1.0


def threads_wake_fast() -> bool:
    """Whether every one of a few launches of an empty parallel loop returns within ``WAKE_FAST_S`` (stopping at
    the first that does not, so a busy machine costs one slow launch)."""
    a = np.zeros(64)
    _touch(a)  # compiled (or loaded) and the threads started before timing
    for _ in range(WAKE_LAUNCHES):
        t0 = time.perf_counter()
        _touch(a)
        if time.perf_counter() - t0 > WAKE_FAST_S:
            return False
    return True


class ThreadChoice:
    """The ``par_min`` argument of ``access.advance`` for the next channel step, from the wall time of the last."""

    def __init__(self, stations: int = 0) -> None:
        self.threads = numba.get_num_threads()
        self.parallel = False  # the mode kept between trials
        self.gap = FIRST_GAP
        self.until_trial = FIRST_GAP
        self.trial_left = 0
        self.cost = {False: [0.0, 0], True: [0.0, 0]}  # mode -> [seconds, frames] since the last decision
        self.serial_per_frame = 0.0  # [s] the latest serial cost per frame (0: not measured yet)
        self.stations = stations

    def par_min(self) -> int:
        """``PARALLEL_MIN_LINKS`` while the parallel loops run (kept or on trial), else ``NEVER``."""
        if self.threads < 2 or self.stations <= PARALLEL_MIN_LINKS:
            return NEVER
        return PARALLEL_MIN_LINKS if self._mode() else NEVER

    def _mode(self) -> bool:
        return (not self.parallel) if self.trial_left > 0 else self.parallel

    def record(self, seconds: float, frames: int) -> None:
        """The wall time of the step (or the part of a step) just run and how many frames started in it."""
        if self.threads < 2 or self.stations <= PARALLEL_MIN_LINKS or frames == 0:
            return
        parallel = self._mode()
        if parallel and self.serial_per_frame > 0.0 and seconds > STALL_FACTOR * self.serial_per_frame * frames:
            # the threads stalled (the cores got busy): serial from the next step on, the next trial later
            self.parallel = False
            self.trial_left = 0
            self.gap = min(2 * self.gap, MAX_GAP)
            self.until_trial = self.gap
            self.cost = {False: [0.0, 0], True: [0.0, 0]}
            return
        acc = self.cost[parallel]
        acc[0] += seconds
        acc[1] += frames
        if self.trial_left > 0:
            self.trial_left -= frames
            if self.trial_left <= 0:
                self.trial_left = 0
                self._decide()
        else:
            self.until_trial -= frames
            if self.until_trial <= 0:
                if self.parallel or threads_wake_fast():
                    self.trial_left = PROBE_FRAMES
                    s_sec, s_n = self.cost[False]
                    if not self.parallel and s_n:
                        self.serial_per_frame = s_sec / s_n  # the reference a stalled trial step is held to
                else:  # the threads are slow to wake: no trial, and the next check comes later
                    self._decide()

    def _decide(self) -> None:
        (s_sec, s_n), (p_sec, p_n) = self.cost[False], self.cost[True]
        if s_n:
            self.serial_per_frame = s_sec / s_n
        before = self.parallel
        if s_n and p_n:
            self.parallel = p_sec / p_n < s_sec / s_n
        # the mode that keeps winning is re-checked ever more rarely (a stalled parallel step still ends it at once)
        self.gap = min(2 * self.gap, MAX_GAP) if self.parallel == before else FIRST_GAP
        self.until_trial = self.gap
        self.cost = {False: [0.0, 0], True: [0.0, 0]}
