"""A SUMO car cuts into a platoon, seen by the follower's range sensor (issue 11's last criterion), with real SUMO
headless (libsumo).

Four cars in a Ploeg CACC platoon at 20 m/s in lane 1 of the shipped motorway, 26 m apart (time gap 1.2 s,
standstill 2 m). A SUMO car drives beside the gap between car1 and car2 in lane 2 (``sumo_cut_in/cut_in.rou.xml``)
and is told at 4 s to change into lane 1 (``lane_changes``). With SUMO's sublane model (``lateral_resolution_m``) it
moves over sideways for seconds: car2's range sensor switches from car1 to it while it is still partly in lane 2, at
the bumper-to-bumper distance, and car2 brakes behind it without contact. Without the sublane model SUMO moves it
3.2 m sideways within one step: the sensor gets no warning, the car simply is in the lane."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

pytest.importorskip("libsumo")

from federates.physics.presets import preset
from orchestrator.scenario import load_scenario
from orchestrator.scenario.errors import ScenarioError

from .test_sumo_federate import REAR_SHARE, run, trace, write_scenario

pytestmark = pytest.mark.external  # needs a service or tool beside Python (pyproject.toml's markers; README "Tests")

ROUTES = Path(__file__).parent / "sumo_cut_in" / "cut_in.rou.xml"
CUTTER = 1_000_000  # robot id of SUMO's first (and only) vehicle
FOLLOWER = 3  # car2, behind the gap
PREDECESSOR = 2  # car1, ahead of the gap
CUT_AT_S = 4.0
SPEED = 20.0
GAP = 2.0 + 1.2 * SPEED  # the platoon's desired bumper-to-bumper gap [m]
LANE_1_Y, LANE_2_Y = 0.0, 3.2  # lane centres in the local frame [m]
CUTTER_LENGTH = 4.6


def cut_in_scenario(case: Path, **sumo: object) -> Path:
    """The platoon and the SUMO car of ``cut_in.rou.xml``, told to cut in at ``CUT_AT_S``; files in ``case``."""
    case.mkdir()
    lane_change = {"vehicle": "cutter", "t_s": CUT_AT_S, "lane": 1, "duration_s": 10.0}
    path = write_scenario(case, ROUTES.read_text(), count=4, speed=SPEED, duration=12.0,
                          sumo={"lane_changes": [lane_change], **sumo})
    data = yaml.safe_load(path.read_text())
    data["controller"]["time_gap_s"] = 1.2  # standstill 2 m: a 26 m gap at 20 m/s, room for a car to cut in
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("cut_in")
    found = {}
    for name, sumo in (("sublane", {"lateral_resolution_m": 0.8}), ("one_step", {})):
        found[name] = tmp / name / "run"
        run(cut_in_scenario(tmp / name, **sumo), found[name])
    return found


def follower_view(out: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The follower's range samples, and the cutter's pose at each of them (same instants, rows in order)."""
    ranges = trace(out, "range")
    mine = {k: v[ranges["robot"] == FOLLOWER] for k, v in ranges.items()}
    rows = trace(out, "vehicles")
    cutter = {k: v[rows["robot"] == CUTTER] for k, v in rows.items()}
    at = np.searchsorted(cutter["t_ns"], mine["t_ns"])
    assert np.array_equal(cutter["t_ns"][at], mine["t_ns"])  # SUMO's car is there from 0 to the end
    return mine, {k: v[at] for k, v in cutter.items()}


