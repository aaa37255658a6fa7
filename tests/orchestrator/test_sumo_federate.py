"""SUMO as a federate, with real SUMO headless (libsumo in process; TraCI to a sumo process for one test): its
vehicles become robots that appear and leave with SUMO's departures and arrivals, posed at SUMO's positions (checked
against SUMO's own floating car data), coopsim's platoon is mirrored into SUMO where it is, SUMO's traffic brakes
behind a slow platoon car, SUMO's robots send and receive CAMs over ITS-G5, reruns are bit-identical, and a bad net
path is a validation error naming the field."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

pytest.importorskip("libsumo")

from federates.physics.presets import preset
from orchestrator.runner import run_scenario
from orchestrator.scenario import load_scenario

pytestmark = pytest.mark.external  # needs a service or tool beside Python (pyproject.toml's markers; README "Tests")

REPO = Path(__file__).resolve().parents[2]
NET = REPO / "scenarios" / "sumo" / "highway.net.xml"
NET_OFFSET = (600.0, -1.6)  # the shipped net's <location netOffset>: SUMO x, y = local x, y + offset
REAR_SHARE = 0.2  # the federate's default rear_overhang_share

# lane 3 (y = 6.4 m local), away from the platoon in lane 1: six cars that enter at 400 m and leave at 620 m
PASSING = """<routes>
    <vType id="car" length="4.6" width="1.8" minGap="2.5" accel="2.6" decel="4.5" sigma="0" maxSpeed="30"/>
    <route id="r" edges="motorway"/>
    <flow id="pass" type="car" route="r" begin="0" end="3" number="6" departLane="3" departPos="400"
          departSpeed="30" arrivalPos="620"/>
</routes>
"""

# lane 1, behind the platoon: one fast car that may not change lanes
CHASER = """<routes>
    <vType id="car" length="4.6" width="1.8" minGap="2.5" accel="2.6" decel="4.5" sigma="0" maxSpeed="30"
           lcStrategic="-1" lcCooperative="0" lcSpeedGain="0" lcKeepRight="0"/>
    <route id="r" edges="motorway"/>
    <vehicle id="chaser" type="car" route="r" depart="0" departLane="1" departPos="420" departSpeed="30"/>
</routes>
"""


def write_scenario(tmp_path: Path, routes: str, *, count: int = 3, speed: float = 25.0, duration: float = 10.0,
                   sumo: dict | None = None, channel: dict | None = None) -> Path:
    """A platoon on the shipped motorway (lane 1) with SUMO traffic from ``routes``; files next to the scenario."""
    shutil.copyfile(NET, tmp_path / "highway.net.xml")
    (tmp_path / "traffic.rou.xml").write_text(routes)
    scenario = {
        "version": 1, "name": "sumo_test", "seed": 5, "duration_s": duration, "step_s": 0.01,
        "vehicles": {"count": count, "name_prefix": "car", "template": {"preset": "passenger_car",
                                                                        "model": "kinematic"}},
        "platoon": {"size": count},
        "leader": {"profile": "constant", "params": {"speed_mps": speed}},
        "controller": {"type": "ploeg_cacc", "period_s": 0.02},
        "channel": channel or {"type": "ideal"},
        "federates": [{"name": "traffic", "type": "sumo", "params": {
            "net": "highway.net.xml", "routes": ["traffic.rou.xml"], "period_s": 0.1, "fcd_output": True,
            **(sumo or {})}}],
        "outputs": {"trace": True, "plots": False, "report": False},
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return path


def run(scenario: Path, out: Path):
    result = run_scenario(load_scenario(scenario), out)
    assert result.ok, result.error
    return result


def trace(out: Path, name: str) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in pq.read_table(out / "trace" / f"{name}.parquet").to_pydict().items()}


def fcd(out: Path) -> dict[str, dict[int, tuple[float, float, float, float, str]]]:
    """SUMO's floating car data: vehicle id -> {time [ms] -> (x, y, angle, speed, lane)}."""
    found: dict[str, dict[int, tuple[float, float, float, float, str]]] = {}
    for step in ET.parse(out / "traffic.fcd.xml").getroot().iter("timestep"):
        t_ms = round(float(step.get("time")) * 1000)
        for veh in step.iter("vehicle"):
            found.setdefault(veh.get("id"), {})[t_ms] = (float(veh.get("x")), float(veh.get("y")),
                                                         float(veh.get("angle")), float(veh.get("speed")),
                                                         veh.get("lane", ""))
    return found


