"""What the terminal shows: the real-time factor reads the same, with its significant digits, in the progress bar
and in the summary table's title."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from rich.console import Console

from orchestrator import progress
from orchestrator.terminal import print_summary, realtime_factor_text


@pytest.mark.parametrize(("factor", "text"), [
    (0.4, "0.4"), (0.0423, "0.0423"), (0.00001234, "0.0000123"), (1.0, "1"), (12.345, "12.3"), (250.7, "251"),
    (None, "-"),
])
def test_the_real_time_factor_keeps_its_significant_digits(factor, text):
    assert realtime_factor_text(factor) == text


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200, force_terminal=False, color_system=None), out


def test_the_summary_title_and_the_progress_bar_agree_on_a_slow_run(monkeypatch):
    console, out = _console()
    run_info = {"scenario": "slow", "channel": "ideal", "seed": 1, "real_time_factor": 0.04}
    print_summary({"followers": {"robot1": {"spacing_error_rms_m": 0.1, "collisions": 0}}}, run_info, console)
    title = out.getvalue()
    assert "0.04x real time" in title

    wall = iter([100.0, 200.0])  # the bar's clock: 100 s of wall time for 4 s simulated
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(wall))
    console, out = _console()
    bar = progress.ProgressObserver("slow", console)
    bar.on_start(SimpleNamespace(end_ns=4_000_000_000))
    bar.on_end(4_000_000_000, None)
    assert "0.04x real time" in out.getvalue()