def test_a_sumo_car_cutting_in_is_seen_by_the_followers_range_sensor(runs):
    out = runs["sublane"]
    seen, cutter = follower_view(out)
    t = seen["t_ns"] / 1e9
    on_cutter = seen["target"] == CUTTER
    switch = int(np.argmax(on_cutter))
    t_switch = t[switch]
    # before: car2 sees car1 at the platoon's gap (range noise 0.1 m std)
    before = t < t_switch
    assert before.sum() > 100 and set(seen["target"][before].tolist()) == {PREDECESSOR}
    np.testing.assert_allclose(seen["range_m"][before], GAP, atol=0.6)
    # the cut-in: seen 1.5 s to 3 s after SUMO was told, coming in from the left, and never lost again
    assert CUT_AT_S + 1.5 < t_switch < CUT_AT_S + 3.0, t_switch
    assert on_cutter[switch:].all()
    assert seen["bearing_rad"][switch] > 0.02
    # ... while it was still moving over: its rear within the corridor (car2's width, 1.8 m), its left side still
    # beyond the lane boundary (1.6 m; the car is 1.8 m wide)
    assert 1.6 - 0.9 < cutter["y"][switch] < 1.8
    # the range is the distance from car2's front bumper to the cutter's rear bumper, well short of the gap
    rows = trace(out, "vehicles")
    car2 = {k: v[rows["robot"] == FOLLOWER] for k, v in rows.items()}
    car2 = {k: v[np.searchsorted(car2["t_ns"], seen["t_ns"])] for k, v in car2.items()}
    car = preset("passenger_car")
    ahead = car["length_m"] - car["rear_overhang_m"]
    back = REAR_SHARE * CUTTER_LENGTH
    bumper_gap = np.hypot(cutter["x"] - back * np.cos(cutter["yaw"]) - car2["x"] - ahead * np.cos(car2["yaw"]),
                          cutter["y"] - back * np.sin(cutter["yaw"]) - car2["y"] - ahead * np.sin(car2["yaw"]))
    after = slice(switch, None)
    np.testing.assert_allclose(seen["range_m"][after], bumper_gap[after], atol=0.5)
    assert seen["range_m"][switch] < GAP - 10.0, seen["range_m"][switch]
    # car2 brakes to open its gap behind the newcomer; nothing touches
    assert car2["v"][after].min() < SPEED - 2.0
    assert pq.read_table(out / "trace" / "collisions.parquet").num_rows == 0
    assert json.loads((out / "run.json").read_text())["outcomes"]["collisions"] == 0


def test_the_sublane_model_moves_the_cutter_sideways_over_seconds(runs):
    """At every SUMO step (0.1 s) the cutter's rear axle moved at most maxSpeedLat (1 m/s) x 0.1 s sideways, plus
    what its heading adds (the rear axle lies 3.7 m behind the bumper SUMO moves), and the move took 2.5 s."""
    rows = trace(runs["sublane"], "vehicles")
    cutter = rows["robot"] == CUTTER
    sumo_steps = cutter & (rows["t_ns"] % 100_000_000 == 0)
    y = rows["y"][sumo_steps]
    t = rows["t_ns"][sumo_steps] / 1e9
    assert np.abs(np.diff(y)).max() < 0.15
    moving = (y < LANE_2_Y - 0.05) & (y > y[-1] + 0.05)
    assert t[moving].min() >= CUT_AT_S and t[moving].max() - t[moving].min() > 2.5
    assert rows["yaw"][cutter].min() < -0.02  # it steers right, then back


def test_without_the_sublane_model_the_cutter_jumps_into_the_lane_unseen(runs):
    """SUMO's default lane change: lane 2 to lane 1 in one step, so the first range sample on the cutter finds it
    already in lane 1's centre, at its final range, with no sample of it coming in."""
    out = runs["one_step"]
    rows = trace(out, "vehicles")
    cutter = rows["robot"] == CUTTER
    sumo_steps = cutter & (rows["t_ns"] % 100_000_000 == 0)
    y = rows["y"][sumo_steps]
    assert np.all(np.isclose(y, LANE_2_Y, atol=1e-6) | np.isclose(y, LANE_1_Y, atol=1e-6))
    assert int(np.sum(np.abs(np.diff(y)) > 1.0)) == 1  # one jump of 3.2 m
    seen, at = follower_view(out)
    switch = int(np.argmax(seen["target"] == CUTTER))
    assert seen["target"][switch] == CUTTER and np.isclose(at["y"][switch], LANE_1_Y, atol=1e-6)
    assert abs(seen["bearing_rad"][switch]) < 0.02  # straight ahead from the first sample
    assert seen["t_ns"][switch] / 1e9 < CUT_AT_S + 0.5


