"""coopsim and MQTT over a real mosquitto broker on loopback (started and stopped by pid): state and received V2X
messages out, checked against the run's trace; a commanding process drives a robot; a fuzzer process floods the
command topics; log-in, TLS, a broker that never comes, and one that dies and comes back mid-run."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario
from orchestrator.scenario.errors import ScenarioError

from .mqtt_broker import Broker, make_certificates
from .processes import free_port, stop

pytestmark = pytest.mark.external  # needs a service or tool beside Python (pyproject.toml's markers; README "Tests")

REPO = Path(__file__).resolve().parents[2]
COMMANDER = REPO / "tests" / "orchestrator" / "mqtt_commander.py"
FUZZER = REPO / "tests" / "orchestrator" / "mqtt_fuzzer.py"


@pytest.fixture
def broker(tmp_path):
    server = Broker(tmp_path / "broker").start()
    try:
        yield server
    finally:
        server.stop()


def scenario(end_s: float, params: dict, robots: list[str] | None = None, extra: tuple[str, ...] = (),
             timeout: dict | None = None):
    """Two robots (robot0 leads at 1.0 m/s, robot1 follows) with the bridge ``mqtt``, driving ``robots``."""
    drivers = [{"federate": "mqtt", "robots": robots, **(timeout or {"command_timeout_s": 0.5})}] if robots else []
    return parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=[
        f"duration_s={end_s}", "vehicles.count=2", "platoon.size=2", "outputs.plots=false", "outputs.report=false",
        "leader={profile: constant, params: {speed_mps: 1.0}}",
        f"federates={json.dumps([{'name': 'mqtt', 'type': 'mqtt', 'params': params}])}",
        f"drivers={json.dumps(drivers)}", *extra])


def speeds(run: Path, robot: int) -> tuple[np.ndarray, np.ndarray]:
    """(t [s], v [m/s]) of robot id ``robot`` from trace/vehicles.parquet."""
    veh = pq.read_table(run / "trace" / "vehicles.parquet", columns=["t_s", "robot", "v"]).to_pydict()
    rows = np.asarray(veh["robot"]) == robot
    return np.asarray(veh["t_s"])[rows], np.asarray(veh["v"])[rows]


def start(script: Path, *args: object, env: dict | None = None) -> subprocess.Popen:
    """A client process; returns once it printed ``ready`` (subscribed)."""
    proc = subprocess.Popen([sys.executable, str(script), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.communicate()[1]
    return proc


def run_with(client: subprocess.Popen, sc, out: Path):
    """Run ``sc`` while ``client`` runs; the client is waited for (30 s), then stopped by pid in any case."""
    try:
        result = run_scenario(sc, out)
        client.communicate(timeout=30)
    finally:
        stop(client)
    return result


def wait_for_clock(port: int, t_s: float, timeout_s: float = 60.0) -> None:
    """Block until the bridge publishes ``coopsim/clock`` with t >= ``t_s`` (a listener of its own)."""
    import paho.mqtt.client as mqtt

    reached = threading.Event()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"clock-watch-{time.monotonic_ns()}")
    client.on_connect = lambda c, *args: c.subscribe("coopsim/clock", qos=0)
    client.on_message = lambda c, u, m: reached.set() if json.loads(m.payload)["t"] >= t_s - 1e-9 else None
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        assert reached.wait(timeout_s), f"the clock did not reach {t_s} s within {timeout_s} s"
    finally:
        client.disconnect()
        client.loop_stop()


# -- state and received messages out ---------------------------------------------------------------------------------
def _subscribe(port: int, end_s: float, ready: threading.Event, got: list) -> None:
    """Collect every ``coopsim/#`` message (QoS 1) until the clock reaches ``end_s``."""
    import paho.mqtt.client as mqtt

    done = threading.Event()

    def on_message(c: Any, userdata: Any, message: Any) -> None:
        payload = json.loads(message.payload)
        got.append((message.topic, payload))
        if message.topic == "coopsim/clock" and payload["t"] >= end_s - 1e-9:
            done.set()

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="test-listener")
    client.on_message = on_message
    client.on_subscribe = lambda *args: ready.set()
    client.connect("127.0.0.1", port)
    client.subscribe("coopsim/#", qos=1)
    client.loop_start()
    try:
        done.wait(60)
    finally:
        client.disconnect()
        client.loop_stop()


