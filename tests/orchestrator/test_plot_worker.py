"""Plots drawn by worker processes: the same files, bytes and report as drawn in the run's own process; a worker
that dies, fails a figure or hangs leaves a finished run that names what is missing, and no process behind."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from core.robots import RobotSpec
from orchestrator import runner
from orchestrator.metrics import RunData, Series
from orchestrator.reporting import plot_worker
from orchestrator.reporting.plot_worker import PlotWorkers
from orchestrator.reporting.plots import PlotJob
from orchestrator.runner import run_scenario, write_outputs
from orchestrator.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]
SHORT = ["duration_s=4"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a reaped child is gone; an unreaped one would be a zombie of this process, which close() must not leave
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().split(")")[-1].split()[0] != "Z"


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[PlotWorkers]:
    """Every PlotWorkers a run starts, to look at their processes afterwards."""
    seen: list[PlotWorkers] = []
    start = PlotWorkers.start

    def spy(count: int | None = None) -> PlotWorkers | None:
        workers = start(count)
        if workers is not None:
            seen.append(workers)
        return workers

    monkeypatch.setattr(runner.PlotWorkers, "start", staticmethod(spy))
    return seen


def _redraw_in_process(run_dir: Path, copy: Path) -> None:
    """The run's metrics, plots and report once more, drawn in this process from a copy of its traces."""
    copy.mkdir()
    for name in ("scenario.resolved.yaml", "run.json"):
        shutil.copy(run_dir / name, copy / name)
    shutil.copytree(run_dir / "trace", copy / "trace")
    run_info = json.loads((run_dir / "run.json").read_text())
    write_outputs(RunData.load(copy), run_info, plots=True, report=True, workers=None)


@pytest.mark.slow
@pytest.mark.parametrize("sets", [
    ["channel.type=ideal"],
    ["channel.type=itsg5"],  # the V2X figures, prepared in the run and drawn by a worker
    ["physics.estimate=odometry"],  # the estimate-vs-truth figure
], ids=["ideal", "itsg5", "odometry"])
def test_workers_draw_the_same_files_and_report_as_the_run_itself(tmp_path, started, sets):
    scenario = load_scenario(REPO / "scenarios" / "platoon.yaml", [*SHORT, *sets])
    result = run_scenario(scenario, tmp_path / "run")
    assert result.ok and len(started) == 1 and len(started[0].pids) == plot_worker.PLOT_WORKERS
    assert not any(_alive(pid) for pid in started[0].pids)
    _redraw_in_process(tmp_path / "run", tmp_path / "here")
    drawn = sorted(p.name for p in (tmp_path / "run" / "plots").iterdir())
    assert drawn == sorted(p.name for p in (tmp_path / "here" / "plots").iterdir())
    assert {"trajectories.png", "speeds.png", "spacing_errors.png", "string_stability.png"} <= set(drawn)
    if "channel.type=itsg5" in sets:
        assert {"v2x_pdr_distance.png", "v2x_latency.png", "v2x_over_time.png", "v2x_generation.png"} <= set(drawn)
    if "estimate" in sets[0]:
        assert "estimate_vs_truth.png" in drawn
    for name in drawn:
        assert (tmp_path / "run" / "plots" / name).read_bytes() == (tmp_path / "here" / "plots" / name).read_bytes()
    # the report embeds the same PNGs in the same order, with the same charts and tables
    assert (tmp_path / "run" / "report.html").read_text() == (tmp_path / "here" / "report.html").read_text()
    assert "plots not drawn" not in json.dumps(json.loads((tmp_path / "run" / "run.json").read_text())["notes"])


def test_a_killed_worker_leaves_a_finished_run_that_names_the_missing_plots(tmp_path, monkeypatch, capfd):
    killed: list[int] = []
    start = PlotWorkers.start

    def start_then_kill(count: int | None = None) -> PlotWorkers | None:
        workers = start(2)  # two, so one keeps drawing
        assert workers is not None
        os.kill(workers.pids[0], signal.SIGKILL)  # as if the OOM killer took it
        killed.append(workers.pids[0])
        return workers

    monkeypatch.setattr(runner.PlotWorkers, "start", staticmethod(start_then_kill))
    result = run_scenario(load_scenario(REPO / "scenarios" / "platoon.yaml", SHORT), tmp_path)
    assert result.ok
    run = json.loads((tmp_path / "run.json").read_text())
    notes = [n for n in run["notes"] if n.startswith("plots not drawn: ")]
    assert len(notes) == 1 and f"plot worker {killed[0]} exited with code -9" in notes[0]
    missing = {"trajectories.png", "speeds.png", "spacing_errors.png", "string_stability.png"} - {
        p.name for p in (tmp_path / "plots").iterdir()}
    assert missing and all(name in notes[0] for name in missing)  # the other worker's figures were kept
    assert (tmp_path / "plots").iterdir() and (tmp_path / "metrics.json").is_file()
    report = (tmp_path / "report.html").read_text()
    assert "<h2>Plots not drawn</h2>" in report and all(name in report for name in missing)
    assert "plots not drawn: " in capfd.readouterr().err
    assert not _alive(killed[0])


