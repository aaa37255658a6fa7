"""Real-time pacing: simulation time never runs ahead of the wall clock, lateness is measured and reported, and a
run that cannot keep up says so. (How close to the wall clock a long run stays is a benchmark, not a test:
``bench/bench_realtime.py``.)"""

from __future__ import annotations

import tempfile
import time

import pytest

from orchestrator.engine.pacing import RealtimePacer
from orchestrator.runner import run_scenario
from orchestrator.scenario import ScenarioError, parse_scenario

BASE = """
version: 1
name: paced
seed: 1
duration_s: 1.0
step_s: 0.01
vehicles: {count: 4}
outputs: {plots: false, report: false}
"""


class FakeClock:
    """A wall clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lateness_percentiles_are_exact_to_a_histogram_bin():
    clock = FakeClock()
    pacer = RealtimePacer(1.0, late_warning_s=0.05, clock=clock)
    pacer.wait(0)  # starts the clock: t = 0 is due at wall 100.0
    lateness = [0.001] * 98 + [0.004, 0.2]  # 100 instants; the 99th percentile is the 4 ms one
    for k, late in enumerate(lateness, start=1):
        clock.now = 100.0 + k * 0.01 + late  # the instant at t = k * 10 ms finished `late` after its due time
        pacer.finished(k * 10_000_000)
    summary = pacer.summary()
    assert summary["lateness_s"]["p50"] == pytest.approx(0.001, rel=0.012)
    assert summary["lateness_s"]["p99"] == pytest.approx(0.004, rel=0.012)
    assert summary["lateness_s"]["max"] == pytest.approx(0.2)
    assert summary["late_instants"] == 1 and summary["first_late_sim_time_s"] == pytest.approx(1.0)


@pytest.mark.parametrize(("lateness", "p99"), [
    ([0.0101] * 100, 0.0101),  # every instant equally late: the bin's upper edge lies above all of them
    ([0.001] * 50 + [0.0101] * 50, 0.0101),
    ([2000.0] * 100, 2000.0),  # past the histogram's top edge
    ([0.0] * 99 + [3e-6], 0.0),
])
def test_lateness_percentiles_never_exceed_the_maximum(lateness, p99):
    clock = FakeClock()
    pacer = RealtimePacer(1.0, late_warning_s=0.05, clock=clock)
    pacer.wait(0)
    for k, late in enumerate(lateness, start=1):
        clock.now = 100.0 + k * 0.01 + late
        pacer.finished(k * 10_000_000)
    lateness_s = pacer.summary()["lateness_s"]
    assert lateness_s["max"] == pytest.approx(max(lateness))
    assert lateness_s["p50"] <= lateness_s["p99"] <= lateness_s["max"]
    assert lateness_s["p99"] == pytest.approx(p99, rel=0.012, abs=1e-9)  # still exact to a bin


def test_a_paced_run_never_runs_ahead_of_the_wall_clock():
    for factor, shortest in ((1.0, 1.0), (4.0, 0.25)):
        scenario = parse_scenario(BASE + f"execution: {{realtime: {factor}}}\n")
        with tempfile.TemporaryDirectory() as out:
            started = time.perf_counter()
            result = run_scenario(scenario, out)
            took = time.perf_counter() - started
        assert result.ok
        # the last instant (t = 1 s) cannot start before 1 s / factor after the first one
        assert took >= shortest, (factor, took)  # a lower bound: load only lengthens a run
        report = result.run_info["realtime"]
        assert report["factor"] == factor and report["instants"] == 101
        # no instant can end later than the run lasted (how late a quiet machine runs is the benchmark's, not a
        # test's: load makes it anything)
        assert 0 <= report["lateness_s"]["max"] <= took, (report["lateness_s"], took)


def test_an_unpaced_run_is_not_slowed(tmp_path, monkeypatch):
    waits: list[int] = []
    pace = RealtimePacer.wait
    monkeypatch.setattr(RealtimePacer, "wait", lambda self, t_ns: (waits.append(t_ns), pace(self, t_ns))[1])
    result = run_scenario(parse_scenario(BASE), tmp_path)
    assert result.ok and "realtime" not in result.run_info
    assert waits == []  # never held back to the wall clock (a paced run waits at every instant)
    assert result.run_info["real_time_factor"] == pytest.approx(1.0 / result.run_info["wall_time_s"])  # 1 s run


def test_a_run_that_cannot_keep_up_warns_and_notes_it(tmp_path, capsys):
    federate = '[{name: slow, type: "tests.orchestrator.pacing_plugins:Sluggish", params: {busy_s: 0.03}}]'
    text = BASE.replace("duration_s: 1.0", "duration_s: 0.3") + f"execution: {{realtime: 1.0}}\nfederates: {federate}\n"
    result = run_scenario(parse_scenario(text), tmp_path)
    assert result.ok
    report = result.run_info["realtime"]
    assert report["late_instants"] > 0 and report["lateness_s"]["max"] > 0.05
    assert any("could not keep up with 1x real time" in note for note in result.run_info["notes"])
    assert "cannot keep up with 1x real time" in capsys.readouterr().err


def test_the_factor_is_checked():
    with pytest.raises(ScenarioError, match=r"execution\.realtime"):
        parse_scenario(BASE + "execution: {realtime: 0}\n")
