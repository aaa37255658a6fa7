"""ROS 2 to coopsim: real rclpy nodes in other processes drive robots over cmd_vel, in lock-step (their own follower
law, reruns bit-identical; a node that stops answering fails the run naming the topic) and free-running (a speed
profile the robot follows)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario

from .processes import stop

pytestmark = pytest.mark.external  # needs a service or tool beside Python (pyproject.toml's markers; README "Tests")

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "tests" / "orchestrator" / "ros2_driver.py"
# the driver's constant time-gap law (tests/orchestrator/ros2_driver.py)
R_M, H_S = 0.8, 1.0


def domain_for(tag: str) -> int:
    """A DDS domain of this test alone (ids up to 101 keep clear of Linux's ephemeral ports)."""
    return 20 + zlib.crc32(f"{os.getpid()}-{tag}".encode()) % 80


@pytest.fixture(autouse=True)
def _localhost(monkeypatch):
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")


def start_driver(law: str, domain: int, end_s: float, out: Path, *robots: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(DRIVER), law, str(domain), str(end_s), str(out), *robots],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.stderr.read()
    return proc


def scenario(end_s: float, bridge: dict, robots: list[str], extra: tuple[str, ...] = ()):
    return parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=[
        f"duration_s={end_s}", "vehicles.count=3", "platoon.size=3", "outputs.plots=false", "outputs.report=false",
        "leader={profile: sinusoid, params: {speed_mps: 1.0, amplitude_mps: 0.3, frequency_hz: 0.25, start_s: 1.0}}",
        f"federates={json.dumps([{'name': 'ros', 'type': 'ros2', 'params': bridge}])}",
        f"drivers={json.dumps([{'federate': 'ros', 'robots': robots}])}", *extra])


def run_with_driver(tmp: Path, tag: str, law: str, end_s: float, bridge: dict, robots: list[str],
                    extra: tuple[str, ...] = ()):
    domain = domain_for(tag)
    driver = start_driver(law, domain, end_s, tmp / f"{tag}.json", *robots)
    try:
        result = run_scenario(scenario(end_s, {**bridge, "domain_id": domain}, robots, extra), tmp / tag)
        driver.communicate(timeout=60)
    finally:
        stop(driver)
    return result, json.loads((tmp / f"{tag}.json").read_text())


def test_a_ros2_follower_law_drives_in_lockstep_and_reruns_are_bit_identical(tmp_path):
    end = 6.0
    bridge = {"mode": "lockstep", "period_s": 0.05, "lockstep_timeout_s": 10}
    first, sent = run_with_driver(tmp_path, "a", "acc", end, bridge, ["robot1"])
    assert first.ok, first.error
    # the node's commands are the run's: every period, exactly what it sent, in the bridge's trace
    cmds = pq.read_table(tmp_path / "a" / "trace" / "commands_ros.parquet").to_pydict()
    assert set(cmds["robot"]) == {2}
    assert len(cmds["t_ns"]) == round(end / 0.05) + 1
    assert {(s["t_ns"], s["speed"]) for s in sent} == set(zip(cmds["t_ns"], cmds["speed"], strict=True))
    assert all(np.isnan(cmds["accel"])) and all(np.isnan(cmds["steer"])) and set(cmds["yaw_rate"]) == {0.0}
    assert len(set(cmds["speed"])) > 50  # the law reacts: speeds vary with the gap
    summary = first.run_info["federates"]["ros"]
    assert summary["commands"] == len(cmds["t_ns"]) and summary["malformed"] == {}
    assert summary["lockstep"]["periods"] == len(cmds["t_ns"])
    # the platoon stays stable: robot1's bumper gap near the law's R + H v, bounded, no contact
    trace = pq.read_table(tmp_path / "a" / "trace" / "vehicles.parquet").to_pydict()
    robot, t_s = np.asarray(trace["robot"]), np.asarray(trace["t_s"])
    follower = (robot == 2) & (t_s >= 1.0)
    gap, v = np.asarray(trace["range_m"])[follower], np.asarray(trace["v"])[follower]
    assert np.all(np.isfinite(gap)) and gap.min() > 0.8 and gap.max() < 3.0
    assert np.abs(gap - (R_M + H_S * v)).max() < 0.5
    assert first.run_info["status"] == "ok"
    # the leader's speed swings by 0.3 m/s and robot1 follows it
    lead_v = np.asarray(trace["v"])[(robot == 1) & (t_s >= 1.0)]
    assert lead_v.max() - lead_v.min() > 0.5 and v.max() - v.min() > 0.4
    # a rerun is bit-identical
    second, _ = run_with_driver(tmp_path, "b", "acc", end, bridge, ["robot1"])
    assert second.ok, second.error
    assert second.run_info["digest"] == first.run_info["digest"]
    for name in ("vehicles.parquet", "commands_ros.parquet"):
        assert (tmp_path / "a" / "trace" / name).read_bytes() == (tmp_path / "b" / "trace" / name).read_bytes()