def _robots_and_series() -> tuple[list[RobotSpec], dict[int, Series]]:
    t = np.arange(50, dtype=np.int64) * 10_000_000
    robots = [RobotSpec(1, "a"), RobotSpec(2, "b")]
    series = {r.id: Series(t, {"x": t / 1e9 + r.id, "y": np.zeros(50), "v": np.ones(50)}) for r in robots}
    return robots, series


def test_a_figure_that_fails_is_named_with_its_error_and_the_others_are_drawn(tmp_path):
    robots, series = _robots_and_series()
    workers = PlotWorkers.start(1)
    assert workers is not None
    colors = {"a": "#1f77b4", "b": "#ff7f0e"}
    workers.submit(tmp_path, [PlotJob("speeds.png", "speeds", {"robots": robots, "series": series, "colors": colors}),
                              PlotJob("broken.png", "speeds", {"robots": robots, "series": {}, "colors": colors})])
    drawn, missing = workers.finish(60)
    assert drawn == ["speeds.png"] and (tmp_path / "speeds.png").stat().st_size > 5_000
    assert missing == {"broken.png": "KeyError: 1"}
    assert not any(_alive(pid) for pid in workers.pids)


def test_a_hung_worker_is_waited_for_at_most_the_wait_then_stopped(tmp_path):
    robots, series = _robots_and_series()
    workers = PlotWorkers.start(1)
    assert workers is not None
    os.kill(workers.pids[0], signal.SIGSTOP)
    workers.submit(tmp_path, [PlotJob("speeds.png", "speeds", {"robots": robots, "series": series})])
    drawn, missing = workers.finish(1.0)
    assert drawn == [] and missing == {"speeds.png": f"plot worker {workers.pids[0]} did not finish within the wait"}
    assert not _alive(workers.pids[0])


def test_a_run_that_fails_after_its_loop_stops_its_workers(tmp_path, started, monkeypatch):
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("metrics blew up")

    monkeypatch.setattr(runner, "write_outputs", broken)
    with pytest.raises(RuntimeError, match="metrics blew up"):
        run_scenario(load_scenario(REPO / "scenarios" / "platoon.yaml", SHORT), tmp_path)
    assert len(started) == 1 and not any(_alive(pid) for pid in started[0].pids)


def test_a_run_without_plots_starts_no_worker(tmp_path, started):
    result = run_scenario(load_scenario(REPO / "scenarios" / "platoon.yaml", [*SHORT, "outputs.plots=false"]),
                          tmp_path)
    assert result.ok and started == [] and (tmp_path / "report.html").is_file()


class _Payload:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("true",))


def test_a_job_can_carry_only_data(tmp_path):
    # what a worker unpickles cannot name a callable: a job is arrays, robots and numbers, nothing that runs code
    with pytest.raises(pickle.UnpicklingError, match="may not contain"):
        plot_worker._JobUnpickler(__import__("io").BytesIO(pickle.dumps({"jobs": [_Payload()]}))).load()
    robots, series = _robots_and_series()
    data = pickle.dumps({"jobs": [PlotJob("s.png", "speeds", {"robots": robots, "series": series})],
                         "x": np.float64(1.5), "s": np.array(["a", "b"], dtype=object)}, protocol=5)
    loaded = plot_worker._JobUnpickler(__import__("io").BytesIO(data)).load()
    assert loaded["jobs"][0].args["robots"] == robots and loaded["x"] == 1.5


def test_a_worker_whose_run_died_exits_on_its_own():
    # the run's end of the pipe closes (the run was killed): the worker reads the end of its input and leaves
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    worker = subprocess.Popen([sys.executable, "-m", "orchestrator.reporting.plot_worker"], cwd=REPO, env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert worker.stdin is not None and worker.stdout is not None
    worker.stdin.close()
    assert worker.wait(60) == 0
    assert json.loads(worker.stdout.read()) == {"end": True}


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


@pytest.mark.slow
def test_an_interrupted_command_leaves_no_worker_running(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", "scenarios/platoon.yaml", "--out",
                             str(out), "--quiet", "--set", "duration_s=600", "--set", "vehicles.count=40",
                             "--set", "platoon.size=8"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while not workers and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            workers = _children(proc.pid)
        while not (out / "trace").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # the loop has begun: interrupted from here on, the run says so (asserted below)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    assert json.loads((out / "run.json").read_text())["status"] == "interrupted"
    assert workers and not any(_alive(pid) for pid in workers)
