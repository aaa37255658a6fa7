"""Numbers that stay right when the platoon changes: roles over time, links and maneuver metrics checked against the
traces (``orchestrator/metrics/roles.py``).

Ground truth: an ideal channel never loses a frame, so every link PDR of every shipped scenario is exactly 1 once a
frame counts toward a link only while that link exists; a joiner's spacing error after joining is the one a hand
computation from the vehicles trace gives; each maneuver type's roles, links and table match the recorded
``platoon_state`` and ``maneuver_events``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from federates.physics.presets import preset
from orchestrator.metrics.roles import SETTLE_S
from orchestrator.runner import run_scenario
from orchestrator.scenario import load_scenario

from .test_resolved import REPO

SCENARIOS = sorted((REPO / "scenarios").glob("*.yaml"))
QUIET = ["outputs.plots=false", "outputs.report=false"]


def trace(out: Path, name: str) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in pq.read_table(out / "trace" / f"{name}.parquet").to_pydict().items()}


def metrics(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text())


@pytest.fixture(scope="session")
def maneuvers_run(tmp_path_factory) -> Path:
    """``highway_maneuvers.yaml`` as shipped (ideal channel): a join at the tail, one in the middle, a leave, a
    split and a merge."""
    out = tmp_path_factory.mktemp("maneuvers") / "run"
    result = run_scenario(load_scenario(REPO / "scenarios" / "highway_maneuvers.yaml", QUIET), out)
    assert result.ok, result.error
    return out


def ideal_run(path: Path, out: Path) -> Path:
    if path.name == "highway_sumo.yaml":
        pytest.importorskip("libsumo")
    no_attacks = ["attacks=[]"] if "\nattacks:" in path.read_text() else []  # the ideal channel carries none
    result = run_scenario(load_scenario(path, ["channel.type=ideal", *no_attacks, *QUIET]), out)
    assert result.ok, result.error
    return out


@pytest.mark.parametrize("path", [pytest.param(p, marks=[pytest.mark.external] if p.name == "highway_sumo.yaml" else [])
                                  for p in SCENARIOS], ids=[p.stem for p in SCENARIOS])
def test_every_link_of_every_shipped_scenario_delivers_everything_on_the_ideal_channel(path, tmp_path,
                                                                                       maneuvers_run):
    out = maneuvers_run if path.name == "highway_maneuvers.yaml" else ideal_run(path, tmp_path / "run")
    found = metrics(out)
    assert found["followers"], "no follower"
    for name, follower in found["followers"].items():
        assert follower["pdr"] == 1.0, (name, follower["links"])
        for link in follower["links"]:
            assert link["sent"] > 0 and link["received"] == link["sent"], (name, link)


def robot_ids(out: Path) -> dict[str, int]:
    from orchestrator.metrics import RunData

    return {r.name: r.id for r in RunData.load(out).robots}


def recorded_predecessor(out: Path, robot: int) -> tuple[np.ndarray, np.ndarray]:
    """``platoon_state``: the times and the predecessor ``robot`` listened to (-1: none or leading)."""
    state = trace(out, "platoon_state")
    mine = state["robot"] == robot
    order = np.argsort(state["t_ns"][mine])
    pred = np.nan_to_num(state["predecessor"][mine][order], nan=-1).astype(int)
    leading = state["platoon_index"][mine][order] == 0
    return state["t_ns"][mine][order], np.where(leading, -1, pred)


def changes(t_ns: np.ndarray, values: np.ndarray) -> list[tuple[float, int]]:
    at = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    return [(round(float(t_ns[k]) / 1e9, 2), int(values[k])) for k in at]


def following_from_metrics(found: dict, name: str, ids: dict[str, int]) -> list[tuple[float, int]]:
    return [(round(f["from_s"], 2), ids[f["predecessor"]]) for f in found["followers"][name]["following"]]


def test_every_robot_that_follows_at_any_time_is_a_follower(maneuvers_run):
    found = metrics(maneuvers_run)
    assert set(found["followers"]) == {"p1_1", "p1_2", "p1_3", "p1_4", "j_tail", "j_mid"}
    for joiner in ("j_tail", "j_mid"):
        entry = found["followers"][joiner]
        assert entry["spacing_error_rms_m"] is not None and entry["min_gap_m"] > 10.0
    assert found["run"]["followers"] == 6


@pytest.mark.parametrize("robot", ["p1_1", "p1_2", "p1_3", "p1_4", "j_tail", "j_mid"])
def test_the_role_table_follows_the_recorded_predecessor(maneuvers_run, robot):
    """Each stretch of following in metrics.json starts where platoon_state says the predecessor changed."""
    ids = robot_ids(maneuvers_run)
    t_ns, pred = recorded_predecessor(maneuvers_run, ids[robot])
    expected = [(t, p) for t, p in changes(t_ns, pred) if p != -1]
    got = following_from_metrics(metrics(maneuvers_run), robot, ids)
    # adjacent stretches with one predecessor are one stretch; a gap (leading in between) starts a new one
    assert [p for _, p in got] == [p for _, p in expected]
    assert [t for t, _ in got] == [t for t, _ in expected]


def test_join_at_the_tail(maneuvers_run):
    """j_tail follows p1_4 from its request on; its link from p1_4 carries every CAM since; the table says when
    it completed, as maneuver_events does."""
    found, ids = metrics(maneuvers_run), robot_ids(maneuvers_run)
    events = trace(maneuvers_run, "maneuver_events")
    done = events["t_ns"][(events["request"] == 0) & (events["event"] == "completed")]
    entry = found["maneuvers"]["requests"][0]
    assert entry["type"] == "join" and entry["status"] == "completed"
    assert entry["completed_s"] == pytest.approx(done[0] / 1e9) and "j_tail" in entry["robots"]
    link = found["followers"]["j_tail"]["links"]
    assert [(x["predecessor"], round(x["from_s"], 2)) for x in link] == [("p1_4", 1.01)]
    v2x = trace(maneuvers_run, "v2x")
    cam = v2x["message"] == "cam"
    since = v2x["generated_ns"] >= 1.01e9
    sent = np.count_nonzero(cam & since & (v2x["event"] == "tx") & (v2x["sender"] == ids["p1_4"]))
    heard = np.count_nonzero(cam & since & (v2x["event"] == "rx") & (v2x["outcome"] == "received")
                             & (v2x["sender"] == ids["p1_4"]) & (v2x["receiver"] == ids["j_tail"]))
    assert link[0]["sent"] == sent == heard == link[0]["received"]


def test_a_joiners_spacing_error_after_joining_is_the_hand_computed_one(maneuvers_run):
    """Ploeg's CACC: e = bumper-to-bumper gap - (r + h v). j_tail follows p1_4 (both passenger cars) from the
    join's completion; its steady samples are those after it went idle, less SETTLE_S after each change of its
    platoon (the split at 64.02 s and the merge at 88.37 s), all within the settled band."""
    ids = robot_ids(maneuvers_run)
    vehicles = trace(maneuvers_run, "vehicles")

    def samples(name: str) -> dict[str, np.ndarray]:
        mine = vehicles["robot"] == ids[name]
        order = np.argsort(vehicles["t_ns"][mine])
        return {k: vehicles[k][mine][order] for k in ("t_ns", "x", "y", "v")}

    me, ahead = samples("j_tail"), samples("p1_4")
    assert np.array_equal(me["t_ns"], ahead["t_ns"])
    car = preset("passenger_car")
    gap = np.hypot(ahead["x"] - me["x"], ahead["y"] - me["y"]) - car["rear_overhang_m"] - (
        car["length_m"] - car["rear_overhang_m"])
    error = gap - (2.0 + 0.6 * me["v"])  # the scenario's standstill_m and time_gap_s
    state = trace(maneuvers_run, "platoon_state")
    idle_from = state["t_ns"][(state["robot"] == ids["j_tail"]) & (state["maneuver"] == 0)
                              & (state["t_ns"] > 2e9)].min()
    t = me["t_ns"]
    settle = int(SETTLE_S * 1e9)
    steady = (t >= idle_from) & ~((t >= 64.02e9) & (t < 64.02e9 + settle)) & ~(
        (t >= 88.37e9) & (t < 88.37e9 + settle))
    entry = metrics(maneuvers_run)["followers"]["j_tail"]
    assert entry["spacing_error_rms_m"] == pytest.approx(float(np.sqrt(np.mean(error[steady] ** 2))), rel=1e-9)
    assert entry["spacing_error_max_m"] == pytest.approx(float(np.max(np.abs(error[steady]))), rel=1e-9)
    assert entry["spacing_error_max_m"] < 0.1  # settled CACC at 25 m/s; the approach (12 m off) is a transition
    assert entry["transition"]["spacing_error_max_m"] > 5.0


def test_join_in_the_middle(maneuvers_run):
    """p1_2 opens the gap and then follows j_mid; j_mid follows p1_1; the gap opening is a transition, not a
    steady spacing error."""
    found = metrics(maneuvers_run)
    assert [(f["predecessor"]) for f in found["followers"]["p1_2"]["following"]][:2] == ["p1_1", "j_mid"]
    assert found["followers"]["j_mid"]["following"][0]["predecessor"] == "p1_1"
    p1_2 = found["followers"]["p1_2"]
    assert p1_2["spacing_error_max_m"] < 2.0 and p1_2["transition"]["spacing_error_max_m"] > 10.0
    entry = found["maneuvers"]["requests"][1]
    assert entry["status"] == "completed" and {"p1_2", "j_mid"} <= set(entry["robots"])
    assert entry["min_ttc_s"] > 1.0  # no spurious closing speed where p1_2's predecessor changed


def test_leave(maneuvers_run):
    """p1_3 follows no one once it has left; p1_4 then follows p1_2 and closes the gap: that error is what the
    leave caused behind, reported with the maneuver and as p1_4's transition, not as steady error."""
    found = metrics(maneuvers_run)
    following = found["followers"]["p1_3"]["following"]
    assert len(following) == 1 and following[0]["to_s"] == pytest.approx(50.66)
    # the channel hears of the change at the next exchange: the link carries p1_2's frames one step longer
    assert found["followers"]["p1_3"]["links"][0]["to_s"] == pytest.approx(50.67)
    p1_4 = found["followers"]["p1_4"]
    assert [f["predecessor"] for f in p1_4["following"]] == ["p1_3", "p1_2"]
    entry = found["maneuvers"]["requests"][2]
    assert entry["type"] == "leave" and entry["status"] == "completed"
    assert entry["max_spacing_error_behind_m"] == pytest.approx(p1_4["transition"]["spacing_error_max_m"])
    assert entry["max_spacing_error_behind_m"] > 20.0 > p1_4["spacing_error_max_m"]