def test_a_ros2_node_drives_a_speed_profile_in_free_mode(tmp_path):
    # paced at twice real time: commands taken as they arrive belong with pacing
    end = 4.0
    result, sent = run_with_driver(tmp_path, "p", "profile", end, {"mode": "free", "period_s": 0.02}, ["robot0"],
                                   ("execution.realtime=2.0",))
    assert result.ok, result.error
    assert {s["speed"] for s in sent} == {1.0, 1.5}
    trace = pq.read_table(tmp_path / "p" / "trace" / "vehicles.parquet").to_pydict()
    robot, t_s, v = np.asarray(trace["robot"]), np.asarray(trace["t_s"]), np.asarray(trace["v"])
    lead = robot == 1
    # within 0.05 m/s of the profile once the speed loop settled (tau 0.5 s), before and after the step at 2 s;
    # ignored commands would leave the leader on its sinusoid (speeds down to 0.7 m/s) or braking to a stop
    before = lead & (t_s >= 1.0) & (t_s <= 2.0)
    after = lead & (t_s >= 3.2)
    assert np.abs(v[before] - 1.0).max() < 0.05
    assert np.abs(v[after] - 1.5).max() < 0.05
    cmds = pq.read_table(tmp_path / "p" / "trace" / "commands_ros.parquet").to_pydict()
    assert set(cmds["robot"]) == {1} and set(cmds["speed"]) == {1.0, 1.5}
    summary = result.run_info["federates"]["ros"]
    assert summary["mode"] == "free" and summary["commands"] == len(cmds["t_ns"]) > 50


def test_a_node_that_stops_answering_fails_the_lockstep_run_naming_the_topic(tmp_path):
    domain = domain_for("silent")
    run_dir = tmp_path / "run"
    scenario_file = tmp_path / "s.yaml"
    bridge = {"mode": "lockstep", "period_s": 0.05, "lockstep_timeout_s": 1.0, "domain_id": domain}
    scenario_file.write_text((REPO / "scenarios" / "platoon.yaml").read_text())
    federates = json.dumps([{"name": "ros", "type": "ros2", "params": bridge}])
    driver = start_driver("silent_from=1.0", domain, 3.0, tmp_path / "silent.json", "robot1")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", "run", str(scenario_file), "--out", str(run_dir),
             "--set", "duration_s=3", "--set", "vehicles.count=3", "--set", "platoon.size=3",
             "--set", "outputs.plots=false",
             "--set", "outputs.report=false", "--set", f"federates={federates}",
             "--set", "drivers=[{federate: ros, robots: [robot1]}]"],
            cwd=REPO, env=os.environ.copy(), capture_output=True, text=True, timeout=120)
    finally:
        stop(driver)
    assert proc.returncode == 1, proc.stderr
    assert ("error: run failed: federate 'ros' failed at t = 1.000 s: LockstepTimeoutError: lock-step: no "
            "geometry_msgs/TwistStamped with header.stamp = 1.000000000 s on /robot1/cmd_vel within "
            "lockstep_timeout_s = 1 s") in proc.stderr
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "failed"
    assert "/robot1/cmd_vel" in run["error"]["message"] and "lockstep_timeout_s" in run["error"]["message"]
    assert run["error"]["sim_time_s"] == pytest.approx(1.0)
    # the traces up to the failure stay
    trace = pq.read_table(run_dir / "trace" / "vehicles.parquet").to_pydict()
    assert 0.9 <= max(trace["t_s"]) <= 1.0
    cmds = pq.read_table(run_dir / "trace" / "commands_ros.parquet").to_pydict()
    assert max(cmds["t_ns"]) == 950_000_000
