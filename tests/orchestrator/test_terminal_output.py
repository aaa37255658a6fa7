"""What the terminal shows: the real-time factor reads the same, with its significant digits, in the progress bar
and in the summary table's title; a command whose reader went away (``coopsim schema | head``) ends quietly with
the status of a command killed by SIGPIPE."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from orchestrator.cli import main as cli
from orchestrator.cli.terminal import EXIT_BROKEN_PIPE, print_summary
from orchestrator.reporting import progress
from orchestrator.reporting.console import realtime_factor_text


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


REPO = Path(__file__).resolve().parents[2]
SHORT = """
version: 1
name: short
seed: 1
duration_s: 0.5
step_s: 0.01
vehicles: {count: 3}
outputs: {plots: false, report: false}
"""


def _with_closed(stream: str, *args: str) -> tuple[int, str]:
    """Run ``coopsim ARGS`` with the reader of its stdout (or stderr) gone before it prints anything, as in
    ``coopsim schema | head`` once head has exited; the exit status and what the other stream said."""
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    closed, kept = (proc.stdout, proc.stderr) if stream == "stdout" else (proc.stderr, proc.stdout)
    closed.close()
    said = kept.read().decode()
    kept.close()
    return proc.wait(timeout=120), said


@pytest.mark.parametrize(("stream", "args"), [
    ("stdout", ("schema",)),  # plain print
    ("stdout", ("validate", "scenarios/platoon.yaml")),  # a rich console
    ("stderr", ("validate", "no-such-scenario.yaml")),  # an error message
    ("stderr", ("metrics", "no-such-run")),
])
def test_a_reader_that_went_away_ends_the_command_quietly(stream, args):
    status, said = _with_closed(stream, *args)
    assert status == EXIT_BROKEN_PIPE == 141, said
    assert "Traceback" not in said and "BrokenPipe" not in said and "Exception ignored" not in said


def test_a_run_whose_summary_has_no_reader_still_writes_its_directory(tmp_path):
    (tmp_path / "short.yaml").write_text(SHORT)
    status, said = _with_closed("stdout", "run", str(tmp_path / "short.yaml"), "--out", str(tmp_path / "out"))
    assert status == EXIT_BROKEN_PIPE and "Traceback" not in said, said
    assert json.loads((tmp_path / "out" / "run.json").read_text())["status"] == "ok"


def test_a_progress_bar_without_a_reader_does_not_stop_the_run(tmp_path):
    (tmp_path / "short.yaml").write_text(SHORT)
    status, said = _with_closed("stderr", "run", str(tmp_path / "short.yaml"), "--out", str(tmp_path / "out"))
    assert status == 0 and "short · ideal · seed 1" in said, said  # the summary on stdout is whole
    assert json.loads((tmp_path / "out" / "run.json").read_text())["status"] == "ok"


def test_a_broken_pipe_that_is_not_the_output_is_still_an_error(monkeypatch):
    def broken(argv):  # a socket to a peer, say: stdout and stderr are fine
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli, "_main", broken)
    with pytest.raises(BrokenPipeError):
        cli.main([])
