"""A commanding MQTT client in its own process: answers each ``<prefix>/clock`` of a coopsim run with a speed
command for one robot, along a step profile.

    python mqtt_commander.py PORT ROBOT SWITCH_S V_BEFORE V_AFTER END_S OUT.json [PREFIX]

Prints ``ready`` once subscribed; then for every clock time t publishes ``{"speed": v(t), "t": t}`` (QoS 1) on
``<prefix>/<robot>/cmd``, v(t) = V_BEFORE before SWITCH_S and V_AFTER from then on. Reconnects (and subscribes
again) if the broker goes away. Ends after the clock reaches END_S, writing what it sent to OUT.json. The user name
and password, if any, come from COOPSIM_MQTT_USERNAME / COOPSIM_MQTT_PASSWORD, as for the bridge.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading

import paho.mqtt.client as mqtt


def main() -> None:
    port, robot = int(sys.argv[1]), sys.argv[2]
    switch_s, before, after, end_s = map(float, sys.argv[3:7])
    out, prefix = sys.argv[7], sys.argv[8] if len(sys.argv) > 8 else "coopsim"
    sent: list[dict] = []
    last: list = []
    done, ready = threading.Event(), threading.Event()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"commander-{os.getpid()}")
    if os.environ.get("COOPSIM_MQTT_USERNAME"):
        client.username_pw_set(os.environ["COOPSIM_MQTT_USERNAME"], os.environ.get("COOPSIM_MQTT_PASSWORD"))
    client.reconnect_delay_set(0.1, 0.5)

    def on_connect(c, userdata, flags, reason, properties) -> None:
        c.socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # answers go out at once
        c.subscribe(f"{prefix}/clock", qos=1)

    def on_subscribe(c, userdata, mid, reasons, properties) -> None:
        if not ready.is_set():
            ready.set()
            print("ready", flush=True)

    def on_message(c, userdata, message) -> None:
        t = json.loads(message.payload)["t"]
        speed = before if t < switch_s - 1e-9 else after
        last.append(c.publish(f"{prefix}/{robot}/cmd", json.dumps({"speed": speed, "t": t}), qos=1))
        sent.append({"t": t, "speed": speed})
        if t >= end_s - 1e-9:
            done.set()

    client.on_connect, client.on_subscribe, client.on_message = on_connect, on_subscribe, on_message
    client.connect("127.0.0.1", port)
    client.loop_start()
    finished = done.wait(120)
    if last:
        last[-1].wait_for_publish(10)  # the run waits for its last answer in lock-step
    client.disconnect()
    client.loop_stop()
    with open(out, "w", encoding="utf-8") as f:
        json.dump(sent, f)
    sys.exit(0 if finished else 1)


if __name__ == "__main__":
    main()