def test_robots_and_their_received_cams_reach_an_mqtt_subscriber_as_json(tmp_path, broker):
    end = 1.0
    got: list = []
    ready = threading.Event()
    listener = threading.Thread(target=_subscribe, args=(broker.port, end, ready, got), daemon=True)
    listener.start()
    assert ready.wait(20)
    bridge = {"name": "mqtt", "type": "mqtt",
              "params": {"broker": f"127.0.0.1:{broker.port}", "period_s": 0.1, "ports": ["state", "cam_rx"],
                         "qos": 1}}
    sc = parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=[
        f"duration_s={end}", "outputs.plots=false", "outputs.report=false", f"federates={json.dumps([bridge])}"])
    result = run_scenario(sc, tmp_path)
    assert result.ok, result.error
    listener.join(timeout=30)
    assert not listener.is_alive()
    clocks = [p["t"] for topic, p in got if topic == "coopsim/clock"]
    assert clocks == pytest.approx([0.1 * k for k in range(11)])
    trace = pq.read_table(tmp_path / "trace" / "vehicles.parquet").to_pydict()
    t_s, robot = np.asarray(trace["t_s"]), np.asarray(trace["robot"])
    states = [(topic, p) for topic, p in got if topic.endswith("/state")]
    assert len(states) == 4 * 11 and {t for t, _ in states} == {f"coopsim/robot{i}/state" for i in range(4)}
    for topic, payload in states:
        rid = int(topic.split("/")[1].removeprefix("robot")) + 1
        row = np.flatnonzero((robot == rid) & np.isclose(t_s, payload["t"]))[0]
        for field in ("x", "y", "yaw", "v"):
            assert payload[field] == trace[field][row], (topic, field)  # JSON keeps doubles exactly
    # received CAMs: per robot and period, each reception of the V2X log once, with the sender's state as decoded
    cams = [(topic, p) for topic, p in got if topic.endswith("/cam_rx")]
    assert {t for t, _ in cams} == {f"coopsim/robot{i}/cam_rx" for i in range(1, 4)}  # the leader listens to none
    summary = result.run_info["federates"]["mqtt"]
    assert summary["published"] == 11 + len(states) + len(cams) and summary["unsent"] == 0
    messages = [(int(topic.split("/")[1].removeprefix("robot")) + 1, p["t"], m) for topic, p in cams
                for m in p["messages"]]
    log = pq.read_table(tmp_path / "trace" / "v2x.parquet").to_pydict()
    rx = {(r, s, t) for r, s, t, e, o in zip(log["receiver"], log["sender"], log["t_ns"], log["event"],
                                             log["outcome"], strict=True) if e == "rx" and o == "received"}
    seen = [(receiver, m["sender_id"], round(m["received_t"] * 1e9)) for receiver, _, m in messages]
    assert len(seen) == len(set(seen)) and set(seen) <= rx
    assert {k for k in rx if k[2] < end * 1e9} <= set(seen)  # nothing lost (the last instant may come after)
    for _, t, m in messages:
        assert m["generated_t"] <= m["received_t"] <= t + 1e-9
        assert m["sender"] == f"robot{m['sender_id'] - 1}"
        row = np.flatnonzero((robot == m["sender_id"]) & np.isclose(t_s, m["generated_t"]))
        assert len(row) == 1
        # the ideal channel carries the sender's state with the CAM's resolution (0.01 m/s, 1 cm)
        assert m["v"] == pytest.approx(trace["v"][row[0]], abs=0.006)
        assert m["x"] == pytest.approx(trace["x"][row[0]], abs=0.006)


# -- commands in ------------------------------------------------------------------------------------------------------
def _profile_run(tmp_path: Path, port: int, name: str, params: dict, robots: list[str] | None,
                 extra: tuple[str, ...] = (), end: float = 5.0):
    commander = start(COMMANDER, port, "robot0", 2.0, 1.0, 1.5, end, tmp_path / f"{name}.json")
    base = {"broker": f"127.0.0.1:{port}", "period_s": 0.05, "qos": 1}
    result = run_with(commander, scenario(end, {**base, **params}, robots, extra), tmp_path / name)
    assert commander.returncode == 0
    return result, json.loads((tmp_path / f"{name}.json").read_text())


