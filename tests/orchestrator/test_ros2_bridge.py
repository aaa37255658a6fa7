"""coopsim to ROS 2: a real rclpy node in another process receives /clock, the robots' odometry (REP-105 frames),
range (REP-117), received CAMs (UPER bytes that decode with the project's codec to the sender's values) and the
markers, with the values of the run's own trace."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from comms_models.itsg5.codec import CamCodec, generation_delta_time, read_cam
from comms_models.itsg5.geo import LocalProjection
from comms_models.itsg5.quantise import from_etsi
from orchestrator.build.world import expand_robots
from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario

from .processes import stop

pytestmark = pytest.mark.external  # needs a service or tool beside Python (pyproject.toml's markers; README "Tests")

REPO = Path(__file__).resolve().parents[2]
END_S = 2.0


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One run of the platoon with the bridge at 10 Hz and the peer listening to robot0 and robot2."""
    tmp = tmp_path_factory.mktemp("ros2")
    # its own DDS domain (ids up to 101 keep clear of Linux's ephemeral ports), so parallel runs do not mix
    domain = 20 + zlib.crc32(f"{os.getpid()}-outputs".encode()) % 80
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        peer = subprocess.Popen([sys.executable, str(REPO / "tests" / "orchestrator" / "ros2_peer.py"), str(domain),
                                 str(END_S), str(tmp / "peer.json"), "robot0", "robot2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
        try:
            assert peer.stdout is not None and peer.stdout.readline().strip() == "ready"
            bridge = {"name": "ros", "type": "ros2",
                      "params": {"period_s": 0.1, "domain_id": domain, "wait_for_subscribers_s": 20}}
            scenario = parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=[
                f"duration_s={END_S}", "outputs.plots=false", "outputs.report=false",
                f"federates={json.dumps([bridge])}"])
            result = run_scenario(scenario, tmp / "run")
            assert result.ok, result.error
            _, err = peer.communicate(timeout=90)
            assert peer.returncode == 0, err
        finally:
            stop(peer)
    trace = pq.read_table(tmp / "run" / "trace" / "vehicles.parquet").to_pydict()
    return json.loads((tmp / "peer.json").read_text()), {k: np.asarray(v) for k, v in trace.items()}, scenario


def _row(trace: dict, rid: int, t_s: float) -> int:
    return int(np.flatnonzero((trace["robot"] == rid) & np.isclose(trace["t_s"], t_s))[0])


def test_a_ros2_node_follows_the_run(run):
    got, trace, _ = run
    # simulation time, every 0.1 s, in order
    assert got["clock"] == sorted(got["clock"]) and got["clock"][-1] == END_S
    assert len(got["clock"]) >= 15
    for name, rid in (("robot0", 1), ("robot2", 3)):
        truth = got[f"{name}/ground_truth"]
        assert len(truth) >= 15, name
        for msg in truth:
            assert msg["frame"] == "map" and msg["child"] == f"{name}/base_link"
            row = _row(trace, rid, msg["t"])
            assert (msg["x"], msg["y"], msg["v"]) == (trace["x"][row], trace["y"][row], trace["v"][row])
            assert np.isclose(2 * np.arctan2(msg["qz"], msg["qw"]), trace["yaw"][row], atol=1e-12)  # about z
        odom = got[f"{name}/odom"]
        assert odom and all(m["frame"] == f"{name}/odom" and m["child"] == f"{name}/base_link" for m in odom)
    # REP-103: the leader starts heading east, so x grows
    assert got["robot0/ground_truth"][-1]["x"] > got["robot0/ground_truth"][0]["x"]


def test_range_follows_rep117(run):
    got, trace, _ = run
    lead, follower = got["robot0/range"], got["robot2/range"]
    assert len(lead) >= 15 and len(follower) >= 15
    assert {m["range"] for m in lead} == {"inf"}  # nothing ahead of the leader: +inf
    for msg in follower:
        assert msg["frame"] == "robot2/range_sensor" and msg["max"] == 50.0 and msg["fov"] == 1.0
        # the sensor's value, as the message's float32 holds it
        assert msg["range"] == float(np.float32(trace["range_m"][_row(trace, 3, msg["t"])]))
    assert all(0.5 < m["range"] < 3.0 for m in follower)


def test_received_cams_decode_to_the_senders_values(run):
    got, trace, scenario = run
    cams = got["robot2/cam"]
    assert len(cams) >= 15  # robot2 hears its predecessor robot1 and its leader robot0
    codec, origin = CamCodec(), LocalProjection(scenario.origin.lat_deg, scenario.origin.lon_deg)
    senders = set()
    for msg in cams:
        data = bytes.fromhex(msg["data"])
        assert msg["offset"] == 20 and msg["size"] == msg["stride"] == len(data) - 20
        sender, generated_ns, received_ns = int.from_bytes(data[0:4], "big"), int.from_bytes(data[4:12], "big"), \
            int.from_bytes(data[12:20], "big")
        assert msg["label"] == f"robot{sender - 1}" and generated_ns <= received_ns
        cam = read_cam(codec.decode(data[20:]))  # the bytes after the prefix are a whole CAM in UPER
        assert cam["station_id"] == sender and cam["station_type"] == 5
        assert cam["generation_delta_time"] == generation_delta_time(generated_ns, 1_704_067_200.0)
        si = {k: float(v[0]) for k, v in from_etsi({k: np.asarray([v]) for k, v in cam.items()}).items()}
        x, y = origin.to_local(si["lat_deg"], si["lon_deg"])
        row = _row(trace, sender, generated_ns / 1e9)  # the sender's estimate when it generated the CAM
        assert abs(x - trace["est_x"][row]) < 0.015 and abs(y - trace["est_y"][row]) < 0.015  # 1e-7 deg ~ 1.1 cm
        assert abs(si["v"] - trace["est_v"][row]) <= 0.005 + 1e-9  # 0.01 m/s
        assert abs(math.remainder(si["yaw"] - trace["est_yaw"][row], 2 * math.pi)) <= math.radians(0.05) + 1e-9
        senders.add(sender)
    assert senders == {1, 2}


def test_markers_show_every_robot_with_its_size_and_name(run):
    got, trace, scenario = run
    robots = expand_robots(scenario)
    arrays = got["markers"]
    assert len(arrays) >= 15  # every 0.1 s
    last = arrays[-1]
    boxes = {m["id"]: m for m in last if m["ns"] == "robots"}
    names = {m["id"]: m["text"] for m in last if m["ns"] == "names"}
    assert set(boxes) == set(names) == {r.id for r in robots}
    for robot in robots:
        box, dims = boxes[robot.id], robot.dims.plain()
        assert names[robot.id] == robot.name
        assert box["type"] == 1 and box["frame"] == "map"  # CUBE in the map frame
        assert (box["sx"], box["sy"]) == (dims["length_m"], dims["width_m"])
        row = _row(trace, robot.id, box["t"])
        yaw = trace["yaw"][row]
        ahead = 0.5 * dims["length_m"] - dims["rear_overhang_m"]  # rear axle -> body centre
        assert np.isclose(box["x"], trace["x"][row] + ahead * math.cos(yaw), atol=1e-12)
        assert np.isclose(box["y"], trace["y"][row] + ahead * math.sin(yaw), atol=1e-12)
