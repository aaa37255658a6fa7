"""Stopping a run from outside its loop: interrupts (SIGINT, SIGTERM) and a watchdog on every federate's step.

- **Interrupts stop at the next instant.** The first SIGINT or SIGTERM only sets a flag, which the scheduler reads
  between instants (a compiled kernel or a C call in progress finishes first). The run then ends like any other:
  every federate is finalized and every recorder closes its files at the same instant, so the traces end together
  and stay readable. A second signal while a step hangs raises ``KeyboardInterrupt`` at once.
- **The watchdog** (a daemon thread, asleep between checks) wakes the main thread with SIGUSR1 when one federate's
  ``step`` has run longer than ``step_timeout_s``; the handler raises ``StepTimeoutError`` inside that step, which the
  scheduler reports as the federate's failure with its name and the simulation time. It interrupts Python code
  and blocking calls (sleep, locks, sockets), not a compiled kernel in the middle of its loop.

- **The handlers are the run's.** A plug-in that replaces one (``signal.signal(SIGINT, SIG_IGN)``) gets it put back
  after its step (``reclaim``), with a note in ``run.json``; Ctrl-C keeps working. Handlers set below Python (a C
  library's own ``sigaction``) are not seen.
- **Whose KeyboardInterrupt.** The second signal raises ``RunInterrupt`` (a ``KeyboardInterrupt``); any other
  ``KeyboardInterrupt`` during a run was raised by a federate's own code and is that federate's failure.

Signal handlers can only be installed from the main thread; elsewhere (a worker thread) both parts stay off.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Sequence
from types import FrameType, TracebackType
from typing import Any

try:  # the C function: ``signal.getsignal`` wraps it in an enum lookup that costs 2 us, asked at every instant
    from _signal import getsignal as _getsignal
except ImportError:  # another interpreter
    _getsignal = signal.getsignal


class StepTimeoutError(TimeoutError):
    """A federate's step ran longer than the watchdog allows."""


class RunInterrupt(KeyboardInterrupt):
    """The user's second SIGINT or SIGTERM while a step runs: the run stops now (not a federate's failure)."""


class RunControl:
    """Context manager around a run: installs the handlers on entry, restores the previous ones on exit."""

    def __init__(self, step_timeout_s: float | None = None) -> None:
        self.step_timeout_s = step_timeout_s
        self.stop_requested: str | None = None  # the name of the signal that asked the run to stop
        self._active = False
        self._previous: dict[int, Any] = {}
        self._federate: str | None = None
        self._deadline = 0.0
        self._fired: str | None = None
        self._watchdog: threading.Thread | None = None
        self._done = threading.Event()
        self._handlers: dict[int, Any] = {}  # signal -> the handler this run installed
        self.notes: list[str] = []  # handlers a federate replaced and that were put back

    # -- the scheduler's side ----------------------------------------------------------------------------------
    def entering(self, federate: str, now: float) -> None:
        """A step of ``federate`` starts at ``now`` (``time.perf_counter``)."""
        self._deadline = now + self.step_timeout_s if self.step_timeout_s else 0.0
        self._federate = federate

    def left(self) -> None:
        """The step returned (or raised)."""
        self._federate = None

    def reclaim(self, who: str | Sequence[str], t_ns: int) -> None:
        """Put back any handler of this run that ``who`` (a federate, or the names of the federates stepped at an
        instant) replaced, and note it once per signal: a plug-in cannot make the run deaf to Ctrl-C."""
        for sig, handler in self._handlers.items():
            if _getsignal(sig) is not handler:
                signal.signal(sig, handler)
                name = signal.Signals(sig).name
                if not isinstance(who, str):
                    who = f"one of the federates stepped then ({', '.join(who)})"
                if not any(f"handler of {name} " in note for note in self.notes):
                    self.notes.append(f"{who} replaced the handler of {name} at t = {t_ns / 1e9:.3f} s; coopsim put "
                                      "its own back (signal handlers are the orchestrator's)")

    def owns(self, exc: BaseException) -> bool:
        """Whether ``exc``, raised out of a federate's call, is the run's own interrupt rather than the federate's
        failure: the second signal's ``RunInterrupt``, or (when no handler of this run is installed, so SIGINT
        still raises) any ``KeyboardInterrupt`` in the main thread."""
        if isinstance(exc, RunInterrupt):
            return True
        return (isinstance(exc, KeyboardInterrupt) and not self._active
                and threading.current_thread() is threading.main_thread())

    # -- handlers ----------------------------------------------------------------------------------------------
    def __enter__(self) -> RunControl:
        if threading.current_thread() is not threading.main_thread():
            return self
        self._active = True
        self._handlers = {signal.SIGINT: self._on_stop, signal.SIGTERM: self._on_stop}
        if self.step_timeout_s:
            self._handlers[signal.SIGUSR1] = self._on_timeout
        for sig, handler in self._handlers.items():
            self._previous[sig] = signal.signal(sig, handler)
        if self.step_timeout_s:
            self._watchdog = threading.Thread(target=self._watch, name="step-watchdog", daemon=True)
            self._watchdog.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if not self._active:
            return
        self._done.set()
        if self._watchdog is not None:
            self._watchdog.join()
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._handlers = {}
        self._active = False

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        if self.stop_requested is not None:  # a second signal: the run does not reach its next instant
            raise RunInterrupt
        self.stop_requested = signal.Signals(signum).name

    def _on_timeout(self, signum: int, frame: FrameType | None) -> None:
        fired, self._fired = self._fired, None
        if fired is not None and self._federate == fired and time.perf_counter() > self._deadline:
            raise StepTimeoutError(f"step() did not return within step_timeout_s = {self.step_timeout_s:g} s")

    def _watch(self) -> None:
        main = threading.main_thread().ident
        period = min(0.05, self.step_timeout_s or 0.05)
        while not self._done.wait(period):
            federate = self._federate
            if federate is not None and time.perf_counter() > self._deadline and self._fired is None:
                self._fired = federate
                signal.pthread_kill(main, signal.SIGUSR1)  # type: ignore[arg-type]