def test_a_commander_process_drives_a_robot_along_a_speed_profile_in_lockstep(tmp_path, broker):
    params = {"mode": "lockstep", "lockstep_timeout_s": 20}
    result, sent = _profile_run(tmp_path, broker.port, "run", params, ["robot0"])
    assert result.ok, result.error
    steps = round(5.0 / 0.05) + 1
    assert len(sent) == steps
    # every period's answer is exactly one row of the command trace, at the period's time
    cmds = pq.read_table(tmp_path / "run" / "trace" / "commands_mqtt.parquet").to_pydict()
    assert set(cmds["robot"]) == {1} and cmds["t_ns"] == [round(s["t"] * 1e9) for s in sent]
    assert cmds["speed"] == [s["speed"] for s in sent]
    assert all(np.isnan(cmds["accel"])) and all(np.isnan(cmds["steer"])) and all(np.isnan(cmds["yaw_rate"]))
    # the robot follows: 1.0 m/s, then 1.5 m/s after 2 s (first-order speed loop, tau 0.5 s, acceleration limit)
    t, v = speeds(tmp_path / "run", 1)
    assert np.abs(v[(t >= 1.5) & (t <= 2.0)] - 1.0).max() < 0.02
    assert np.abs(v[t >= 4.0] - 1.5).max() < 0.02
    assert t[v > 1.49].min() > 2.1  # it got there through the vehicle's limits, not by a jump
    summary = result.run_info["federates"]["mqtt"]
    assert summary["commands"] == steps and summary["malformed"] == {} and summary["lockstep"]["periods"] == steps
    # lock-step: a rerun is bit-identical
    again, _ = _profile_run(tmp_path, broker.port, "again", params, ["robot0"])
    assert again.ok, again.error
    assert again.run_info["digest"] == result.run_info["digest"]
    t2, v2 = speeds(tmp_path / "again", 1)
    assert np.array_equal(t, t2) and np.array_equal(v, v2)


def test_without_the_driver_assignment_the_commands_are_ignored(tmp_path, broker):
    result, sent = _profile_run(tmp_path, broker.port, "run", {"mode": "lockstep"}, None)
    assert result.ok, result.error
    t, v = speeds(tmp_path / "run", 1)
    assert np.abs(v[t >= 4.0] - 1.0).max() < 0.02  # the leader keeps its own profile: 1.5 m/s never came
    summary = result.run_info["federates"]["mqtt"]
    # nobody waits for answers here, so the last few may come after the run ended
    assert summary["commands"] == 0 and list(summary["malformed"]) == ["not_driven"]
    assert len(sent) / 2 < summary["malformed"]["not_driven"] <= len(sent)


def test_free_mode_under_pacing_follows_the_profile(tmp_path, broker):
    result, sent = _profile_run(tmp_path, broker.port, "run", {}, ["robot0"], ("execution={realtime: 1.0}",))
    assert result.ok, result.error
    t, v = speeds(tmp_path / "run", 1)
    assert np.abs(v[(t >= 1.5) & (t <= 2.0)] - 1.0).max() < 0.05
    assert np.abs(v[t >= 4.0] - 1.5).max() < 0.05
    summary = result.run_info["federates"]["mqtt"]
    assert summary["malformed"] == {} and len(sent) - 1 <= summary["received"] <= len(sent)  # the last may be late
    # each answer was taken at the period after it, or replaced by a newer one first (the last one may come late)
    assert len(sent) - 1 <= summary["commands"] + summary["superseded"] <= len(sent)
    assert summary["commands"] >= 0.5 * len(sent)  # mostly one per period, a loaded machine can bunch some up
    events = pq.read_table(tmp_path / "run" / "trace" / "command_events.parquet").to_pydict()
    assert 1 not in events["robot"]  # it never fell silent