@pytest.mark.parametrize(("change", "message"), [
    ({"vehicle": "cutter", "t_s": 4.05, "lane": 1}, "lane_changes[0].t_s must be a multiple of period_s (0.1 s), "
                                                    "got 4.05"),
    ({"vehicle": "coopsim.car0", "t_s": 4.0, "lane": 1}, "'coopsim.car0' is a coopsim robot in SUMO"),
    ({"vehicle": "cutter", "t_s": 4.0, "lane": -1}, "lane_changes[0].lane: Input should be greater than or "
                                                     "equal to 0, got -1"),
    ({"vehicle": "cutter", "t_s": 4.0, "lane": 1, "when": 3}, "lane_changes[0].when"),
    ({"vehicle": "cutter", "t_s": 4.0, "lane": 1, "mode": 4096}, "lane_changes[0].mode: Input should be less than "
                                                                  "or equal to 4095, got 4096"),
])
def test_a_bad_lane_change_is_refused_at_its_field(tmp_path, change, message):
    path = cut_in_scenario(tmp_path / "case")
    data = yaml.safe_load(path.read_text())
    data["federates"][0]["params"]["lane_changes"] = [change]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ScenarioError) as error:
        load_scenario(path)
    assert "federates[0].params.lane_changes" in str(error.value) and message in str(error.value), str(error.value)


@pytest.mark.parametrize(("change", "message"), [
    ({"vehicle": "nobody", "t_s": 1.0, "lane": 1},
     "lane_changes[0] at 1.0 s: SUMO vehicle 'nobody' is not on the road"),
    ({"vehicle": "cutter", "t_s": 1.0, "lane": 4},
     "lane_changes[0] at 1.0 s: lane 4 does not exist on edge 'motorway' of vehicle 'cutter' (lanes 0 to 3)"),
])
def test_a_lane_change_sumo_cannot_make_stops_the_run_naming_it(tmp_path, change, message):
    path = cut_in_scenario(tmp_path / "case")
    data = yaml.safe_load(path.read_text())
    data["duration_s"] = 2.0
    data["federates"][0]["params"]["lane_changes"] = [change]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    from orchestrator.runner import run_scenario

    result = run_scenario(load_scenario(path), tmp_path / "out")
    assert not result.ok and message in str(result.error), result.error


def test_traci_runs_the_same_cut_in(runs, tmp_path):
    """The option reaches a sumo process over TraCI too: the same run, bit for bit."""
    out = tmp_path / "run"
    run(cut_in_scenario(tmp_path / "case", lateral_resolution_m=0.8, backend="traci"), out)
    digest = {path: json.loads((path / "run.json").read_text())["digest"] for path in (out, runs["sublane"])}
    assert digest[out] == digest[runs["sublane"]]


def test_the_sublane_option_reaches_sumos_command_line_only_when_set():
    from federates.sumo.backend import sumo_options

    plain = sumo_options(Path("n.net.xml"), [], 0.1, 1, "warn", None)
    assert "--lateral-resolution" not in plain  # the shipped scenarios keep SUMO's one-step lane changes
    sublane = sumo_options(Path("n.net.xml"), [], 0.1, 1, "warn", None, 0.8)
    assert sublane[sublane.index("--lateral-resolution") + 1] == "0.8"
    assert sublane[:len(plain)] == plain


def test_the_shipped_highway_scenario_forces_its_cut_in_with_the_sublane_model():
    """Its cut-in (tests/orchestrator/test_sumo_highway_cut_in.py) slides over with the sublane model, in a lane
    change mode that does not respect the gaps of others (bits 9-8 = 0) and lets SUMO centre the car afterwards
    (bits 11-10 = 1)."""
    scenario = load_scenario(Path(__file__).resolve().parents[2] / "scenarios" / "highway_sumo.yaml")
    params = next(f for f in scenario.federates if f.type == "sumo").params
    assert params["lateral_resolution_m"] == 0.8
    (change,) = params["lane_changes"]
    assert change["vehicle"] == "cutter" and change["mode"] == 1024
    assert (change["mode"] >> 8) & 0b11 == 0 and (change["mode"] >> 10) & 0b11 == 1
