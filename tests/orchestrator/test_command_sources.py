"""External command sources: a federate named by the scenario drives robots, in process or hosted over gRPC;
setup errors name the robot; a silent source triggers the timeout rule, recorded in the trace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.runner import run_scenario
from orchestrator.scenario import ScenarioError, parse_scenario

REPO = Path(__file__).resolve().parents[2]
COMMANDER = "tests.orchestrator.command_plugins:SpeedCommander"

BASE = """
version: 1
name: commanded
seed: 3
duration_s: 4.0
step_s: 0.01
vehicles: {count: 3}
leader: {profile: constant, params: {speed_mps: 1.0}}
controller: {type: ela_cacc, time_gap_s: 0.5}
outputs: {plots: false, report: false}
"""


def scenario(params: dict | None = None, drivers: str = "[{federate: cmd, robots: [robot0]}]",
             remote: str | None = None, extra: str = "") -> str:
    entry: dict = {"name": "cmd", "type": COMMANDER, "params": params or {"step_at_s": 1.0}}
    if remote:
        entry["remote"] = remote
    return BASE + f"federates: [{json.dumps(entry)}]\ndrivers: {drivers}\n" + extra


def speeds(out: Path, robot_id: int) -> tuple[np.ndarray, np.ndarray]:
    t = pq.read_table(out / "trace" / "vehicles.parquet", columns=["t_s", "robot", "v", "cmd_speed"]).to_pydict()
    mine = np.asarray(t["robot"]) == robot_id
    return np.asarray(t["t_s"])[mine], np.asarray(t["v"])[mine]


def events(out: Path) -> list[tuple[float, int, str]]:
    table = pq.read_table(out / "trace" / "command_events.parquet").to_pydict()
    return [(t / 1e9, r, e) for t, r, e in zip(table["t_ns"], table["robot"], table["event"], strict=True)]


def follows_the_step_profile(out: Path) -> None:
    """robot0 (id 1) at 1.0 m/s before the commanded step at 1 s and at 1.5 m/s once its speed loop settled."""
    t, v = speeds(out, 1)
    assert np.allclose(v[t < 1.0], 1.0, atol=1e-9)
    assert np.allclose(v[t >= 2.0], 1.5, atol=0.01), v[t >= 2.0].min()
    t2, v2 = speeds(out, 2)  # the follower's own law follows the commanded leader
    assert abs(v2[t2 >= 3.9].mean() - 1.5) < 0.05


def test_an_in_process_federate_drives_a_robot_and_the_trace_shows_its_commands(tmp_path):
    result = run_scenario(parse_scenario(scenario()), tmp_path)
    assert result.ok, result.error
    follows_the_step_profile(tmp_path)
    commands = pq.read_table(tmp_path / "trace" / "commands_cmd.parquet").to_pydict()
    assert set(commands["robot"]) == {1} and len(commands["robot"]) == 81  # every 50 ms of 4 s, t = 0 included
    assert commands["speed"][-1] == 1.5
    summary = result.run_info["federates"]["physics"]
    # the command published at the last instant (4.0 s) would act after the end: 80 taken
    assert summary["received"] == {"commands_cmd": 80} and summary["timeouts"] == 0
    # the control federate does not command a robot it does not drive: NaN in its commands, by contract
    t = pq.read_table(tmp_path / "trace" / "vehicles.parquet", columns=["robot", "cmd_speed"]).to_pydict()
    cmd = np.asarray(t["cmd_speed"])[np.asarray(t["robot"]) == 1]
    assert np.isnan(cmd).all()


def test_without_the_driver_the_same_robot_ignores_the_federate(tmp_path):
    """The control case: the commander runs but the scenario gives it no robot, so nothing follows its profile
    (the tests above would fail if the merge did nothing)."""
    result = run_scenario(parse_scenario(scenario(drivers="[]")), tmp_path)
    assert result.ok
    _, v = speeds(tmp_path, 1)
    assert np.allclose(v, 1.0)


def test_a_grpc_hosted_federate_drives_a_robot(tmp_path, host):
    result = run_scenario(parse_scenario(scenario(remote=host)), tmp_path / "remote")
    assert result.ok, result.error
    follows_the_step_profile(tmp_path / "remote")
    local = run_scenario(parse_scenario(scenario()), tmp_path / "local")
    assert local.run_info["digest"] == result.run_info["digest"]


def test_an_acceleration_only_command_is_integrated_into_the_speed(tmp_path):
    params = {"mode": "accel", "accel_mps2": 0.25, "step_at_s": 99.0}
    result = run_scenario(parse_scenario(scenario(params)), tmp_path)
    assert result.ok
    t, v = speeds(tmp_path, 1)
    # reference v(t) = 1 + 0.25 t; the kinematic model's speed loop lags it by its time constant (0.2 s here)
    late = t >= 1.0
    assert np.allclose(v[late], 1.0 + 0.25 * t[late], atol=0.25 * 0.25)
    assert v[-1] > 1.9


@pytest.mark.parametrize(("drivers", "extra", "message"), [
    ("[{federate: cmd, robots: [robot1]}, {federate: cmd, robots: all}]", "",
     "robot 'robot1' has two command sources"),
    ("[{federate: ros, robots: [robot2]}]", "", "robot 'robot2' is driven by federate 'ros', which the scenario "
                                                "does not have"),
    ("[{federate: cmd, robots: [robot7]}]", "", "no robot named 'robot7'"),
    ("[{federate: cmd, platoons: [3]}]", "", "no platoon 3"),
    ("[{federate: cmd, robots: [robot1], on_timeout: explode}]", "", "on_timeout"),
])
def test_bad_driver_assignments_are_setup_errors_naming_the_robot(drivers, extra, message):
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(scenario(drivers=drivers, extra=extra))
    assert message in str(caught.value)
    assert "drivers" in str(caught.value)  # the field, with its line


def test_a_robot_driven_twice_via_its_own_driver_is_an_error_at_its_line(tmp_path):
    text = BASE.replace("vehicles: {count: 3}", "vehicles:\n  - {name: a}\n  - {name: b, driver: {federate: cmd}}")
    commander = json.dumps({"name": "cmd", "type": COMMANDER})
    text += f"federates: [{commander}]\ndrivers: [{{federate: cmd, robots: all}}]\n"
    path = tmp_path / "twice.yaml"
    path.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "validate", str(path)], cwd=REPO,
                          capture_output=True, text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr
    assert "robot 'b' has two command sources" in proc.stderr and "Traceback" not in proc.stderr
    assert f"{path}:" in proc.stderr  # file and line


def test_a_source_that_publishes_no_command_port_is_a_setup_error(tmp_path):
    drivers = "[{federate: cmd, robots: [robot0], port: steering_wheel}]"
    with pytest.raises(ScenarioError, match="steering_wheel"):
        run_scenario(parse_scenario(scenario(drivers=drivers)), tmp_path)


@pytest.mark.parametrize("policy", ["brake", "hold"])
def test_a_silent_source_triggers_the_timeout_rule_and_it_is_recorded(tmp_path, policy):
    params = {"step_at_s": 1.0, "silent_from_s": 2.0, "silent_until_s": 3.0}
    drivers = f"[{{federate: cmd, robots: [robot0], command_timeout_s: 0.3, on_timeout: {policy}}}]"
    result = run_scenario(parse_scenario(scenario(params, drivers)), tmp_path)
    assert result.ok, result.error
    found = events(tmp_path)
    # the last command, published at 1.95 s, was taken at the 1.96 s step; silence is "more than 0.3 s since it",
    # first true at the 2.27 s step
    assert found == [(pytest.approx(2.27), 1, f"timeout_{policy}"), (pytest.approx(3.01), 1, "resumed")]
    t, v = speeds(tmp_path, 1)
    window = (t > 2.9) & (t < 3.0)
    if policy == "brake":
        assert np.all(v[window] < 1e-6)  # stopped well within the 0.7 s of silence
    else:
        assert np.allclose(v[window], 1.5, atol=1e-6)
    assert np.allclose(v[t >= 3.9], 1.5, atol=0.02)  # the source spoke again and the robot follows it
    assert result.run_info["federates"]["physics"]["timeouts"] == 1


def test_on_timeout_fail_stops_the_run_naming_robot_and_source(tmp_path):
    params = {"step_at_s": 1.0, "silent_from_s": 2.0}
    drivers = "[{federate: cmd, robots: [robot0], command_timeout_s: 0.3, on_timeout: fail}]"
    result = run_scenario(parse_scenario(scenario(params, drivers)), tmp_path)
    assert not result.ok
    assert result.error.robot == "robot0" and abs(result.error.t_ns / 1e9 - 2.27) < 1e-9
    assert "received no command on 'commands_cmd' for 0.3 s" in str(result.error)
    assert (tmp_path / "trace" / "vehicles.parquet").exists()  # what was recorded stays


def test_a_robot_that_never_hears_from_its_source_brakes_after_the_timeout(tmp_path):
    params = {"silent_from_s": 0.0}
    drivers = "[{federate: cmd, robots: [robot0], command_timeout_s: 0.5}]"
    result = run_scenario(parse_scenario(scenario(params, drivers)), tmp_path)
    assert result.ok
    assert events(tmp_path) == [(pytest.approx(0.51), 1, "timeout_brake")]
    t, v = speeds(tmp_path, 1)
    assert np.allclose(v[t <= 0.5], 1.0) and v[-1] == 0.0
