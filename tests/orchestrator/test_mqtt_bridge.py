"""coopsim to MQTT: a real mosquitto broker on loopback (started and stopped by pid) and a subscriber that
checks the messages against the run's trace."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario
from tests.orchestrator.processes import free_port, stop

REPO = Path(__file__).resolve().parents[2]
MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


@pytest.fixture
def broker():
    port = free_port()
    proc = subprocess.Popen([MOSQUITTO, "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield port
    finally:
        stop(proc)


def _subscribe(port: int, end_s: float, ready: threading.Event, got: list) -> None:
    import aiomqtt

    async def listen() -> None:
        async with aiomqtt.Client("127.0.0.1", port, identifier="test-listener") as client:
            await client.subscribe("coopsim/#", qos=1)
            ready.set()
            async with asyncio.timeout(60):
                async for message in client.messages:
                    payload = json.loads(message.payload)
                    got.append((str(message.topic), payload))
                    if str(message.topic) == "coopsim/clock" and payload["t"] >= end_s - 1e-9:
                        return

    asyncio.run(listen())


def test_robots_reach_an_mqtt_subscriber_as_json(tmp_path, broker):
    end = 1.0
    got: list = []
    ready = threading.Event()
    listener = threading.Thread(target=_subscribe, args=(broker, end, ready, got), daemon=True)
    listener.start()
    assert ready.wait(20)
    bridge = {"name": "mqtt", "type": "mqtt",
              "params": {"broker": f"127.0.0.1:{broker}", "period_s": 0.1, "ports": ["state"], "qos": 1}}
    scenario = parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=[
        f"duration_s={end}", "outputs.plots=false", "outputs.report=false", f"federates={json.dumps([bridge])}"])
    result = run_scenario(scenario, tmp_path)
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


def test_no_broker_is_a_clear_error(tmp_path):
    bridge = {"name": "mqtt", "type": "mqtt", "params": {"broker": "127.0.0.1:9", "connect_timeout_s": 2}}
    scenario = parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=[
        "duration_s=1", "outputs.plots=false", "outputs.report=false", f"federates={json.dumps([bridge])}"])
    result = run_scenario(scenario, tmp_path)
    assert not result.ok and result.error.federate == "mqtt"
    assert "cannot connect to the MQTT broker at 127.0.0.1:9" in str(result.error)