def sumo_children() -> list[int]:
    """Pids of sumo processes this test process started that are still there."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
        except OSError:
            continue
        if fields.get("PPid", "").strip() == str(os.getpid()) and fields.get("Name", "").strip() == "sumo":
            found.append(int(status.parent.name))
    return found


def test_sumo_vehicles_appear_and_leave_as_robots_posed_where_sumo_has_them(tmp_path):
    out = tmp_path / "run"
    run(write_scenario(tmp_path, PASSING), out)
    sumo = fcd(out)
    own = {vid: times for vid, times in sumo.items() if not vid.startswith("coopsim.")}
    events = trace(out, "traffic")
    departed = dict(zip(events["sumo_id"][events["event"] == "departed"],
                        events["robot"][events["event"] == "departed"], strict=True))
    arrived = set(events["sumo_id"][events["event"] == "arrived"])
    # every vehicle SUMO drove became a robot once; those SUMO removed before the end left (at least the first three)
    assert set(departed) == set(own) and len(own) == 6
    last_ms = max(t for times in sumo.values() for t in times)
    assert arrived == {vid for vid, times in own.items() if max(times) < last_ms} and len(arrived) >= 3
    rows = trace(out, "vehicles")
    t_ms = np.round(rows["t_ns"] / 1e6).astype(np.int64)
    for vid, robot in departed.items():
        mine = rows["robot"] == robot
        times = own[vid]
        # present while SUMO has it: from its first floating-car sample until the SUMO step that removed it (the
        # last 10 ms physics step before it: in between, the body moves on at its last speed)
        assert t_ms[mine].min() == min(times)
        assert t_ms[mine].max() == (max(times) + 100 - 10 if vid in arrived else 10_000)  # or the end of the run
        # at every SUMO step its rear axle is SUMO's front bumper moved back by 80 % of the length, in the local
        # frame (REP-103 yaw from SUMO's compass angle); fcd-output has 6 decimals: 2e-6 m, 1e-6 rad
        at = mine & np.isin(t_ms, list(times))
        sumo_xy = np.array([times[t][:2] for t in t_ms[at]])
        angle = np.array([times[t][2] for t in t_ms[at]])
        yaw = np.pi / 2 - np.radians(angle)
        back = (1 - REAR_SHARE) * 4.6
        np.testing.assert_allclose(rows["x"][at], sumo_xy[:, 0] - NET_OFFSET[0] - back * np.cos(yaw), atol=2e-6)
        np.testing.assert_allclose(rows["y"][at], sumo_xy[:, 1] - NET_OFFSET[1] - back * np.sin(yaw), atol=2e-6)
        np.testing.assert_allclose(rows["yaw"][at], 0.0, atol=1e-6)  # east, along the motorway
        np.testing.assert_allclose(rows["y"][at], 6.4, atol=1e-6)  # lane 3's centre
        np.testing.assert_allclose(rows["v"][at], [times[t][3] for t in t_ms[at]], atol=1e-6)


def test_the_platoon_is_mirrored_into_sumo_where_it_is(tmp_path):
    out = tmp_path / "run"
    run(write_scenario(tmp_path, PASSING, duration=5.0), out)
    sumo = fcd(out)
    rows = trace(out, "vehicles")
    t_ms = np.round(rows["t_ns"] / 1e6).astype(np.int64)
    car = preset("passenger_car")
    length, rear = car["length_m"], car["rear_overhang_m"]
    for robot, name in ((1, "car0"), (2, "car1"), (3, "car2")):
        seen = sumo[f"coopsim.{name}"]
        # from SUMO's first step on (inserted at 0.1 s), at every step where SUMO saw it
        common = sorted(set(seen) & set(t_ms[rows["robot"] == robot].tolist()))
        assert len(common) >= 45
        mine = rows["robot"] == robot
        by_t = {int(t): k for t, k in zip(t_ms[mine], np.flatnonzero(mine), strict=True)}
        k = np.array([by_t[t] for t in common])
        front_x = rows["x"][k] + (length - rear) * np.cos(rows["yaw"][k]) + NET_OFFSET[0]
        front_y = rows["y"][k] + (length - rear) * np.sin(rows["yaw"][k]) + NET_OFFSET[1]
        got = np.array([seen[t][:2] for t in common])
        # the mirror is extrapolated one SUMO step at constant speed: off by a P^2 / 2 (followers barely accelerate)
        np.testing.assert_allclose(got[:, 0], front_x, atol=0.01)
        np.testing.assert_allclose(got[:, 1], front_y, atol=1e-6)
        assert {seen[t][4] for t in common} == {"motorway_1"}  # SUMO has it on its lane, so its traffic sees it


def test_a_sumo_car_behind_a_slow_platoon_car_brakes(tmp_path):
    """With the platoon car mirrored, SUMO's car brakes behind it; without, it drives through it: a collision, and
    the range sensor of the platoon car sees it ahead."""
    speeds = {}
    for mirror in (True, False):
        out = tmp_path / f"mirror_{mirror}"
        case = tmp_path / f"case_{mirror}"
        case.mkdir()
        run(write_scenario(case, CHASER, count=1, speed=10.0, duration=20.0, sumo={"mirror": mirror}), out)
        rows = trace(out, "vehicles")
        chaser = rows["robot"] == 1_000_000
        leader = rows["robot"] == 1
        speeds[mirror] = rows["v"][chaser]
        gap = rows["x"][leader][-1] - rows["x"][chaser][-1]
        if mirror:
            # it started 180 m back at 30 m/s and now follows the 10 m/s car at a safe distance, in its lane
            assert abs(speeds[mirror][-1] - 10.0) < 0.5 and gap > 4.6 + 2.5
            assert pq.read_table(out / "trace" / "collisions.parquet").num_rows == 0
        else:
            assert gap < 0  # SUMO never knew of the platoon car: it drove through it
            # ... which coopsim counts as a collision, and then the platoon car's range sensor sees it ahead
            hits = trace(out, "collisions")
            assert (1, 1_000_000) in set(zip(hits["a"].tolist(), hits["b"].tolist(), strict=True))
            ranges = trace(out, "range")
            seen = (ranges["robot"] == 1) & (ranges["target"] == 1_000_000)
            assert seen.sum() >= 50  # 50 m of range at 20 m/s closing: about 2.5 s
            car = preset("passenger_car")
            at = np.isin(rows["t_ns"], ranges["t_ns"][seen])
            gap_true = (rows["x"][chaser & at] - REAR_SHARE * 4.6) - (rows["x"][leader & at] + car["length_m"]
                                                                       - car["rear_overhang_m"])
            np.testing.assert_allclose(ranges["range_m"][seen], gap_true, atol=0.6)  # noise 0.1 m std
    assert speeds[True].min() < 11.0 and speeds[False].min() > 29.0


def test_sumo_robots_send_and_receive_cams_over_itsg5(tmp_path):
    out = tmp_path / "run"
    run(write_scenario(tmp_path, PASSING, duration=6.0, channel={"type": "itsg5", "trace": "all"}), out)
    events = trace(out, "traffic")
    sumo_robots = set(events["robot"].tolist())
    log = trace(out, "v2x")
    tx = (log["event"] == "tx") & np.isin(log["sender"], list(sumo_robots))
    assert tx.sum() >= 6 * 3 and set(log["sender"][tx].tolist()) == sumo_robots  # every one of them sends
    heard = (log["event"] == "rx") & (log["outcome"] == "received")
    # the platoon hears them, and they hear the platoon
    assert (heard & np.isin(log["sender"], list(sumo_robots)) & np.isin(log["receiver"], [1, 2, 3])).sum() > 0
    assert (heard & np.isin(log["receiver"], list(sumo_robots)) & np.isin(log["sender"], [1, 2, 3])).sum() > 0
    load = trace(out, "channel_load")
    assert set(load["robot"].tolist()) >= sumo_robots


def test_reruns_are_bit_identical_and_traci_gives_the_same_traffic(tmp_path):
    scenario = write_scenario(tmp_path, PASSING, duration=4.0)
    first = run(scenario, tmp_path / "a")
    again = run(scenario, tmp_path / "b")
    assert first.run_info["digest"] == again.run_info["digest"]
    # the resolved scenario runs from the run directory (the files were kept there) to the same traces
    rerun = run_scenario(load_scenario(tmp_path / "a" / "scenario.resolved.yaml"), tmp_path / "c")
    assert rerun.run_info["digest"] == first.run_info["digest"]
    # a sumo process over TraCI: the same SUMO, so the same departures and poses
    data = yaml.safe_load(scenario.read_text())
    data["federates"][0]["params"]["backend"] = "traci"
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    traci = run(scenario, tmp_path / "d")
    assert traci.run_info["digest"] == first.run_info["digest"]
    assert sumo_children() == []  # the sumo process ended with the run
    assert json.loads((tmp_path / "d" / "run.json").read_text())["digest"] == first.run_info["digest"]


@pytest.mark.parametrize(("net", "message"), [
    ("missing.net.xml", "no net file 'missing.net.xml'"),
    ("../outside.net.xml", "net '../outside.net.xml' lies outside the scenario's directory"),
    ("/etc/hostname", "'/etc/hostname' is an absolute path"),
    ("traffic.rou.xml", "traffic.rou.xml has no <location> element: is it a SUMO network?"),
])
def test_a_bad_net_path_is_exit_2_naming_the_field(tmp_path, net, message):
    case = tmp_path / "case"
    case.mkdir()
    (tmp_path / "outside.net.xml").write_text("<net/>")
    scenario = write_scenario(case, PASSING)
    data = yaml.safe_load(scenario.read_text())
    data["federates"][0]["params"]["net"] = net
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(scenario), "--out",
                           str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "federates[0].params.net" in proc.stderr and message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_geo_referenced_net_is_placed_at_the_scenario_origin(tmp_path):
    """A UTM net built by netconvert from WGS84 nodes: SUMO's vehicles land on the road as the scenario's local
    frame (tangent plane at its origin) has it, headings turned by the meridian convergence (1.2 deg here), and
    the platoon car placed on that road in the local frame is on SUMO's lane."""
    from comms_models.itsg5.geo import LocalProjection

    a, b = (51.4934, 7.4100), (51.5000, 7.4400)  # (lat, lon) of the road's ends, zone 32 (central meridian 9 E)
    (tmp_path / "geo.nod.xml").write_text(f'<nodes><node id="a" x="{a[1]}" y="{a[0]}"/>'
                                          f'<node id="b" x="{b[1]}" y="{b[0]}"/></nodes>')
    (tmp_path / "geo.edg.xml").write_text('<edges><edge id="road" from="a" to="b" numLanes="1" speed="30" '
                                          'spreadType="center"/></edges>')
    netconvert = Path(sys.executable).parent / "netconvert"
    subprocess.run([str(netconvert), "--node-files", "geo.nod.xml", "--edge-files", "geo.edg.xml", "-o",
                    "geo.net.xml", "--proj.utm", "true"], cwd=tmp_path, check=True, capture_output=True, timeout=60)
    scenario = write_scenario(tmp_path, """<routes><route id="r" edges="road"/>
        <vehicle id="geo" route="r" depart="0" departPos="20" departSpeed="20"/></routes>""", count=1,
                              speed=10.0, duration=4.0)
    end = np.array(LocalProjection(*a).to_local(b[0], b[1]))
    direction = end / np.linalg.norm(end)
    data = yaml.safe_load(scenario.read_text())
    data["origin"] = {"lat_deg": a[0], "lon_deg": a[1]}
    data["federates"][0]["params"]["net"] = "geo.net.xml"
    start = 300.0 * direction
    data["vehicles"]["overrides"] = {"car0": {"initial": {"x": float(start[0]), "y": float(start[1]),
                                                          "yaw": float(np.arctan2(direction[1], direction[0]))}}}
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "run"
    run(scenario, out)
    rows = trace(out, "vehicles")
    mine = rows["robot"] == 1_000_000
    assert mine.sum() > 300
    across = rows["x"][mine] * direction[1] - rows["y"][mine] * direction[0]  # signed distance from the road
    np.testing.assert_allclose(across, 0.0, atol=0.01)
    np.testing.assert_allclose(rows["yaw"][mine], np.arctan2(direction[1], direction[0]), atol=2e-4)
    along = rows["x"][mine] * direction[0] + rows["y"][mine] * direction[1]
    assert 15.0 < along.min() < 20.0 and along.max() > 90.0  # 20 m in at 20 m/s: the rear axle 3.7 m behind
    mirrored = fcd(out)["coopsim.car0"]
    assert {lane for *_, lane in mirrored.values()} == {"road_0"}
    lane_end = np.array([2098.15, 689.14])  # the lane's shape in the net (from its start at 0, 0)
    xy = np.array([v[:2] for v in mirrored.values()])
    unit = lane_end / np.linalg.norm(lane_end)
    np.testing.assert_allclose(unit[0] * xy[:, 1] - unit[1] * xy[:, 0], 0.0, atol=0.02)  # on the lane's line