def test_split_and_merge(maneuvers_run):
    """After the split p1_2 leads platoon 'rear' (no predecessor, though it listens to j_mid to merge later) and
    p1_4 follows it with p1_2 as leader; after the merge p1_2 follows j_mid again in p1."""
    found = metrics(maneuvers_run)
    rows = [r for r in found["roles"]["intervals"] if r["robot"] == "p1_2"]
    rear = [r for r in rows if r["platoon"] == "rear"]
    assert rear and all(r["position"] == 0 and r["predecessor"] is None for r in rear)
    assert rear[0]["from_s"] == pytest.approx(64.01) and rear[-1]["to_s"] == pytest.approx(88.36)
    assert rows[-1]["platoon"] == "p1" and rows[-1]["predecessor"] == "j_mid"
    p1_4 = [r for r in found["roles"]["intervals"] if r["robot"] == "p1_4" and r["platoon"] == "rear"]
    assert p1_4 and all(r["leader"] == "p1_2" and r["position"] == 1 for r in p1_4)
    split, merge = found["maneuvers"]["requests"][3:5]
    assert (split["type"], split["status"], merge["type"], merge["status"]) == (
        "split", "completed", "merge", "completed")
    assert merge["requested_s"] == pytest.approx(80.0) and merge["completed_s"] == pytest.approx(88.36)
    assert found["maneuvers"]["completed"] == 5


