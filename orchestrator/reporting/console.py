"""Terminal pieces shared by the commands and the progress bar, with no import of the rest of the orchestrator (the
runner's progress bar uses them, and the commands import the runner)."""

from __future__ import annotations

import errno
import math
import os

import numpy as np
from rich.console import Console


class PipeConsole(Console):
    """A rich console whose broken pipe reaches the command's entry point as ``BrokenPipeError``, which ends every
    command the same conventional way (rich's own handling exits with status 1 and hides which pipe broke)."""

    def on_broken_pipe(self) -> None:
        """Print nothing more and raise."""
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def realtime_factor_text(factor: float | None) -> str:
    """A real-time factor as the progress bar and the summary both show it: three significant digits below 100
    (``0.4``, ``0.0123``, ``12.3``), whole numbers above; '-' when unknown (a run of no wall time)."""
    if factor is None or not math.isfinite(factor):
        return "-"
    if factor >= 100:
        return f"{factor:.0f}"
    if factor <= 0:
        return "0"
    # positional, never '1e-05': a factor that small is a run stuck on something, and should read as such
    return np.format_float_positional(factor, precision=3, unique=False, fractional=False, trim="-")