def test_a_route_file_that_is_not_one_is_refused_at_its_field(tmp_path):
    scenario = write_scenario(tmp_path, "<additional><e1Detector id='d' lane='motorway_0' pos='10' file='x.xml' "
                                        "period='1'/></additional>")
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "validate", str(scenario)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert ("federates[0].params.routes: traffic.rou.xml is not a SUMO routes file: its root element is "
            "<additional>") in proc.stderr


def test_a_sumo_period_off_the_step_grid_is_refused(tmp_path):
    scenario = write_scenario(tmp_path, PASSING)
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "validate", str(scenario), "--set",
                           "federates[0].params.period_s=0.015"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert "federates[0].params.period_s: must be a whole number of steps (step_s = 0.01 s), got 0.015" in proc.stderr


def test_physics_poses_a_robot_at_the_time_its_pose_is_valid_and_moves_it_on_in_between():
    """The physics side on its own: a pose published early waits for its time; between poses the body moves on
    along its last arc; a robot of another model ignores pose rows."""
    from core.federate import SetupContext
    from core.robot_blocks import InitialState, VehicleBlock
    from core.robots import RobotSpec
    from federates.physics.config import PhysicsConfig
    from federates.physics.federate import PhysicsFederate
    from federates.physics.models.posed import POSED_MODEL

    physics = PhysicsFederate("physics", 10_000_000, PhysicsConfig())
    physics.setup(SetupContext(seed=1, end_ns=10**9))
    posed = RobotSpec(7, "posed", vehicle=VehicleBlock("g35_sedan", POSED_MODEL), posed_by="s")
    driven = RobotSpec(8, "driven", vehicle=VehicleBlock("g35_sedan", "kinematic"), initial=InitialState(y=50.0))
    physics.spawn([posed, driven])

    def pose(t_ns, robot, x, v, yaw_rate=0.0):
        return {"t_ns": np.array([t_ns]), "robot": np.array([robot]), "x": np.array([x]), "y": np.array([1.0]),
                "yaw": np.array([0.0]), "v": np.array([v]), "a": np.array([0.0]), "yaw_rate": np.array([yaw_rate])}

    state = physics.step(0, {"poses": [pose(20_000_000, 7, 5.0, 10.0), pose(20_000_000, 8, 99.0, 1.0)]})["state"]
    assert state["x"][0] == 0.0 and state["x"][1] == 0.0  # not due yet
    state = physics.step(10_000_000, {"poses": []})["state"]
    assert state["x"][0] == 0.0
    state = physics.step(20_000_000, {"poses": []})["state"]
    assert (state["x"][0], state["y"][0], state["v"][0]) == (5.0, 1.0, 10.0)
    assert state["x"][1] == 0.0 and state["y"][1] == 50.0  # the kinematic robot is not posed
    assert physics.poses.applied == 1 and physics.poses.ignored == 1
    state = physics.step(30_000_000, {"poses": []})["state"]
    assert state["x"][0] == pytest.approx(5.1, abs=1e-12)  # 10 m/s for 10 ms


