"""A join and a leave in an ela_cacc platoon whose followers keep time gaps of their own (per-robot ``controller``
overrides: one group, each row with its own h). Each gap is sized by the right robot's spacing policy,
D = r + h v (controller facts, section 1):

- every member keeps (and the trace records) its own D, before and after the join;
- the joiner (platoon block, h = 0.6 s) waits for its lane change in the slot D_platoon behind the tail (within the
  maneuver layer's in-slot band, 15 % of D + 0.2 m), not at another member's D;
- the leaver (h = 0.75 s) opens its own D to the robot ahead before changing lane: it is then D + D(25 m/s) behind
  it, not at the gap of the group's first row (h = 1.2 s, 11 m more).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario

R_M, H_PLATOON_S, V_MPS = 2.0, 0.6, 25.0
OWN_H_S = {2: 1.2, 3: 0.75, 4: 0.8}  # robot id (p1_1, p1_2, p1_3) -> its own time gap
JOINER, LEAVER, AHEAD_OF_LEAVER, TAIL = 5, 3, 2, 4

# the scenario-wide lateral block clamps the curvature (a passenger car's steering), as a real platoon's would
SCENARIO = f"""
version: 1
name: own_time_gaps
seed: 5
duration_s: 26.0
step_s: 0.01
leader: {{profile: constant, params: {{speed_mps: {V_MPS}}}}}
controller: {{type: ela_cacc, period_s: 0.01, time_gap_s: {H_PLATOON_S}, standstill_m: {R_M},
             lateral: {{max_curvature_per_m: 0.2}}}}
platoons:
  - name: p1
    count: 4
    template: {{preset: passenger_car}}
    overrides: {{p1_1: {{controller: {{time_gap_s: {OWN_H_S[2]}}}}},
                p1_2: {{controller: {{time_gap_s: {OWN_H_S[3]}}}}},
                p1_3: {{controller: {{time_gap_s: {OWN_H_S[4]}}}}}}}
  - name: j
    members: [{{name: joiner, vehicle: {{preset: passenger_car}}}}]
    lane_offset_m: 3.5
    start: {{x: -100.0, y: 0.0}}
channel: {{type: ideal, platooning_message: true}}
physics: {{range_sensor: {{keep_factor: 1.5}}}}
maneuvers:
  - {{at_s: 1, type: join, robot: joiner, platoon: p1}}
  - {{at_s: 12, type: leave, robot: p1_2, lane_offset_m: -3.5}}
outputs: {{trace: true, plots: false, report: false}}
"""

pytestmark = pytest.mark.slow  # one run of ~10 s


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict[str, np.ndarray], dict[str, list]]:
    out = tmp_path_factory.mktemp("own_time_gaps")
    result = run_scenario(parse_scenario(SCENARIO), out)
    assert result.ok, result
    metrics = json.loads((out / "metrics.json").read_text())
    trace = {k: np.asarray(v) for k, v in pq.read_table(
        out / "trace" / "vehicles.parquet", columns=["t_s", "robot", "x", "v", "est_v", "desired_gap_m"]).to_pydict()
        .items()}
    events = pq.read_table(out / "trace" / "maneuver_events.parquet").to_pydict()
    return metrics, trace, events


def _at(trace: dict[str, np.ndarray], robot: int, t_s: float, name: str) -> float:
    rows = np.flatnonzero((trace["robot"] == robot) & np.isclose(trace["t_s"], t_s))
    assert len(rows) == 1
    return float(trace[name][rows[0]])


def _event_s(events: dict[str, list], robot: int, event: str) -> float:
    hits = [t for t, r, e in zip(events["t_ns"], events["robot"], events["event"], strict=True)
            if r == robot and e == event]
    assert len(hits) == 1, (robot, event, hits)
    return hits[0] / 1e9


def test_both_maneuvers_complete_without_a_collision(run) -> None:
    metrics, _, events = run
    assert metrics["run"]["collisions"] == 0
    assert [r["status"] for r in metrics["maneuvers"]["requests"]] == ["completed", "completed"]
    assert _event_s(events, JOINER, "completed") < _event_s(events, LEAVER, "requested")


def test_every_member_keeps_and_records_its_own_desired_gap(run) -> None:
    _, trace, events = run
    end = _event_s(events, LEAVER, "requested")  # the recorded gaps of the whole group, join included
    for robot, h in {**OWN_H_S, JOINER: H_PLATOON_S}.items():
        mine = (trace["robot"] == robot) & (trace["t_s"] < end) & np.isfinite(trace["desired_gap_m"])
        if robot == JOINER:
            mine &= trace["t_s"] > _event_s(events, JOINER, "completed")
        assert mine.sum() > 200, robot
        np.testing.assert_allclose(trace["desired_gap_m"][mine], R_M + h * trace["est_v"][mine], rtol=1e-12,
                                   err_msg=f"robot {robot}")
    # and drives at it: the steady gaps of the platoon just before the leave
    t = round(end - 0.5, 2)
    for ahead, robot in ((1, 2), (2, 3), (3, 4), (4, JOINER)):
        h = OWN_H_S.get(robot, H_PLATOON_S)
        gap = _at(trace, ahead, t, "x") - _at(trace, robot, t, "x")
        settling = 0.2 if robot == JOINER else 0.05  # the joiner is still settling (a 17 m gap after 12 m off)
        assert gap == pytest.approx(R_M + h * V_MPS, abs=settling), (ahead, robot)


def test_the_joiner_waits_in_the_slot_of_the_platoons_own_gap(run) -> None:
    _, trace, events = run
    t = _event_s(events, JOINER, "lane_change")
    slot = R_M + H_PLATOON_S * _at(trace, TAIL, t, "v")  # D of the platoon's block at the tail's speed
    distance = _at(trace, TAIL, t, "x") - _at(trace, JOINER, t, "x")
    assert abs(distance - slot) < 0.15 * slot + 0.2, (distance, slot)  # the in-slot band
    wrong = R_M + OWN_H_S[2] * V_MPS  # the group's first row's D (32 m): where the slot was before
    assert abs(distance - wrong) > 10.0


def test_the_leaver_opens_its_own_gap_before_changing_lane(run) -> None:
    _, trace, events = run
    t = _event_s(events, LEAVER, "lane_change")  # the gap is open
    h = OWN_H_S[LEAVER]
    extra = R_M + h * V_MPS  # its D at the speed it had when it began to open the gap
    want = R_M + h * _at(trace, LEAVER, t, "est_v") + extra
    distance = _at(trace, AHEAD_OF_LEAVER, t, "x") - _at(trace, LEAVER, t, "x")
    # the law tracks a ramp (a fifth-order one over gap_open_s), so it lags a little behind its end
    assert distance == pytest.approx(want, abs=2.0)
    assert distance < want - extra + R_M + OWN_H_S[2] * V_MPS - 8.0  # not the first row's 32 m gap


def test_the_metrics_judge_each_member_by_its_own_gap(run) -> None:
    """metrics.json scores a member with a time gap of its own against its own D = r + h v while in the platoon it
    started in (it was judged by the platoon block's h: 0.6 s x 25 m/s = 15 m of spacing error for p1_1)."""
    metrics, _, _ = run
    followers = metrics["followers"]
    for name in ("p1_1", "p1_3"):  # kept their place throughout (p1_2 leaves)
        assert followers[name]["spacing_error_rms_m"] < 0.5, (name, followers[name])
