"""Long runs. The watchdog's limit is a setting (``execution.step_timeout_s`` in the scenario, 300 s by default,
null: off; ``coopsim run --step-timeout S``), each validated with a clear message. Post-processing holds nothing that
grows with simulated time beyond its bounds (``bench/bench_soak.py`` measures the whole)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from orchestrator.scenario import ScenarioError, parse_scenario

REPO = Path(__file__).resolve().parents[2]
PLATOON = (REPO / "scenarios" / "platoon.yaml").read_text()
HUNG = ('federates=[{"name": "bad", "type": "tests.orchestrator.fault_plugins:Sleeper", "params": {"at_s": 0.5}}]')


def _coopsim(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_default_is_written_out_and_null_turns_it_off():
    assert parse_scenario(PLATOON).execution.step_timeout_s == 300.0
    assert parse_scenario(PLATOON, overrides=["execution.step_timeout_s=null"]).execution.step_timeout_s is None


@pytest.mark.parametrize(("value", "message"), [
    ("0", "execution.step_timeout_s: Input should be greater than 0"),
    ("inf", "execution.step_timeout_s: Input should be a finite number"),
    ("1e9", "execution.step_timeout_s: Input should be less than or equal to 86400"),
])
def test_a_bad_limit_is_refused_at_its_field(value, message):
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(PLATOON, overrides=[f"execution.step_timeout_s={value}"])


@pytest.mark.slow
@pytest.mark.parametrize("how", [["--step-timeout", "0.5"], ["--set", "execution.step_timeout_s=0.5"]])
def test_the_limit_from_the_command_line_or_the_scenario_stops_a_hung_step(tmp_path, how):
    done = _coopsim("run", "scenarios/platoon.yaml", "--out", str(tmp_path), "--quiet", *how, "--set", "duration_s=3",
                    "--set", "outputs.plots=false", "--set", "outputs.report=false", "--set", HUNG)
    assert done.returncode == 1, done.stderr
    assert "federate 'bad' failed at t = 0.500 s: StepTimeoutError: step() did not return within step_timeout_s = " \
           "0.5 s" in done.stderr
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["status"] == "failed" and info["error"]["federate"] == "bad"
    resolved = (tmp_path / "scenario.resolved.yaml").read_text()
    assert "step_timeout_s: 0.5" in resolved  # a rerun of the resolved scenario keeps the limit


@pytest.mark.parametrize(("value", "message"), [("0", "must be in (0, 86400] seconds, got 0"),
                                                ("soon", "expected a number of seconds, got 'soon'")])
def test_a_bad_step_timeout_option_is_bad_input(value, message):
    done = _coopsim("run", "scenarios/platoon.yaml", "--step-timeout", value)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_metrics_hold_no_trace_that_grows_with_time_unless_asked(tmp_path, monkeypatch):
    """Memory flat in simulated time: the roles and cut-ins read of ``trace/range.parquet`` only what a cut-in
    needs, a row group at a time (the whole trace was held for the rest of the outputs: 350 MB at an hour of 100
    robots), and none of it in a run without vehicles from outside the scenario."""
    from orchestrator.metrics import RunData, write_metrics
    from orchestrator.runner import run_scenario

    scenario = parse_scenario(PLATOON, overrides=["duration_s=3", "outputs.plots=false", "outputs.report=false"])
    assert run_scenario(scenario, tmp_path).ok
    asked: list[str] = []
    real = RunData.trace

    def trace(self, name):
        asked.append(name)
        return real(self, name)

    monkeypatch.setattr(RunData, "trace", trace)
    metrics, _ = write_metrics(RunData.load(tmp_path))
    assert metrics["followers"] and "range" not in asked, asked


def test_the_channel_load_figures_get_one_row_per_window(tmp_path):
    """The channel-load panels are drawn from per-window summaries computed in the run: the job pickled to a plot
    worker carries one row per DCC window, not one per station and window (which grows with time and fleet)."""
    from orchestrator.metrics import RunData, read_traces
    from orchestrator.reporting.v2x_plots import v2x_plot_jobs
    from orchestrator.runner import run_scenario

    overrides = ["duration_s=3", "channel.type=itsg5", "outputs.plots=false", "outputs.report=false"]
    assert run_scenario(parse_scenario(PLATOON, overrides=overrides), tmp_path).ok
    load = read_traces(tmp_path, ["channel_load"])["channel_load"]
    windows = np.unique(load["t_ns"])
    assert len(load["t_ns"]) == 4 * len(windows)  # every station reports every window
    jobs = {job.draw: job for job in v2x_plot_jobs(RunData.load(tmp_path))}
    sent = jobs["v2x_over_time"].args["load"]
    assert np.array_equal(sent["t_ns"], windows)
    first = load["cbr"][load["t_ns"] == windows[0]]
    assert sent["cbr_mean"][0] == first.mean() and sent["cbr_max"][0] == first.max()


def _metrics_peak(tmp_path: Path, duration_s: float, monkeypatch: pytest.MonkeyPatch) -> int:
    """Bytes the metrics of a run of 32 robots in pairs over ITS-G5 hold at most beyond what was held before them
    (Python's and numpy's allocations), with a pass budget of 2.5 MiB instead of 256 MiB: the run is a small soak."""
    import tracemalloc

    from orchestrator.metrics import RunData, compute_metrics, follower
    from orchestrator.runner import run_scenario

    overrides = [f"duration_s={duration_s}", "vehicles.count=32", "platoon.size=2", "channel.type=itsg5",
                 "outputs.plots=false", "outputs.report=false"]
    out = tmp_path / f"run{duration_s:g}"
    assert run_scenario(parse_scenario(PLATOON, overrides=overrides), out).ok
    monkeypatch.setattr(follower, "PASS_BUDGET_BYTES", int(2.5 * 2**20))
    run = RunData.load(out)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        compute_metrics(run)
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


@pytest.mark.slow
@pytest.mark.slow  # two runs of 32 robots (10 s and 40 s) and their metrics under tracemalloc: about 40 s
def test_post_processing_memory_does_not_grow_with_simulated_time(tmp_path, monkeypatch):
    """A small soak: four times the simulated time, about the same peak in the metrics. Each pass takes the work on
    one follower (as long as the run: its view, the pieces it is built from) from its budget, the pieces are gone
    before the metrics run, and the V2X and channel-load traces are read a row group at a time, not held whole.
    Before that the longer run needed 1.5 times the memory."""
    short, long = (_metrics_peak(tmp_path, d, monkeypatch) for d in (10.0, 40.0))
    assert long < 1.25 * short, (short, long)