def test_a_fuzzer_flood_is_counted_by_reason_and_the_run_ends_ok(tmp_path, broker):
    fuzzer = start(FUZZER, broker.port, "robot0", "robot1", tmp_path / "fuzz.json")
    params = {"broker": f"127.0.0.1:{broker.port}", "period_s": 0.05, "qos": 1}
    result = run_with(fuzzer, scenario(4.0, params, ["robot0"], ("execution={realtime: 1.0}",)), tmp_path / "run")
    assert fuzzer.returncode == 0
    assert result.ok and result.run_info["status"] == "ok", result.error
    sent = json.loads((tmp_path / "fuzz.json").read_text())
    assert sent["finished"] and sum(sent["malformed"].values()) == 1000 and len(sent["malformed"]) == 12
    summary = json.loads((tmp_path / "run" / "run.json").read_text())["federates"]["mqtt"]
    assert summary["malformed"] == sent["malformed"] and summary["malformed_total"] == 1000
    assert summary["received"] == sent["valid"]  # the fuzzer's few valid commands were the only ones taken
    # the robot was silent otherwise: the timeout rule braked it, nothing invented a command
    events = pq.read_table(tmp_path / "run" / "trace" / "command_events.parquet").to_pydict()
    assert 1 in events["robot"]


# -- log-in and TLS ---------------------------------------------------------------------------------------------------
def _bare(port: int, **params) -> dict:
    return {"broker": f"127.0.0.1:{port}", "period_s": 0.1, "connect_timeout_s": 5, **params}


def test_the_right_password_from_the_environment_logs_in_and_a_wrong_one_is_a_clear_error(tmp_path, monkeypatch):
    server = Broker(tmp_path / "broker", users={"fleet": "s3cret-pw"}).start()
    try:
        monkeypatch.setenv("COOPSIM_MQTT_USERNAME", "fleet")
        monkeypatch.setenv("COOPSIM_MQTT_PASSWORD", "s3cret-pw")
        ok = run_scenario(scenario(0.5, _bare(server.port)), tmp_path / "ok")
        assert ok.ok, ok.error
        summary = ok.run_info["federates"]["mqtt"]
        # 6 periods: the clock, two states and robot1's received CAMs (the leader listens to none)
        assert summary["connection"]["connects"] == 1 and summary["unsent"] == 0 and summary["published"] == 6 * 4
        monkeypatch.setenv("COOPSIM_MQTT_PASSWORD", "wrong")
        started = time.monotonic()
        bad = run_scenario(scenario(0.5, _bare(server.port, connect_timeout_s=120)), tmp_path / "bad")
        assert not bad.ok and bad.error.federate == "mqtt"
        message = str(bad.error)
        assert f"the MQTT broker at 127.0.0.1:{server.port} refused the bridge: Not authorized" in message
        assert "COOPSIM_MQTT_PASSWORD" in message and "wrong" not in message.replace("wrong_", "")
        # refused is final: no waiting out connect_timeout_s (a bound of half of it holds on any loaded machine)
        assert time.monotonic() - started < 60
        monkeypatch.delenv("COOPSIM_MQTT_USERNAME")
        monkeypatch.delenv("COOPSIM_MQTT_PASSWORD")
        anonymous = run_scenario(scenario(0.5, _bare(server.port)), tmp_path / "anonymous")
        assert not anonymous.ok and "refused the bridge: Not authorized" in str(anonymous.error)
    finally:
        server.stop()


def test_a_password_in_the_scenario_is_an_error_naming_the_field():
    text = (REPO / "scenarios" / "platoon.yaml").read_text() + (
        "federates:\n  - {name: mqtt, type: mqtt, params: {username: fleet, password: hunter2}}\n")
    line = text.count("\n")
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text, source="s.yaml")
    message = str(err.value)
    assert f"s.yaml:{line}: federates[0].params.password: a password must not be in the scenario file: set the " \
           "environment variable COOPSIM_MQTT_PASSWORD instead" in message
    assert "hunter2" not in message


def test_tls_with_the_brokers_ca_connects_and_without_it_is_refused(tmp_path, monkeypatch):
    certs = make_certificates(tmp_path / "certs")
    server = Broker(tmp_path / "broker", tls=certs).start()
    try:
        ok = run_scenario(scenario(0.5, _bare(server.port, tls={"ca_file": str(certs["ca"])})), tmp_path / "ok")
        assert ok.ok, ok.error
        summary = ok.run_info["federates"]["mqtt"]
        assert summary["tls"] is True and summary["connection"]["connects"] == 1 and summary["unsent"] == 0
        bad = run_scenario(scenario(0.5, _bare(server.port, tls={})), tmp_path / "bad")  # system CAs only
        assert not bad.ok
        assert f"cannot connect to the MQTT broker at 127.0.0.1:{server.port}: TLS: CERTIFICATE_VERIFY_FAILED" \
               in str(bad.error)
        plain = run_scenario(scenario(0.5, _bare(server.port, connect_timeout_s=2)), tmp_path / "plain")
        assert not plain.ok and f"127.0.0.1:{server.port}" in str(plain.error)  # no TLS to a TLS listener
        monkeypatch.setenv("COOPSIM_MQTT_CA_FILE", str(certs["ca"]))  # the same from the environment
        env = run_scenario(scenario(0.5, _bare(server.port)), tmp_path / "env")
        assert env.ok and env.run_info["federates"]["mqtt"]["tls"] is True, env.error
    finally:
        server.stop()


