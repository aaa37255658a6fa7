"""A fuzzing MQTT client in its own process: once a coopsim run's bridge publishes its clock, sends 1,000
malformed command payloads of mixed kinds (and a few valid ones) to the bridge's command topics.

    python mqtt_fuzzer.py PORT DRIVEN OTHER OUT.json [PREFIX]

DRIVEN is a robot the bridge drives, OTHER one it does not. Prints ``ready`` once subscribed to the clock. Writes
to OUT.json the count of malformed payloads per reason the bridge should give, the number of valid commands, and
whether it finished (all messages acknowledged by the broker, QoS 1). The kinds are drawn from a seeded stream.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading

import paho.mqtt.client as mqtt

MALFORMED = 1000
VALID = 20


def cases(driven: str, other: str) -> dict[str, list[tuple[str, bytes]]]:
    """Per reason the bridge should give: (robot in the topic, payload) examples."""
    def on(robot: str, *payloads: str | bytes) -> list[tuple[str, bytes]]:
        return [(robot, p if isinstance(p, bytes) else p.encode()) for p in payloads]

    return {
        "too_large": on(driven, json.dumps({"speed": 1.0, "pad": "x" * 2000}), b" " * 1500 + b'{"speed": 1}'),
        "not_json": on(driven, "{speed: 1", b"\xff\xfe\x00", b"", "{'speed': 1.0}", '{"speed": 1.0,}', "1.0.0"),
        "not_object": on(driven, "[1, 2]", "1.5", '"speed"', "null", "true", "NaN"),
        "duplicate_key": on(driven, '{"speed": 1, "speed": 2}', '{"t": 0, "steering": 0.1, "t": 1}'),
        "unknown_key": on(driven, '{"speed": 1, "foo": 2}', '{"velocity": 1}', '{"Speed": 1}'),
        "wrong_type": on(driven, '{"speed": "1.0"}', '{"speed": true}', '{"steering": null}', '{"speed": [1]}',
                         '{"acceleration": {"x": 1}}', '{"speed": 1, "t": "now"}'),
        "not_finite": on(driven, '{"speed": NaN}', '{"acceleration": Infinity}', '{"yaw_rate": -Infinity}',
                         '{"speed": 1e999}', '{"speed": 1, "t": NaN}'),
        "mixed_forms": on(driven, '{"speed": 1, "yaw_rate": 0.1}', '{"acceleration": 0.5, "steering": 0.1}',
                          '{"speed": 1, "acceleration": 0.2, "steering": 0, "yaw_rate": 0}'),
        "nothing_given": on(driven, "{}", '{"t": 1.0}'),
        "out_of_range": on(driven, '{"speed": -1}', '{"speed": 1000}', '{"steering": 3}', '{"yaw_rate": 1e6}',
                           '{"acceleration": -50}', '{"speed": 1' + "0" * 400 + "}", '{"speed": 1, "t": -5}'),
        "unknown_robot": on("nobody", '{"speed": 1}') + on("robot99", "garbage"),
        "not_driven": on(other, '{"speed": 1}', "garbage"),
    }


def main() -> None:
    port, driven, other, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    prefix = sys.argv[5] if len(sys.argv) > 5 else "coopsim"
    rng = random.Random(20261124)  # seeded: the same mix on every run
    kinds = cases(driven, other)
    reasons = sorted(kinds)
    plan = [(reason, rng.choice(kinds[reason])) for reason in (rng.choice(reasons) for _ in range(MALFORMED))]
    plan += [("valid", (driven, json.dumps({"speed": 0.5 + 0.01 * k}).encode())) for k in range(VALID)]
    rng.shuffle(plan)
    clock = threading.Event()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"fuzzer-{os.getpid()}")
    client.on_subscribe = lambda *args: print("ready", flush=True)
    client.on_message = lambda *args: clock.set()
    client.connect("127.0.0.1", port)
    client.subscribe(f"{prefix}/clock", qos=1)
    client.loop_start()
    finished = False
    if clock.wait(120):  # the bridge is connected and subscribed (it subscribes before it publishes)
        infos = [client.publish(f"{prefix}/{robot}/cmd", payload, qos=1) for _, (robot, payload) in plan]
        for info in infos:
            info.wait_for_publish(30)
        finished = all(info.is_published() for info in infos)
    client.disconnect()
    client.loop_stop()
    counts: dict[str, int] = {}
    for reason, _ in plan:
        counts[reason] = counts.get(reason, 0) + 1
    valid = counts.pop("valid", 0)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"malformed": dict(sorted(counts.items())), "valid": valid, "finished": finished}, f)


if __name__ == "__main__":
    main()
