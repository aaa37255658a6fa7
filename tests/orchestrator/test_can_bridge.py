"""CAN bridge over real python-can buses: an ECU process on a udp_multicast bus commands a robot's speed, a fuzzer
process floods the bus with malformed frames, and the bus log reads back with python-can."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import can
import numpy as np
import pyarrow.parquet as pq
import pytest

from core.federate import SetupContext
from core.robot_blocks import CommandSourceSpec
from core.robots import RobotSpec
from federates.can import CanBridge, Codec
from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario
from tests.waiting import wait_until

from .can_net import GROUP, multicast_on_this_host
from .processes import stop

REPO = Path(__file__).resolve().parents[2]
ECU = REPO / "tests" / "orchestrator" / "can_ecu.py"
FUZZER = REPO / "tests" / "orchestrator" / "can_fuzzer.py"
BRIDGE = "federates.can:CanBridge"
ENV = {"PYTHONPATH": str(REPO)}


def scenario(end_s: float, params: dict, robots: list[str], extra: tuple[str, ...] = ()):
    return parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=[
        f"duration_s={end_s}", "vehicles.count=2", "platoon.size=2", "outputs.plots=false", "outputs.report=false",
        "leader={profile: constant, params: {speed_mps: 1.0}}",
        f"federates={json.dumps([{'name': 'can', 'type': BRIDGE, 'params': params}])}",
        f"drivers={json.dumps([{'federate': 'can', 'robots': robots, 'command_timeout_s': 0.5}])}", *extra])


def speeds(run: Path, robot: int) -> tuple[np.ndarray, np.ndarray]:
    """(t [s], v [m/s]) of robot id ``robot`` from trace/vehicles.parquet."""
    veh = pq.read_table(run / "trace" / "vehicles.parquet", columns=["t_s", "robot", "v"]).to_pydict()
    rows = np.asarray(veh["robot"]) == robot
    return np.asarray(veh["t_s"])[rows], np.asarray(veh["v"])[rows]


def start(script: Path, *args: object) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(script), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.communicate()[1]
    return proc


@pytest.mark.external  # a udp_multicast route on this host
def test_an_ecu_process_drives_a_robot_along_a_speed_profile_in_lockstep(tmp_path):
    end, period = 5.0, 0.05
    with multicast_on_this_host() as port:
        ecu = start(ECU, "udp_multicast", GROUP, port, 1, period, end, tmp_path / "ecu.json", "lockstep")
        try:
            params = {"interface": "udp_multicast", "channel": GROUP, "bus_options": {"port": port},
                      "period_s": period, "mode": "lockstep", "lockstep_timeout_s": 10}
            result = run_scenario(scenario(end, params, ["robot0"]), tmp_path / "run")
            ecu.communicate(timeout=30)
        finally:
            stop(ecu)
    assert result.ok, result.error
    sent = json.loads((tmp_path / "ecu.json").read_text())
    steps = round(end / period) + 1
    assert len(sent) == steps
    # the state frames counted up, and the ECU's answers are exactly the run's commands, period by period
    assert [s["state_counter"] for s in sent] == [k % 16 for k in range(steps)]
    cmds = pq.read_table(tmp_path / "run" / "trace" / "commands_can.parquet").to_pydict()
    assert set(cmds["robot"]) == {1} and len(cmds["t_ns"]) == steps
    assert cmds["t_ns"] == [round(s["t_s"] * 1e9) for s in sent]
    assert cmds["speed"] == pytest.approx([s["target"] for s in sent], abs=1e-12)
    assert all(np.isnan(cmds["accel"])) and all(np.isnan(cmds["steer"])) and all(np.isnan(cmds["yaw_rate"]))
    # the robot follows: 1.0 m/s, then 1.5 m/s after the step at 2 s (first-order speed loop, tau 0.5 s)
    t, v = speeds(tmp_path / "run", 1)
    assert np.abs(v[(t >= 1.5) & (t < 1.95)] - 1.0).max() < 0.02
    assert np.abs(v[t >= 4.0] - 1.5).max() < 0.02
    assert np.abs(v[t <= 2.0] - 1.0).max() < 0.02  # 1.0 until the step: the new target acts from after 2.0 s
    assert t[v > 1.49].min() > 2.1  # no jump: the command acted through the vehicle's acceleration limit
    # what the ECU read back is the robot's speed (0.01 m/s resolution) at the last period
    assert sent[-1]["speed"] == pytest.approx(v[np.argmin(np.abs(t - end))], abs=0.0051)
    summary = result.run_info["federates"]["can"]
    assert summary["commands"] == steps and summary["ignored"] == {} and summary["lockstep"]["periods"] == steps
    assert summary["tx_frames"] == 2 * 2 * steps  # two robots, two state frames each


@pytest.mark.external  # a udp_multicast route on this host
def test_a_fuzzer_flood_is_counted_by_reason_and_the_run_ends_ok(tmp_path):
    end, period = 4.0, 0.02
    with multicast_on_this_host() as port:
        fuzzer = start(FUZZER, "udp_multicast", GROUP, port, 1, 2, tmp_path / "fuzz.json")
        try:
            params = {"interface": "udp_multicast", "channel": GROUP, "bus_options": {"port": port},
                      "period_s": period}
            result = run_scenario(scenario(end, params, ["robot0"], ("execution={realtime: 1.0}",)), tmp_path / "run")
            _, fuzzer_err = fuzzer.communicate(timeout=30)
        finally:
            stop(fuzzer)
    assert fuzzer.returncode == 0, fuzzer_err
    assert result.ok and result.run_info["status"] == "ok", result.error
    sent = json.loads((tmp_path / "fuzz.json").read_text())
    assert sum(sent["malformed"].values()) == 1000 and sent["finished_before_end"]
    summary = json.loads((tmp_path / "run" / "run.json").read_text())["federates"]["can"]
    assert summary["ignored"] == sent["malformed"]
    assert summary["commands"] == sent["valid"]  # the fuzzer's few valid frames were the only commands
    # the robot was silent otherwise: the timeout rule braked it, nothing invented a command
    events = pq.read_table(tmp_path / "run" / "trace" / "command_events.parquet").to_pydict()
    assert 1 in events["robot"]


def test_the_bus_log_reads_back_with_every_state_frame(tmp_path):
    end, period = 1.0, 0.05
    params = {"interface": "virtual", "channel": f"log-{tmp_path.name}", "period_s": period}
    sc = parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=[
        f"duration_s={end}", "vehicles.count=3", "platoon.size=3", "outputs.plots=false", "outputs.report=false",
        f"federates={json.dumps([{'name': 'bus', 'type': BRIDGE, 'params': params}])}"])
    result = run_scenario(sc, tmp_path / "run")
    assert result.ok, result.error
    frames = list(can.ASCReader(str(tmp_path / "run" / "can" / "bus.asc")))
    steps, robots = round(end / period) + 1, 3
    state = [m for m in frames if not m.is_rx and m.arbitration_id & 0x700 == 0x200]
    steer_gap = [m for m in frames if not m.is_rx and m.arbitration_id & 0x700 == 0x300]
    assert len(state) == len(steer_gap) == steps * robots and len(frames) == 2 * steps * robots
    assert sorted({m.arbitration_id for m in state}) == [0x201, 0x202, 0x203]
    # timestamps are simulation time; the DBC decodes the logged frames to the traced speeds
    assert [m.timestamp for m in state[::robots]] == pytest.approx([k * period for k in range(steps)], abs=1e-6)
    from federates.can import load_dbc

    db = load_dbc()
    last = [m for m in state if m.arbitration_id == 0x202][-1]
    decoded = db.get_message_by_frame_id(last.arbitration_id).decode(last.data)
    t, v = speeds(tmp_path / "run", 2)
    assert decoded["Speed"] == pytest.approx(v[np.argmin(np.abs(t - end))], abs=0.0051)
    assert decoded["Counter"] == (steps - 1) % 16
    gaps = [db.get_message_by_frame_id(m.arbitration_id).decode(m.data, decode_choices=False)["Gap"]
            for m in steer_gap if m.arbitration_id == 0x202]
    assert all(0.5 < g < 5.0 for g in gaps)  # the follower sees its leader ahead
    assert result.run_info["federates"]["bus"]["tx_frames"] == 2 * steps * robots


def test_the_conformance_contract_holds_for_the_bridge_built_from_its_name():
    import importlib

    checks = importlib.import_module("tests.conformance.checks")
    bridge = CanBridge("can")
    try:
        meta = checks.check_federate_meta(bridge)
    finally:
        bridge.finalize()
    assert [spec.name for spec in meta.outputs] == ["commands_can"]


def test_lockstep_without_an_answer_fails_naming_the_robot_and_its_can_id(tmp_path):
    params = {"interface": "virtual", "channel": f"silent-{tmp_path.name}", "period_s": 0.05, "mode": "lockstep",
              "lockstep_timeout_s": 0.3}
    result = run_scenario(scenario(1.0, params, ["robot1"]), tmp_path / "run")
    assert not result.ok
    message = str(result.error)
    assert "robot1" in message and "0x102" in message and "Counter = 0" in message, message


def test_free_mode_applies_the_newest_valid_command_of_a_period_from_a_python_can_script(tmp_path):
    """An in-process ECU on the virtual bus: commands sent before a period are applied at that period."""
    codec = Codec()
    bridge = CanBridge("can", channel=f"free-{tmp_path.name}", period_s=0.1, log="none")
    bridge.setup(SetupContext(seed=1, end_ns=10**9))
    ecu = can.Bus(interface="virtual", channel=f"free-{tmp_path.name}")
    try:
        bridge.spawn([RobotSpec(id=3, name="r3", command_source=CommandSourceSpec("can")),
                      RobotSpec(id=4, name="r4")])
        state = {"id": np.array([3, 4]), "v": np.array([1.0, 2.0]), "a": np.zeros(2), "yaw_rate": np.zeros(2),
                 "steer": np.zeros(2)}
        out = bridge.step(0, {"state": state})["commands_can"]
        assert len(out["robot"]) == 0  # nothing sent yet: no command invented
        got = [ecu.recv(1.0) for _ in range(4)]
        assert sorted(m.arbitration_id for m in got) == [0x203, 0x204, 0x303, 0x304]
        for counter, speed in ((0, 0.7), (1, 0.8)):  # two in one period: the newer wins
            frame_id, data = codec.encode_command(3, counter, speed=speed, steer=0.05)
            ecu.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=False))
        frame_id, data = codec.encode_command(4, 0, speed=9.0)  # r4 is the control federate's
        ecu.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=False))
        # the receiver thread takes them (into the bridge's inbox); the next period applies them
        wait_until(lambda: bridge._inbox.qsize() >= 3, "the receiver thread to take the three frames")
        out = bridge.step(100_000_000, {"state": state})["commands_can"]
        assert out["robot"].tolist() == [3] and out["speed"].tolist() == [0.8]
        assert out["steer"].tolist() == [0.05] and np.isnan(out["accel"]).all()
        summary = bridge.run_summary()
        assert summary["commands"] == 1 and summary["superseded"] == 1 and summary["ignored"] == {"not_driven": 1}
    finally:
        ecu.shutdown()
        bridge.finalize()