@pytest.mark.slow
def test_two_platoons_lists_the_joiner(tmp_path):
    out = tmp_path / "run"
    result = run_scenario(load_scenario(REPO / "scenarios" / "two_platoons.yaml", QUIET), out)
    assert result.ok, result.error
    found = metrics(out)
    assert "joiner" in found["followers"]
    assert found["followers"]["joiner"]["following"][0]["predecessor"] == "inner_2"
    assert found["maneuvers"]["requests"][0]["status"] == "completed"


@pytest.mark.parametrize("robot", ["p1_2", "p1_4"])
def test_each_stretch_of_following_has_its_own_steady_figures(maneuvers_run, robot):
    """A follower with two predecessors: its figures per stretch add up to its whole-run ones (largest error,
    smallest gap, steady time), and each stretch has an L2 ratio against the predecessor of that stretch."""
    entry = metrics(maneuvers_run)["followers"][robot]
    stretches = entry["following"]
    assert len({s["predecessor"] for s in stretches}) == 2
    assert max(s["spacing_error_max_m"] for s in stretches) == entry["spacing_error_max_m"]
    assert min(s["min_gap_m"] for s in stretches) == entry["min_gap_m"]
    rms = np.sqrt(sum(s["spacing_error_rms_m"] ** 2 * s["steady_s"] for s in stretches)
                  / sum(s["steady_s"] for s in stretches))
    assert rms == pytest.approx(entry["spacing_error_rms_m"], rel=1e-6)
    assert all(s["l2_ratio_spacing_error"] is not None for s in stretches)
