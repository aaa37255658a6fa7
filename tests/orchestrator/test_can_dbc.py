"""``coopsim can-dbc SCENARIO``: a DBC with every robot's frames at their real arbitration ids, so that a stock
DBC tool (cantools without an id mask) decodes the frames a run put on the bus."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import can
import cantools
import pytest

from federates.can import Codec, load_dbc
from orchestrator.runner import run_scenario
from orchestrator.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]

SCENARIO = """
version: 1
name: can_dbc
seed: 1
duration_s: 1.0
step_s: 0.01
vehicles:
  - {name: lead}
  - {name: f-1, id: 7}
  - {name: f.2}
leader: {profile: constant, params: {speed_mps: 1.0}}
federates:
  - {name: bus, type: can, params: {interface: virtual, channel: '%s', period_s: 0.05}}
drivers:
  - {federate: bus, robots: ['f.2'], command_timeout_s: 0.5}
outputs: {plots: false, report: false}
"""


def _coopsim(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "can_dbc.yaml"
    path.write_text(SCENARIO % f"dbc-{tmp_path.name}")
    return path


def test_the_generated_dbc_decodes_every_frame_a_run_sent(scenario: Path, tmp_path: Path):
    done = _coopsim("can-dbc", str(scenario), "-o", str(tmp_path / "bus.dbc"))
    assert done.returncode == 0, done.stderr
    assert "3 robots on 'bus' (1 commanded), 7 messages" in done.stderr
    generated = cantools.database.load_file(str(tmp_path / "bus.dbc"))  # as a stock tool loads it: no mask
    ids = {m.name: m.frame_id for m in generated.messages}
    assert ids == {"VehicleState_lead": 0x201, "VehicleSteerGap_lead": 0x301,
                   "VehicleState_f_1": 0x207, "VehicleSteerGap_f_1": 0x307,
                   "VehicleState_f_2": 0x203, "VehicleSteerGap_f_2": 0x303, "Command_f_2": 0x103}
    assert {m.cycle_time for m in generated.messages} == {50}

    result = run_scenario(load_scenario(scenario), tmp_path / "run")
    assert result.ok, result.error
    frames = [m for m in can.ASCReader(str(tmp_path / "run" / "can" / "bus.asc")) if not m.is_rx]
    assert len(frames) == 2 * 3 * 21  # two frames per robot per period, 21 periods
    masked = load_dbc()  # the shipped DBC, with the id mask the bridge itself uses
    for frame in frames:
        message = generated.get_message_by_frame_id(frame.arbitration_id)
        assert message.senders == ["COOPSIM"]
        assert message.decode(frame.data) == masked.get_message_by_frame_id(frame.arbitration_id).decode(frame.data)
    speeds = [generated.decode_message("VehicleState_f_1", f.data)["Speed"] for f in frames
              if f.arbitration_id == 0x207]
    assert len(speeds) == 21 and all(s == pytest.approx(1.0, abs=0.011) for s in speeds)
    # the shipped file alone (no mask) knows none of these ids: the reason the generated one exists
    shipped = cantools.database.load_file(str(REPO / "federates" / "can" / "coopsim.dbc"))
    with pytest.raises(KeyError):
        shipped.get_message_by_frame_id(frames[0].arbitration_id)


def test_a_command_encoded_with_the_generated_dbc_is_one_the_bridge_takes(scenario: Path, tmp_path: Path):
    done = _coopsim("can-dbc", str(scenario))  # to stdout
    assert done.returncode == 0, done.stderr
    generated = cantools.database.load_string(done.stdout, "dbc")
    command = generated.get_message_by_name("Command_f_2")
    data = bytearray(command.encode({"TargetSpeed": 0.8, "TargetAccel": "NotGiven", "SteeringAngle": 0.05,
                                     "Counter": 3, "Checksum": 0}))
    frame_id, expected = Codec().encode_command(3, 3, speed=0.8, steer=0.05)  # what the bridge's codec makes
    assert command.frame_id == frame_id == 0x103
    assert bytes(data[:7]) == expected[:7]


@pytest.mark.parametrize(("args", "message"), [
    ((str(REPO / "scenarios" / "platoon.yaml"),), "federates: no entry of type 'can' (CAN bridges: none)"),
    (("SCENARIO", "--federate", "other"), "--federate: no CAN bridge named 'other' (CAN bridges: bus)"),
    (("SCENARIO", "--set", "vehicles[1].id=300"), "vehicles: robot 'f-1': station id 300 has no CAN slot (0-255)"),
])
def test_bad_input_is_named_with_exit_code_2(scenario: Path, args: tuple[str, ...], message: str):
    done = _coopsim("can-dbc", *(str(scenario) if a == "SCENARIO" else a for a in args))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stdout == ""
