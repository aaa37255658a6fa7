"""The MQTT bridge's cost per step with 4 and 32 robots on a real mosquitto broker (loopback).

    .venv/bin/python bench/bench_mqtt.py
    .venv/bin/python bench/bench_mqtt.py --duration 20 --robots 4 32 --period 0.02

Per fleet size, the platoon scenario (ideal channel) with the bridge at 50 Hz publishing ``state`` and ``cam_rx``
for every robot, while a paho-mqtt client in another process subscribes to everything:

- free mode at QoS 0 and at QoS 1, no robot driven: building the JSON and handing it to the client;
- lock-step with every robot driven by a commander thread in this process (paho-mqtt) that answers each
  ``<prefix>/clock`` with one ``{"speed": 1.0, "t": t}`` per robot: the full round trip through the broker.

The bridge's step is timed call by call (a subclass that wraps ``step``): p50 and p99 per step in milliseconds.
In lock-step the step includes the wait for the commander thread, which competes for the same interpreter.
The broker runs with ``set_tcp_nodelay true``, as docs/bridges.md advises for lock-step.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import paho.mqtt.client as mqtt  # noqa: E402
from bridge_args import bridge_arguments  # noqa: E402  (bench/, the script's own directory)

from federates.mqtt import MqttBridge  # noqa: E402
from orchestrator.runner import run_scenario  # noqa: E402
from orchestrator.scenario import parse_scenario  # noqa: E402
from tests.orchestrator.mqtt_broker import Broker  # noqa: E402

BRIDGE = "bench_mqtt:TimedMqttBridge"  # this file, imported by name (its directory is on sys.path)


class TimedMqttBridge(MqttBridge):
    """The MQTT bridge, timing each ``step``; the percentiles go to run.json with the bridge's counts."""

    def __init__(self, name: str, **params: Any) -> None:
        super().__init__(name, **params)
        self.step_s: list[float] = []

    def step(self, t_ns: int, inputs: Any) -> Any:
        start = time.perf_counter()
        out = super().step(t_ns, inputs)
        self.step_s.append(time.perf_counter() - start)
        return out

    def run_summary(self) -> dict[str, Any]:
        out = super().run_summary()
        steps = np.asarray(self.step_s) * 1e3
        out["step_ms"] = {"p50": float(np.percentile(steps, 50)), "p99": float(np.percentile(steps, 99)),
                          "mean": float(steps.mean()), "steps": len(steps)}
        return out


def scenario(robots: int, duration: float, bridge: dict, drive_all: bool):
    overrides = [f"duration_s={duration}", f"vehicles.count={robots}", f"platoon.size={robots}",
                 "outputs.plots=false", "outputs.report=false", "channel={type: ideal, rate_hz: 10}",
                 f"federates={json.dumps([{'name': 'mqtt', 'type': BRIDGE, 'params': bridge}])}"]
    if drive_all:
        overrides.append(f"drivers={json.dumps([{'federate': 'mqtt', 'robots': 'all'}])}")
    return parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=overrides)


def commander(port: int, robots: int, ready: threading.Event, stop: threading.Event) -> None:
    """Answers every clock with a 1 m/s command per robot, stamped with the clock's time."""
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bench-commander")

    def on_message(c: Any, userdata: Any, message: Any) -> None:
        t = json.loads(message.payload)["t"]
        for i in range(robots):
            c.publish(f"coopsim/robot{i}/cmd", json.dumps({"speed": 1.0, "t": t}), qos=0)

    def on_connect(c: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        c.socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # answers go out at once, no Nagle wait

    client.on_connect, client.on_message = on_connect, on_message
    client.on_subscribe = lambda *args: ready.set()
    client.connect("127.0.0.1", port)
    client.subscribe("coopsim/clock", qos=0)
    client.loop_start()
    stop.wait()
    client.disconnect()
    client.loop_stop()


SUBSCRIBER = """
import sys, paho.mqtt.client as mqtt
c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bench-listener")
c.connect("127.0.0.1", int(sys.argv[1]))
c.subscribe("coopsim/#", qos=1)
c.loop_forever()
"""
"""A listener in another process that takes every message (as a dashboard would)."""


def line(label: str, info: dict) -> str:
    s = info["federates"]["mqtt"]
    ms = s["step_ms"]
    text = (f"{label}: bridge p50 {ms['p50']:.3f} ms, p99 {ms['p99']:.3f} ms, mean {ms['mean']:.3f} ms per step; "
            f"{s['published'] / ms['steps']:.0f} messages/step, unsent {s['unsent']}")
    if "lockstep" in s:
        trip = s["lockstep"]
        text += (f"; round trip p50 {trip['round_trip_p50_s'] * 1e3:.2f} ms, p99 {trip['round_trip_p99_s'] * 1e3:.2f}"
                 f" ms; {s['commands'] / ms['steps']:.0f} commands/step")
    return text


def main() -> None:
    args, steps = bridge_arguments(__doc__)
    print(f"MQTT bridge (mosquitto on loopback), {args.duration:g} s simulated, bridge period {args.period:g} s "
          f"({steps} steps), {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        broker = Broker(Path(tmp) / "broker").start()
        sub = subprocess.Popen([sys.executable, "-c", SUBSCRIBER, str(broker.port)], stdout=subprocess.DEVNULL)
        try:
            time.sleep(0.5)  # the subscriber is in before the first message
            base = {"broker": f"127.0.0.1:{broker.port}", "period_s": args.period, "ports": ["state", "cam_rx"]}
            for n in args.robots:
                run_scenario(scenario(n, 1.0, base, False), Path(tmp) / f"warm{n}")  # compile kernels
                for qos in (0, 1):
                    info = run_scenario(scenario(n, args.duration, {**base, "qos": qos}, False),
                                        Path(tmp) / f"free{n}{qos}").run_info
                    print(line(f"{n:3d} robots, free, QoS {qos}", info))
                ready, stop = threading.Event(), threading.Event()
                thread = threading.Thread(target=commander, args=(broker.port, n, ready, stop), daemon=True)
                thread.start()
                ready.wait(10)
                try:
                    lock = {**base, "mode": "lockstep", "lockstep_timeout_s": 30}
                    result = run_scenario(scenario(n, args.duration, lock, True), Path(tmp) / f"lock{n}")
                finally:
                    stop.set()
                    thread.join(timeout=10)
                if not result.ok:
                    print(f"    lock-step run failed: {result.error}")
                    continue
                print(line(f"{n:3d} robots, lock-step, all driven", result.run_info))
        finally:
            sub.terminate()
            sub.wait(timeout=10)
            broker.stop()


if __name__ == "__main__":
    main()
