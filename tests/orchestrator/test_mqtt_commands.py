"""The MQTT bridge's command payloads, lock-step inbox and parameters, without a broker: what is taken, what is
dropped and why, and the errors that name the field."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import pytest

from federates.mqtt import REASONS, BadCommandError, LockstepTimeoutError, MqttBridge, parse_command
from federates.mqtt.commands import CommandInbox, Tally
from federates.mqtt.params import MqttParams, credentials, tls_options
from orchestrator.scenario import parse_scenario
from orchestrator.scenario.errors import ScenarioError
from tests.waiting import wait_until

from .mqtt_fuzzer import cases

REPO = Path(__file__).resolve().parents[2]


def test_both_forms_become_command_port_fields_with_nan_where_not_given():
    c = parse_command(b'{"speed": 1.25, "steering": -0.1, "t": 0.05}', 1024)
    assert (c.speed, c.steer, c.t_ns) == (1.25, -0.1, 50_000_000)
    assert math.isnan(c.accel) and math.isnan(c.yaw_rate)
    c = parse_command(b'{"acceleration": -2, "yaw_rate": 0.3}', 1024)
    assert (c.accel, c.yaw_rate, c.t_ns) == (-2.0, 0.3, None)
    assert math.isnan(c.speed) and math.isnan(c.steer)
    c = parse_command(b'{"speed": 0}', 1024)  # one field of a form: the physics completes the other
    assert c.speed == 0.0 and math.isnan(c.steer)
    assert parse_command(b'{"t": 1e-9, "speed": 100}', 1024).t_ns == 1  # the stamp is kept to the nanosecond


@pytest.mark.parametrize("reason", [r for r in REASONS if r not in
                                    ("unknown_robot", "not_driven", "no_stamp", "stale_stamp", "future_stamp",
                                     "duplicate")])
def test_every_payload_of_the_fuzzer_gets_its_reason(reason):
    for _, payload in cases("robot0", "robot1")[reason]:
        with pytest.raises(BadCommandError) as bad:
            parse_command(payload, 1024)
        assert bad.value.reason == reason, payload


def test_the_size_limit_is_the_parameter():
    payload = json.dumps({"speed": 1.0, "t": 0.0}).encode()
    assert parse_command(payload, len(payload)).speed == 1.0
    with pytest.raises(BadCommandError, match="too_large"):
        parse_command(payload, len(payload) - 1)


def _inbox() -> CommandInbox:
    return CommandInbox(lockstep=True, tally=Tally("mqtt"))


def _cmd(t: float | None, speed: float = 1.0):
    return parse_command(json.dumps({"speed": speed, **({} if t is None else {"t": t})}).encode(), 1024)


def test_lockstep_takes_the_first_answer_stamped_with_the_period_and_counts_the_rest():
    inbox = _inbox()
    inbox.open_period(500_000_000)
    for t, speed in ((0.45, 9.0), (0.55, 9.0), (None, 9.0), (0.5, 1.1), (0.5, 9.0)):
        inbox.offer(1, _cmd(t, speed), "coopsim/robot0/cmd", b"")
    got = inbox.wait_period([1], 1.0, {1: "coopsim/robot0/cmd"})
    assert got[1].speed == 1.1 and inbox.received == 1
    assert inbox.tally.snapshot() == {"duplicate": 1, "future_stamp": 1, "no_stamp": 1, "stale_stamp": 1}


def test_lockstep_waits_for_a_late_answer_and_times_out_naming_the_topic():
    inbox = _inbox()
    inbox.open_period(0)
    # the answer comes once the period waits for it (an event, not a delay); the wait ends with it, well before
    # its timeout (which would raise)
    late = threading.Thread(target=lambda: (wait_until(lambda: inbox.waits == 1, "the period to wait"),
                                            inbox.offer(2, _cmd(0.0, 0.7), "coopsim/robot1/cmd", b"")))
    late.start()
    assert inbox.wait_period([2], 60.0, {2: "coopsim/robot1/cmd"})[2].speed == 0.7
    late.join()
    assert inbox.waits == 1
    inbox.open_period(1_250_000_000)
    with pytest.raises(LockstepTimeoutError, match=r'no command with "t": 1\.250000000 on coopsim/robot0/cmd, '
                                                   r"coopsim/robot1/cmd within lockstep_timeout_s = 0\.2 s"):
        inbox.wait_period([1, 2], 0.2, {1: "coopsim/robot0/cmd", 2: "coopsim/robot1/cmd"})


def test_free_mode_keeps_the_newest_per_robot():
    inbox = CommandInbox(lockstep=False, tally=Tally("mqtt"))
    for speed in (0.5, 0.6, 0.7):
        inbox.offer(1, _cmd(None, speed), "t", b"")
    assert inbox.take_free()[1].speed == 0.7 and inbox.superseded == 2 and inbox.take_free() == {}


BASE = (REPO / "scenarios" / "platoon.yaml").read_text()


@pytest.mark.parametrize(("params", "expected"), [
    ("{broker: localhost}", "federates[0].params.broker: must be 'host:port' with a port in 1-65535, got 'localhost'"),
    ("{mode: sync}", "federates[0].params.mode: Input should be 'free' or 'lockstep'"),
    ("{qos: 3}", "federates[0].params.qos: Input should be less than or equal to 2"),
    ("{topic_prefix: 'a/+/b'}", "federates[0].params.topic_prefix: must be topic levels without wildcards"),
    ("{ports: [state, state]}", "federates[0].params.ports: lists a port twice"),
    ("{tls: {ca_file: /nonexistent/ca.pem}}", "federates[0].params.tls.ca_file: no such file: '/nonexistent/ca.pem'"),
    ("{tls: {verify: false}}", "federates[0].params.tls.verify: unknown field 'verify'"),
    ("{reconnect_min_s: 10, reconnect_max_s: 1}", "federates[0].params.reconnect_min_s: must not exceed "
                                                  "reconnect_max_s (1), got 10"),
    ("{on_broker_unavailable: ignore}", "federates[0].params.on_broker_unavailable: Input should be 'fail' or "
                                        "'continue'"),
    ("{pass: x}", "federates[0].params.pass: a password must not be in the scenario file"),
])
def test_parameter_errors_name_the_field_at_its_line(params, expected):
    text = BASE + f"federates:\n  - {{name: mqtt, type: mqtt, params: {params}}}\n"
    line = text.count("\n")
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text, source="s.yaml")
    assert f"s.yaml:{line}: {expected}" in str(err.value)


def test_the_constructor_checks_its_keyword_arguments_too():
    with pytest.raises(ValueError, match=r"mqtt bridge: period_s: Input should be greater than 0 \(got 0\)"):
        MqttBridge("mqtt", period_s=0)
    assert MqttBridge("mqtt", topic_prefix="/fleet/a/").prefix == "fleet/a"


def test_credentials_come_from_the_environment_and_the_password_only_from_there():
    params = MqttParams()
    assert credentials(params, {}).username is None
    creds = credentials(params, {"COOPSIM_MQTT_USERNAME": "fleet", "COOPSIM_MQTT_PASSWORD": "pw"})
    assert (creds.username, creds.password) == ("fleet", "pw") and "pw" not in repr(creds)
    assert credentials(MqttParams(username="ops"), {"COOPSIM_MQTT_USERNAME": "fleet"}).username == "ops"
    with pytest.raises(ValueError, match="COOPSIM_MQTT_PASSWORD is set but no user name"):
        credentials(params, {"COOPSIM_MQTT_PASSWORD": "pw"})


def test_tls_options_from_the_environment_are_completed_by_the_scenario(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("not checked here")
    assert tls_options(MqttParams(), {}) is None
    assert tls_options(MqttParams(tls={}), {}).ca_file is None  # TLS with the system's CAs
    tls = tls_options(MqttParams(tls={"insecure": True}), {"COOPSIM_MQTT_CA_FILE": str(ca)})
    assert tls.ca_file == str(ca) and tls.insecure
    with pytest.raises(ValueError, match=r"COOPSIM_MQTT_CA_FILE.*ca_file: Value error, no such file"):
        tls_options(MqttParams(), {"COOPSIM_MQTT_CA_FILE": str(tmp_path / "missing.pem")})


def test_a_robot_name_that_cannot_be_a_topic_level_is_an_error_naming_it():
    from core.robot_blocks import CommandSourceSpec
    from core.robots import RobotSpec

    bridge = MqttBridge("mqtt")
    bridge.spawn([RobotSpec(id=1, name="robot0", command_source=CommandSourceSpec("mqtt")),
                  RobotSpec(id=2, name="robot1", command_source=CommandSourceSpec("ros"))])
    assert bridge._driven == {1: "coopsim/robot0/cmd"}  # only its own robots listen to commands
    with pytest.raises(ValueError, match=r"robot 'a/b': '/', '\+' and '#' cannot be in an MQTT topic level"):
        bridge.spawn([RobotSpec(id=3, name="a/b")])
