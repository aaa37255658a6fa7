"""A real ``coopsim run`` process: SIGTERM once it is drawing its plots leaves run.json and the report, names the
plots not drawn and prints no traceback; a normal run of the maneuver scenarios writes no warning to stderr."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # three shipped scenarios run whole, with plots, in subprocesses

REPO = Path(__file__).resolve().parents[2]


def _coopsim(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigterm_while_plotting_keeps_run_json_and_the_report_and_names_what_was_not_drawn(tmp_path):
    out = tmp_path / "run"
    # many robots: the metrics and the late figures take seconds after the first figure is written
    proc = _coopsim("run", "scenarios/platoon.yaml", "--out", str(out), "--quiet", "--set", "vehicles.count=160",
                    "--set", "platoon.size=8", "--set", "duration_s=20")
    try:
        deadline = time.monotonic() + 300
        # the event: the first figure on disk (the workers draw the vehicle figures while the metrics are computed)
        while not list((out / "plots").glob("*.png")) and proc.poll() is None:
            assert time.monotonic() < deadline, "no figure was written"
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before it could be stopped while plotting"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "interrupted" and info["interrupted_by"] == "SIGTERM"
    assert info["sim_time_s"] == pytest.approx(20.0, abs=0.02)  # the simulation itself had finished
    assert (out / "metrics.json").exists()
    report = (out / "report.html").read_text()
    drawn = {p.name for p in (out / "plots").glob("*.png")}
    not_drawn = [n for n in info["notes"] if n.startswith("plots not drawn: ")]
    if not_drawn:  # what was left out is named in run.json, on stderr and in the report
        assert "stopped by SIGTERM while drawing" in not_drawn[0] and "plots not drawn" in stderr
        assert "Plots not drawn" in report and "stopped by SIGTERM" in report
        named = [part.split(" (")[0] for part in not_drawn[0].removeprefix("plots not drawn: ").split("; ")]
        assert not set(named) & drawn
    assert all("data:image/png" in report for _ in drawn)


@pytest.mark.parametrize("scenario", ["two_platoons.yaml", "highway_maneuvers.yaml"])
def test_a_normal_run_writes_no_warning_to_stderr(tmp_path, scenario):
    proc = _coopsim("run", f"scenarios/{scenario}", "--out", str(tmp_path / "run"), "--quiet")
    _, stderr = proc.communicate(timeout=600)
    assert proc.returncode in (0, 3), stderr
    assert "Warning" not in stderr and "warning" not in stderr.lower(), stderr
    assert (tmp_path / "run" / "plots" / "roles_timeline.png").exists()