def test_a_broker_that_requires_client_certificates_takes_the_bridges(tmp_path):
    certs = make_certificates(tmp_path / "certs")
    server = Broker(tmp_path / "broker", tls=certs, require_certificate=True).start()
    try:
        tls = {"ca_file": str(certs["ca"]), "cert_file": str(certs["client_cert"]),
               "key_file": str(certs["client_key"])}
        ok = run_scenario(scenario(0.5, _bare(server.port, tls=tls)), tmp_path / "ok")
        assert ok.ok, ok.error
        assert ok.run_info["federates"]["mqtt"]["connection"]["connects"] == 1
        bare = {"ca_file": str(certs["ca"])}
        refused = run_scenario(scenario(0.5, _bare(server.port, tls=bare, connect_timeout_s=2)), tmp_path / "no")
        assert not refused.ok and f"MQTT broker at 127.0.0.1:{server.port}" in str(refused.error)
        assert "or a client certificate (tls.cert_file)" in str(refused.error)
    finally:
        server.stop()


# -- a broker that never comes, or goes away ---------------------------------------------------------------------------
def test_no_broker_is_a_clear_error_naming_host_and_port(tmp_path):
    port = free_port()
    result = run_scenario(scenario(1.0, _bare(port, connect_timeout_s=1)), tmp_path)
    assert not result.ok and result.error.federate == "mqtt"
    assert f"cannot connect to the MQTT broker at 127.0.0.1:{port} within connect_timeout_s = 1 s" \
           in str(result.error)
    assert "ConnectionRefusedError" in str(result.error)


def test_no_broker_with_continue_runs_without_it_and_says_so(tmp_path):
    port = free_port()
    params = _bare(port, connect_timeout_s=1, on_broker_unavailable="continue")
    result = run_scenario(scenario(2.0, params, ["robot0"]), tmp_path)
    assert result.ok, result.error
    connection = json.loads((tmp_path / "run.json").read_text())["federates"]["mqtt"]["connection"]
    assert connection["available_at_setup"] is False and connection["connects"] == 0
    assert f"127.0.0.1:{port}" in connection["setup_error"]
    t, v = speeds(tmp_path, 1)
    assert v[t >= 1.5].max() < 0.05  # nobody commanded robot0: the timeout rule braked it to a stop


def test_the_bridge_reconnects_after_the_broker_dies_and_comes_back(tmp_path):
    server = Broker(tmp_path / "broker").start()
    end = 8.0
    try:
        commander = start(COMMANDER, server.port, "robot0", 0.0, 1.0, 1.0, end, tmp_path / "sent.json")
        outage: dict[str, float] = {}

        def kill_and_restart() -> None:  # once the run is well under way, however long its set-up took
            wait_for_clock(server.port, 2.5)
            server.kill()
            outage["down"] = time.monotonic()
            time.sleep(2.0)  # the outage's length: what the test does to the run, not a synchronisation
            server.start()
            outage["up"] = time.monotonic()

        chaos = threading.Thread(target=kill_and_restart, daemon=True)
        params = {"broker": f"127.0.0.1:{server.port}", "period_s": 0.05, "qos": 1, "reconnect_max_s": 0.5}
        chaos.start()
        result = run_with(commander, scenario(end, params, ["robot0"], ("execution={realtime: 1.0}",)),
                          tmp_path / "run")
        chaos.join(timeout=30)
    finally:
        server.stop()
    assert result.ok, result.error
    assert "up" in outage
    summary = result.run_info["federates"]["mqtt"]
    connection = summary["connection"]
    assert connection["disconnects"] == 1 and connection["connects"] == 2
    # about the outage as the test timed it: reconnected within the backoff bound (0.5 s) after the broker came
    # back, with room for a loaded machine to notice the loss and the return late (not a bound against a literal)
    outage_s = outage["up"] - outage["down"]
    assert 0.5 * outage_s < connection["disconnected_s"] < outage_s + 10 * params["reconnect_max_s"], (
        connection["disconnected_s"], outage_s)
    assert summary["unsent"] > 0  # nothing was queued up while the broker was away
    # the commander saw the clock again after the restart, up to the end: publishing resumed
    sent = json.loads((tmp_path / "sent.json").read_text())
    ts = [s["t"] for s in sent]
    assert max(ts) == pytest.approx(end) and max(np.diff(ts)) > 1.0  # a gap where the broker was away
    # meanwhile the command timeout braked robot0, and it resumed at 1.0 m/s after
    events = pq.read_table(tmp_path / "run" / "trace" / "command_events.parquet").to_pydict()
    robot_events = [(t, e) for t, r, e in zip(events["t_ns"], events["robot"], events["event"], strict=True)
                    if r == 1]
    assert [e for _, e in robot_events] == ["timeout_brake", "resumed"], robot_events
    t, v = speeds(tmp_path / "run", 1)
    gap_start = ts[int(np.argmax(np.diff(ts)))]
    assert v[(t > gap_start + 1.0) & (t < gap_start + 1.2)].min() < 0.8  # braking in the gap
    assert np.abs(v[t >= end - 0.5] - 1.0).max() < 0.05  # back on command


