"""coopsim to ROS 2: a real rclpy node in another process receives /clock and the robots' odometry (REP-105
frames) with the values of the run's own trace."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario

REPO = Path(__file__).resolve().parents[2]


def test_a_ros2_node_follows_the_run(tmp_path, monkeypatch):
    # its own DDS domain (ids up to 101 keep clear of Linux's ephemeral ports), so parallel runs do not mix
    domain = random.Random(os.getpid()).randrange(20, 100)
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    end = 2.0
    peer = subprocess.Popen([sys.executable, str(REPO / "tests" / "orchestrator" / "ros2_peer.py"), str(domain),
                             str(end), str(tmp_path / "peer.json"), "robot0", "robot2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert peer.stdout is not None and peer.stdout.readline().strip() == "ready"
        bridge = {"name": "ros", "type": "ros2",
                  "params": {"period_s": 0.1, "domain_id": domain, "wait_for_subscribers_s": 20}}
        scenario = parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=[
            f"duration_s={end}", "outputs.plots=false", "outputs.report=false", f"federates={json.dumps([bridge])}"])
        result = run_scenario(scenario, tmp_path / "run")
        assert result.ok, result.error
        _, err = peer.communicate(timeout=90)
        assert peer.returncode == 0, err
    finally:
        if peer.poll() is None:
            os.kill(peer.pid, signal.SIGTERM)
            peer.wait(timeout=10)
    got = json.loads((tmp_path / "peer.json").read_text())
    # simulation time, every 0.1 s, in order
    assert got["clock"] == sorted(got["clock"]) and got["clock"][-1] == end
    assert len(got["clock"]) >= 15
    trace = pq.read_table(tmp_path / "run" / "trace" / "vehicles.parquet").to_pydict()
    t_s, robot = np.asarray(trace["t_s"]), np.asarray(trace["robot"])
    for name, rid in (("robot0", 1), ("robot2", 3)):
        truth = got[f"{name}/ground_truth"]
        assert len(truth) >= 15, name
        for msg in truth:
            assert msg["frame"] == "map" and msg["child"] == f"{name}/base_link"
            row = np.flatnonzero((robot == rid) & np.isclose(t_s, msg["t"]))[0]
            assert (msg["x"], msg["y"], msg["v"]) == (trace["x"][row], trace["y"][row], trace["v"][row])
            assert np.isclose(2 * np.arctan2(msg["qz"], msg["qw"]), trace["yaw"][row], atol=1e-12)  # about z
        odom = got[f"{name}/odom"]
        assert odom and all(m["frame"] == f"{name}/odom" and m["child"] == f"{name}/base_link" for m in odom)
    # REP-103: the leader starts heading east, so x grows
    assert got["robot0/ground_truth"][-1]["x"] > got["robot0/ground_truth"][0]["x"]
