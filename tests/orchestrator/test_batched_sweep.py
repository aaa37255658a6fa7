"""Batched sweeps: points that share a world's structure run as copies in one world and each gets what a run of it
alone gets (traces, digest, metrics.json); robots of different points never see or touch each other; points that
cannot share run alone and the sweep says why."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from core.universes import universe_segments
from federates.physics.collisions import ContactMonitor
from orchestrator.batch.sweep import sweep
from orchestrator.metrics import file_digest

REPO = Path(__file__).resolve().parents[2]
PLATOON = REPO / "scenarios" / "platoon.yaml"
# 10 s: the S-curve starts after 5 s, so the followers' spacing errors and the range sensor's targets change
TEN_S = ("duration_s=10", "outputs.plots=false", "outputs.report=false")


def _runs(result: dict) -> dict[tuple[str, int], dict]:
    return {(p["name"], r["seed"]): r for p in result["points"] for r in p["runs"]}


@pytest.fixture(scope="module")
def batched_and_alone(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, Path, Path]:
    root = tmp_path_factory.mktemp("batched")
    params = [("controller.time_gap_s", [0.5, 1.0]), ("controller.k2", [1.0, 1.5])]
    batched = sweep(PLATOON, params, root / "b", overrides=TEN_S, seeds=2, seed=3, jobs=2)
    alone = sweep(PLATOON, params, root / "a", overrides=TEN_S, seeds=2, seed=3, jobs=2, batch=False)
    return batched, alone, root / "b", root / "a"


def test_batched_points_give_the_digests_and_metrics_of_runs_alone(batched_and_alone):
    batched, alone, b_dir, a_dir = batched_and_alone
    # 4 points x 2 seeds: one world per seed (the worlds of a seed are split to keep both jobs busy)
    assert batched["batching"]["batched_runs"] == 8 and batched["batching"]["alone_runs"] == 0
    assert alone["batching"] == {"worlds": 0, "batched_runs": 0, "alone_runs": 8, "alone_because": {"--no-batch": 8}}
    b_runs, a_runs = _runs(batched), _runs(alone)
    assert set(b_runs) == set(a_runs) and len(b_runs) == 8
    for key, run in a_runs.items():
        assert run["status"] == "ok" and b_runs[key]["status"] == "ok"
        assert b_runs[key]["digest"] == run["digest"], key
        assert (b_dir / b_runs[key]["dir"] / "metrics.json").read_bytes() == \
            (a_dir / run["dir"] / "metrics.json").read_bytes(), key
        # every trace file, not only the digested ones, is the same file byte for byte (the range sensor's noise
        # included), and so is the resolved scenario the metrics are computed from
        a_traces = sorted(p.name for p in (a_dir / run["dir"] / "trace").iterdir())
        assert sorted(p.name for p in (b_dir / b_runs[key]["dir"] / "trace").iterdir()) == a_traces
        assert {"vehicles.parquet", "v2x.parquet", "range.parquet"} <= set(a_traces)
        for name in [*(f"trace/{t}" for t in a_traces), "scenario.resolved.yaml"]:
            assert (b_dir / b_runs[key]["dir"] / name).read_bytes() == (a_dir / run["dir"] / name).read_bytes(), \
                (key, name)
        # the digest a batched point computes from its tables in memory is the one of its files on disk
        assert file_digest(b_dir / b_runs[key]["dir"]) == b_runs[key]["digest"], key
    # the two seeds differ (the range sensor's noise is drawn per seed), so equal digests are not a coincidence
    assert b_runs[("time_gap_s=0.5__k2=1.0", 3)]["digest"] != b_runs[("time_gap_s=0.5__k2=1.0", 4)]["digest"]
    assert [p["metrics"] for p in batched["points"]] == [p["metrics"] for p in alone["points"]]


def test_a_batched_run_json_names_its_world_and_its_own_robots(batched_and_alone):
    batched, _, b_dir, a_dir = batched_and_alone
    run = json.loads((b_dir / batched["points"][0]["runs"][0]["dir"] / "run.json").read_text())
    alone = json.loads((a_dir / batched["points"][0]["runs"][0]["dir"] / "run.json").read_text())
    assert run["robot_names"] == alone["robot_names"] == {"1": "robot0", "2": "robot1", "3": "robot2", "4": "robot3"}
    assert run["batched"]["points"] >= 2 and run["outcomes"] == alone["outcomes"]
    assert any("coopsim metrics RUN_DIR" in note for note in run["notes"])
    assert not (b_dir / batched["points"][0]["runs"][0]["dir"] / "report.html").exists()


def test_points_that_cannot_share_a_world_run_alone_and_the_sweep_says_why(tmp_path):
    result = sweep(PLATOON, [("channel.type", ["ideal", "itsg5"]), ("controller.time_gap_s", [0.5, 1.0])],
                   tmp_path, overrides=("duration_s=2", *TEN_S[1:]), jobs=2)
    assert result["ok"]
    assert result["batching"]["batched_runs"] == 2 and result["batching"]["worlds"] == 1
    assert result["batching"]["alone_because"] == {"the itsg5 channel is not batched yet": 2}
    assert "2 runs in processes of their own (the itsg5 channel is not batched yet: 2)" in \
        (tmp_path / "sweep.html").read_text()


def test_an_outage_naming_receivers_runs_each_point_alone_with_its_outage(tmp_path):
    """An outage listing robot ids cuts off those robots of every point (a shared world renumbers each point's
    robots, so the ids would reach point 0's only): such points run alone, each with the digest of its run alone."""
    cut = 'channel.outages=[{"start_s": 1.0, "end_s": 1.5, "receivers": [3]}]'
    params = [("controller.time_gap_s", [0.5, 1.0])]
    result = sweep(PLATOON, params, tmp_path / "s", overrides=("duration_s=2", cut, *TEN_S[1:]), jobs=2)
    assert result["ok"] and result["batching"]["batched_runs"] == 0
    assert result["batching"]["alone_because"] == {"channel outages naming receivers are not batched": 2}
    alone = sweep(PLATOON, params, tmp_path / "a", overrides=("duration_s=2", cut, *TEN_S[1:]), jobs=2, batch=False)
    assert sorted(r["digest"] for r in _runs(result).values()) == sorted(r["digest"] for r in _runs(alone).values())


def test_universe_segments_keep_roster_order_within_each_universe():
    assert universe_segments(np.array([0, 0, 0])) is None
    order, bounds = universe_segments(np.array([1, 0, 1, 0, 2]))
    assert order.tolist() == [1, 3, 0, 2, 4] and bounds.tolist() == [0, 2, 4, 5]


def test_bodies_of_different_universes_never_touch():
    # four 4 m x 2 m bodies: rows 0 and 1 overlap (universe 0); rows 2 and 3 (universe 1) lie on rows 0 and 1
    # exactly but 5 m apart from each other
    monitor = ContactMonitor()
    monitor.add(np.full(4, 4.0), np.full(4, 2.0), np.full(4, 1.0), np.full(4, 3.0))
    x = np.array([0.0, 3.0, 0.0, 5.0])
    y = np.zeros(4)
    ids = np.array([1, 2, 11, 12])
    universes = universe_segments(np.array([0, 0, 1, 1]))
    assert monitor.new_contacts(0, x, y, np.zeros(4), np.zeros(4), ids, universes) == [(1, 2)]
    assert monitor.new_contacts(10_000_000, x, y, np.zeros(4), np.zeros(4), ids, universes) == []  # not new
    x[3] = 3.5  # now universe 1's bodies overlap too (0.5 m)
    assert monitor.new_contacts(20_000_000, x, y, np.zeros(4), np.zeros(4), ids, universes) == [(11, 12)]
    # without universes every body on top of another one touches it
    alone = ContactMonitor()
    alone.add(np.full(4, 4.0), np.full(4, 2.0), np.full(4, 1.0), np.full(4, 3.0))
    assert (1, 11) in alone.new_contacts(0, x, y, np.zeros(4), np.zeros(4), ids)


@pytest.mark.parametrize(("points", "jobs", "sizes"), [
    (1000, 2, [125] * 8),  # memory allows 143 a world: 7 worlds, rounded up to 4 per process
    (1000, 3, [112] * 8 + [104]),
    (200, 2, [100, 100]),  # fewer points than memory allows: one world per process
    (3, 2, [3]),  # too few to split: a world needs two points
])
def test_worlds_are_a_whole_number_per_process(monkeypatch, points, jobs, sizes):
    import orchestrator.batch.batched as batched
    from orchestrator.batch.task import Task
    from orchestrator.scenario import load_scenario

    scenario = load_scenario(PLATOON)
    monkeypatch.setattr(batched, "WORLD_BYTES", 143 * batched._trace_bytes(scenario) + 1)
    tasks = [Task(k, 0, scenario, Path(f"p{k}"), scenario.seed, "p") for k in range(points)]
    worlds, alone, _ = batched.plan_batches(tasks, jobs)
    assert [len(w.tasks) for w in worlds] == sizes and not alone
    assert [t.point for w in worlds for t in w.tasks] == list(range(points))


def test_large_robot_ids_bound_the_points_of_a_world():
    """The federates index per-robot tables by id and a world shifts each point's ids by the largest one + 1: points
    with ids near 100,000 share worlds of at most WORLD_IDS // 100,001 points (41), and ids past half of WORLD_IDS
    run alone."""
    import orchestrator.batch.batched as batched
    from orchestrator.batch.task import Task
    from orchestrator.scenario import load_scenario

    def plan(first_id: int, points: int) -> tuple[list[int], dict[str, int]]:
        scenario = load_scenario(PLATOON, [f'vehicles.overrides={{"robot0": {{"id": {first_id}}}}}'])
        tasks = [Task(k, 0, scenario, Path(f"p{k}"), scenario.seed, "p") for k in range(points)]
        worlds, alone, reasons = batched.plan_batches(tasks, 2)
        assert sum(len(w.tasks) for w in worlds) + len(alone) == points
        return [len(w.tasks) for w in worlds], reasons

    sizes, _ = plan(100_000, 1000)
    assert max(sizes) <= batched.WORLD_IDS // 100_001 and sum(sizes) == 1000
    sizes, reasons = plan(batched.WORLD_IDS // 2 + 1, 10)
    assert sizes == [] and reasons == {"robot ids too large to share a world": 10}


@pytest.mark.parametrize("ids", [[0, -1], [0, 25]])
def test_a_row_no_point_owns_is_an_error_not_a_silent_loss(tmp_path, ids):
    from orchestrator.recording.split import ROBOT_ID, PointSplit, SplitAppender

    split = PointSplit(10, [tmp_path / "p0", tmp_path / "p1"])
    appender = SplitAppender(tmp_path / "vehicles.parquet", units={"robot": ROBOT_ID}, split=split)
    appender.append({"robot": np.array([1, 12])})  # points 0 and 1
    with pytest.raises(ValueError, match="outside this world's points"):
        appender.append({"robot": np.array(ids)})
