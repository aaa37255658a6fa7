"""A progress bar observer: simulated time, real-time factor, ETA (rich, on stderr)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from .scheduler import BaseObserver, Scheduler
from .terminal import realtime_factor_text


class ProgressObserver(BaseObserver):
    """Updates a bar at most every ~1% of simulated time (the hot loop pays one comparison per instant)."""

    def __init__(self, label: str, console: Console | None = None) -> None:
        self.label = label
        self.console = console or Console(stderr=True)
        self._progress: Progress | None = None
        self._task = 0
        self._end_ns = 1
        self._next_ns = 0
        self._stride_ns = 1
        self._t0 = 0.0

    def on_start(self, scheduler: Scheduler) -> None:
        self._end_ns = max(scheduler.end_ns, 1)
        self._stride_ns = max(self._end_ns // 100, 1)
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[sim]:>8.2f} s sim"),
            TextColumn("{task.fields[rtf]:>7}x real time"),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self._progress.start()
        self._task = self._progress.add_task(self.label, total=self._end_ns, sim=0.0, rtf="-")
        self._t0 = time.perf_counter()

    def on_instant(self, t_ns: int, bus: dict, stepped: Sequence[str]) -> None:
        if t_ns < self._next_ns:
            return
        self._next_ns = t_ns + self._stride_ns
        self._update(t_ns)

    def _update(self, t_ns: int) -> None:
        assert self._progress is not None
        wall = max(time.perf_counter() - self._t0, 1e-9)
        self._progress.update(self._task, completed=t_ns, sim=t_ns / 1e9,
                              rtf=realtime_factor_text((t_ns / 1e9) / wall))

    def on_end(self, t_ns: int, error: BaseException | None) -> None:
        if self._progress is not None:
            self._update(t_ns)
            self._progress.stop()
