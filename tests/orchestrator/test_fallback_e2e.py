"""Graceful degradation end to end: the channel is cut, the leader brakes hard while it is down."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario

CUT_S, BRAKE_S, BACK_S, TIMEOUT_S = 8.0, 12.0, 20.0, 0.5

SCENARIO = f"""
version: 1
name: braking_with_outage
seed: 3
duration_s: 26
step_s: 0.01
vehicles: {{count: 4, template: {{preset: auna_rc_1to10, model: kinematic}}}}
leader: {{profile: braking, params: {{speed_mps: 1.5, decel_mps2: 3.0, start_s: {BRAKE_S}}}}}
controller:
  type: ela_cacc
  period_s: 0.02
  k1: 1.0
  k2: 1.0
  standstill_m: 1.0
  time_gap_s: 1.0
  predict: ctrv          # stale data is extrapolated: without a fallback nobody learns of the braking
channel:
  type: ideal
  outages: [{{start_s: {CUT_S}, end_s: {BACK_S}}}]
outputs: {{plots: false, report: false}}
"""
FALLBACK = [f"controller.fallback={{timeout_s: {TIMEOUT_S}, fresh_age_s: 0.2, recover_hold_s: 0.2, "
            "acc: {time_gap_s: 1.5, standstill_m: 0.5}}"]


def degraded_spans(out: Path, robot: int) -> tuple[np.ndarray, np.ndarray]:
    trace = pq.read_table(out / "trace" / "vehicles.parquet").to_pydict()
    mask = np.asarray(trace["robot"]) == robot
    return np.asarray(trace["t_s"])[mask], np.asarray(trace["degraded"])[mask] > 0.5


def test_fallback_to_acc_avoids_the_collision_and_returns_to_cacc(tmp_path):
    result = run_scenario(parse_scenario(SCENARIO, overrides=FALLBACK), tmp_path)
    assert result.ok
    for name, m in result.metrics["followers"].items():
        assert m["collisions"] == 0, name
        assert m["min_gap_m"] > 0.1, name
        assert m["fallback_switches"] == 2, name  # to ACC at the cut, back to CACC when data returns
        assert m["time_degraded_s"] == pytest.approx(BACK_S - CUT_S - TIMEOUT_S, abs=0.5), name
        assert [entry["to"] for entry in m["fallback_switch_log"]] == ["acc", "cacc"]
    for robot in (2, 3, 4):
        t, degraded = degraded_spans(tmp_path, robot)
        first, last = t[degraded][0], t[degraded][-1]
        assert CUT_S + TIMEOUT_S - 0.02 <= first <= CUT_S + TIMEOUT_S + 0.05  # within the timeout (+1 control step)
        assert BACK_S <= last <= BACK_S + 0.5  # fresh data held for recover_hold_s, then CACC again
    assert pq.read_table(tmp_path / "trace" / "collisions.parquet").num_rows == 0


def test_without_the_fallback_the_same_cut_ends_in_a_collision(tmp_path):
    result = run_scenario(parse_scenario(SCENARIO), tmp_path)
    assert result.ok
    assert sum(m["collisions"] for m in result.metrics["followers"].values()) > 0
    assert pq.read_table(tmp_path / "trace" / "collisions.parquet").num_rows > 0


@pytest.mark.parametrize("floor", [True, False])
def test_a_brake_right_after_the_switch_needs_the_braking_floor(tmp_path, floor):
    """CACC at h = 0.2 s (0.8 m bumper gap at 1.5 m/s), the link cut at 8 s, the leader brakes at 6 m/s^2 (the
    robots' limit) at 9 s, half a second after the followers fell back. Rajamani's ACC alone answers the closing
    over T = 1.5 s and runs into the robot ahead; with the floor every follower stops short, near the 0.3 m
    ``brake_to_gap_m``."""
    scenario = SCENARIO.replace(f"start_s: {BRAKE_S}", "start_s: 9.0").replace("decel_mps2: 3.0", "decel_mps2: 6.0")
    scenario = scenario.replace("time_gap_s: 1.0", "time_gap_s: 0.2")
    overrides = FALLBACK if floor else [FALLBACK[0].replace("recover_hold_s: 0.2,", "recover_hold_s: 0.2, "
                                                                  "brake_to_gap_m: null,")]
    result = run_scenario(parse_scenario(scenario, overrides=overrides), tmp_path)
    assert result.ok
    followers = result.metrics["followers"].values()
    assert all(m["fallback_switches"] >= 1 for m in followers)
    if floor:
        assert all(m["collisions"] == 0 for m in followers)
        assert 0.2 < min(m["min_gap_m"] for m in followers) < 0.4
    else:
        assert sum(m["collisions"] for m in followers) >= 1


@pytest.mark.parametrize("steer_by_sensor", [True, False])
def test_a_cut_in_a_curve_steers_on_what_the_range_sensor_saw(tmp_path, steer_by_sensor):
    """The AuNa S-curve with the link down from 8 to 20 s, through both arcs (R = 10 m). While degraded the
    look-ahead CACC's stale V2X poses would lead the followers off the road; steering by pure pursuit on where the
    range sensor saw the robot ahead keeps them within about a tenth of a metre of their predecessor's path."""
    scenario = parse_scenario((Path(__file__).resolve().parents[2] / "scenarios" / "platoon.yaml").read_text(),
                              overrides=["channel.outages=[{start_s: 8, end_s: 20}]", "outputs.plots=false",
                                         "outputs.report=false", "duration_s=30",
                                         f"controller.fallback={{timeout_s: 0.5, steer_by_sensor: {steer_by_sensor}}}"])
    result = run_scenario(scenario, tmp_path)
    assert result.ok
    followers = result.metrics["followers"].values()
    assert all(m["fallback_switches"] == 2 for m in followers)
    worst = max(m["lateral_deviation_max_m"] for m in followers)
    if steer_by_sensor:
        assert worst < 0.15 and all(m["collisions"] == 0 for m in followers)
    else:
        assert worst > 1.0


def test_a_cacc_with_a_built_in_fallback_also_steers_on_its_sensor_in_a_curve(tmp_path):
    """The same cut with the `cacc_fallback` law (Ploeg CACC, ACC behind it, pure pursuit on the received path):
    once degraded it follows where the range sensor saw the robot ahead, not the received path that ends at the
    cut (on which the first follower used to leave the track by tens of metres)."""
    scenario = parse_scenario((Path(__file__).resolve().parents[2] / "scenarios" / "platoon.yaml").read_text(),
                              overrides=["channel.outages=[{start_s: 8, end_s: 20}]", "outputs.plots=false",
                                         "outputs.report=false", "duration_s=30", "controller={type: cacc_fallback}"])
    result = run_scenario(scenario, tmp_path)
    assert result.ok
    followers = result.metrics["followers"].values()
    assert all(m["collisions"] == 0 for m in followers)
    assert max(m["lateral_deviation_max_m"] for m in followers) < 0.1
