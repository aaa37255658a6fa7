"""A progress bar observer: simulated time, real-time factor, ETA (rich, on stderr)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from orchestrator.engine.scheduler import BaseObserver, Scheduler

from .console import PipeConsole, realtime_factor_text


class ProgressObserver(BaseObserver):
    """Updates a bar at most every ~1% of simulated time (the hot loop pays one comparison per instant)."""

    def __init__(self, label: str, console: Console | None = None) -> None:
        self.label = label
        self.console = console or PipeConsole(stderr=True)
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
        self._task = self._progress.add_task(self.label, total=self._end_ns, sim=0.0, rtf="-")
        self._t0 = time.perf_counter()
        try:
            self._progress.start()
        except BrokenPipeError:
            self._lost_reader()

    def on_instant(self, t_ns: int, bus: dict, stepped: Sequence[str]) -> None:
        if t_ns < self._next_ns or self._progress is None:
            return
        self._next_ns = t_ns + self._stride_ns
        try:
            self._update(t_ns)
        except BrokenPipeError:
            self._lost_reader()

    def _update(self, t_ns: int) -> None:
        assert self._progress is not None
        wall = max(time.perf_counter() - self._t0, 1e-9)
        self._progress.update(self._task, completed=t_ns, sim=t_ns / 1e9,
                              rtf=realtime_factor_text((t_ns / 1e9) / wall))

    def on_end(self, t_ns: int, error: BaseException | None) -> None:
        if self._progress is not None:
            try:
                self._update(t_ns)
                self._progress.stop()
            except BrokenPipeError:
                self._lost_reader()

    def _lost_reader(self) -> None:
        """The bar's reader went away (``2>&1 | head``): the run goes on without it and writes its directory; the
        command itself ends with the broken pipe when it next prints."""
        progress, self._progress = self._progress, None
        self.console.quiet = True  # the bar's refresh thread prints no more either
        if progress is not None:
            with contextlib.suppress(BrokenPipeError):
                progress.stop()