# a platoon leader's twin that wants 25 m/s, and a slow car 150 m ahead of the leader in its lane
DRIVEN = """<routes>
    <vType id="leader" length="4.6" width="1.8" minGap="2.5" accel="2.6" decel="4.5" sigma="0" maxSpeed="25"
           speedFactor="1" speedDev="0"/>
    <vType id="slow" length="4.6" width="1.8" sigma="0" maxSpeed="15" speedFactor="1" speedDev="0"
           lcStrategic="-1" lcCooperative="0" lcSpeedGain="0" lcKeepRight="0"/>
    <route id="eastbound" edges="motorway"/>
    <vehicle id="slow" type="slow" route="eastbound" depart="0" departLane="1" departPos="750" departSpeed="15"/>
</routes>
"""


def test_sumo_drives_a_platoon_leader_along_its_route(tmp_path):
    scenario = write_scenario(tmp_path, DRIVEN, count=2, speed=25.0, duration=25.0,
                              sumo={"drive_route": "eastbound", "drive_type": "leader"})
    data = yaml.safe_load(scenario.read_text())
    data["drivers"] = [{"federate": "traffic", "robots": ["car0"]}]
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "run"
    run(scenario, out)
    rows = trace(out, "vehicles")
    leader, follower, slow = (rows["robot"] == r for r in (1, 2, 1_000_000))
    # SUMO's twin caught up with the slow car and follows it at 15 m/s; the leader, and its follower, with it
    assert abs(rows["v"][leader][-1] - 15.0) < 0.3 and abs(rows["v"][follower][-1] - 15.0) < 0.5
    assert rows["v"][leader][:100].min() > 24.0  # at 25 m/s before it came close
    gap = rows["x"][slow][-1] - 0.92 - (rows["x"][leader][-1] + 3.7)  # bumper to bumper (passenger_car: 3.7 ahead)
    assert 2.5 < gap < 30.0
    assert pq.read_table(out / "trace" / "collisions.parquet").num_rows == 0
    # the robot stays on its twin: at every SUMO step within 5 cm of where SUMO has it (3.5 mm seen)
    twin = fcd(out)["coopsim.car0"]
    t_ms = np.round(rows["t_ns"] / 1e6).astype(np.int64)
    at = leader & np.isin(t_ms, list(twin))
    front = np.array([twin[t][:2] for t in t_ms[at]]) - NET_OFFSET
    car = preset("passenger_car")
    ahead = car["length_m"] - car["rear_overhang_m"]
    off = np.hypot(rows["x"][at] + ahead * np.cos(rows["yaw"][at]) - front[:, 0],
                   rows["y"][at] + ahead * np.sin(rows["yaw"][at]) - front[:, 1])
    assert len(off) > 200 and off.max() < 0.05, off.max()
    commands = trace(out, "commands_traffic")
    assert set(commands["robot"].tolist()) == {1}


def test_sumo_robots_have_wheel_odometry_for_sensor_based_estimates(tmp_path):
    scenario = write_scenario(tmp_path, PASSING, duration=5.0)
    data = yaml.safe_load(scenario.read_text())
    data["physics"] = {"estimate": "odometry"}
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "run"
    run(scenario, out)
    rows = trace(out, "vehicles")
    sumo = rows["robot"] >= 1_000_000
    assert sumo.sum() > 300
    # dead reckoning from the rolled distances of a straight drive: the estimate stays within decimetres of the
    # truth over these seconds (odometry noise, no slip), and the estimated speed is SUMO's 30 m/s
    assert np.abs(rows["est_x"][sumo] - rows["x"][sumo]).max() < 0.5
    assert np.abs(rows["est_y"][sumo] - rows["y"][sumo]).max() < 0.5
    np.testing.assert_allclose(np.median(rows["est_v"][sumo]), 30.0, atol=0.5)