def test_lockstep_without_an_answer_fails_naming_the_topic(tmp_path, broker):
    params = {"broker": f"127.0.0.1:{broker.port}", "period_s": 0.05, "mode": "lockstep", "lockstep_timeout_s": 0.5}
    result = run_scenario(scenario(1.0, params, ["robot1"]), tmp_path / "run")
    assert not result.ok and result.run_info["status"] == "failed"
    assert 'lock-step: no command with "t": 0.000000000 on coopsim/robot1/cmd within lockstep_timeout_s = 0.5 s' \
           in str(result.error)


def test_the_conformance_contract_holds_for_the_bridge_built_from_its_name(broker):
    import importlib

    from federates import FEDERATE_KINDS

    checks = importlib.import_module("tests.conformance.checks")
    bridge = FEDERATE_KINDS.get("mqtt")("mqtt", broker=f"127.0.0.1:{broker.port}")
    try:
        meta = checks.check_federate_meta(bridge)
    finally:
        bridge.finalize()
    assert [spec.name for spec in meta.outputs] == ["commands_mqtt"]
    assert [(i.port, i.queued) for i in meta.inputs] == [("state", False), ("cam_rx", True)]


def test_lockstep_rides_out_a_broker_restart_and_stays_bit_identical(tmp_path):
    server = Broker(tmp_path / "broker").start()
    params = {"broker": f"127.0.0.1:{server.port}", "period_s": 0.05, "qos": 1, "mode": "lockstep",
              "lockstep_timeout_s": 30, "reconnect_max_s": 0.5}
    try:
        calm, _ = _profile_run(tmp_path, server.port, "calm", params, ["robot0"], end=4.0)
        assert calm.ok, calm.error
        chaos = threading.Thread(target=lambda: (wait_for_clock(server.port, 1.5), server.kill(), time.sleep(1.0),
                                                 server.start()), daemon=True)
        chaos.start()  # paced, so the broker dies mid-run
        stormy, _ = _profile_run(tmp_path, server.port, "stormy", params, ["robot0"],
                                    ("execution={realtime: 1.0}",), end=4.0)
        chaos.join(timeout=30)
    finally:
        server.stop()
    assert stormy.ok, stormy.error
    summary = stormy.run_info["federates"]["mqtt"]
    assert summary["connection"]["disconnects"] == 1
    # a period published while the broker was away could only be answered because it went out again (one sent into
    # the dying connection at QoS 1 the client itself sends again after the reconnect, so that timing needs no resend)
    assert summary["unsent"] == 0 or summary["lockstep"]["resent"] >= 1
    assert summary["commands"] == round(4.0 / 0.05) + 1  # every period got its answer, none was skipped
    assert set(summary["malformed"]) <= {"stale_stamp", "duplicate"}  # answers to resent periods, if any
    assert stormy.run_info["digest"] == calm.run_info["digest"]  # the outage changed nothing but wall time
