"""An in-process double of paho-mqtt's client, with a broker and a commander, for the MQTT bridge.

The bridge and its link layer (``federates.mqtt.link``) run unchanged: the link builds a paho ``Client`` of this
module, which connects at once, and the broker hands every publication to the subscriptions whose filter matches,
in the publishing thread. A commander on the same broker answers each ``<prefix>/clock`` with a command to every
robot whose state it has seen. ``tests/orchestrator/test_mqtt_bridge.py`` runs the bridge with mosquitto.
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from typing import Any

from .module_swap import swapped

COMMAND = {"speed": 1.0, "steering": 0.05}
"""What the commander sends each robot it has seen, every period."""


class _Success:
    """paho's reason code for an accepted connection or a clean disconnect."""

    is_failure = False

    def __str__(self) -> str:
        return "Success"


class _Published:
    """paho's ``MQTTMessageInfo``: handed over at once."""

    rc = 0

    def wait_for_publish(self, timeout: float | None = None) -> None:
        return None


def matches(topic_filter: str, topic: str) -> bool:
    """MQTT topic filter matching (``+`` one level, ``#`` the rest)."""
    wanted, levels = topic_filter.split("/"), topic.split("/")
    for k, level in enumerate(wanted):
        if level == "#":
            return True
        if k >= len(levels) or (level != "+" and level != levels[k]):
            return False
    return len(wanted) == len(levels)


class Broker:
    """Every connected client's subscriptions; ``published`` counts the messages per topic."""

    def __init__(self) -> None:
        self.clients: list[FakeClient] = []
        self.published: dict[str, int] = {}

    def route(self, topic: str, payload: bytes) -> None:
        self.published[topic] = self.published.get(topic, 0) + 1
        for client in list(self.clients):
            if any(matches(f, topic) for f in client.subscriptions):
                client.deliver(topic, payload)


class FakeClient:
    """The calls ``federates.mqtt.link.Link`` makes on ``paho.mqtt.client.Client``."""

    def __init__(self, broker: Broker, *_: Any, client_id: str = "", **__: Any) -> None:
        self.broker, self.client_id = broker, client_id
        self.subscriptions: set[str] = set()
        self.on_connect: Callable[..., None] | None = None
        self.on_disconnect: Callable[..., None] | None = None
        self.on_message: Callable[..., None] | None = None
        self.connect_timeout = 5.0

    def username_pw_set(self, *_: Any) -> None:
        return None

    def tls_set(self, **_: Any) -> None:
        return None

    def tls_insecure_set(self, *_: Any) -> None:
        return None

    def reconnect_delay_set(self, *_: Any) -> None:
        return None

    def socket(self) -> None:
        return None

    def connect(self, host: str, port: int, keepalive: int = 60) -> int:
        if self not in self.broker.clients:
            self.broker.clients.append(self)
        return 0

    connect_async = connect

    def loop_start(self) -> None:
        if self.on_connect is not None:  # paho calls it from its network thread once CONNACK is in
            self.on_connect(self, None, {}, _Success(), None)

    def loop_stop(self) -> None:
        return None

    def subscribe(self, topic: str, qos: int = 0) -> tuple[int, int]:
        self.subscriptions.add(topic)
        return 0, 1

    def publish(self, topic: str, payload: bytes | str, qos: int = 0) -> _Published:
        self.broker.route(topic, payload.encode() if isinstance(payload, str) else bytes(payload))
        return _Published()

    def disconnect(self) -> None:
        if self in self.broker.clients:
            self.broker.clients.remove(self)
            if self.on_disconnect is not None:
                self.on_disconnect(self, None, {}, _Success(), None)

    def deliver(self, topic: str, payload: bytes) -> None:
        if self.on_message is not None:
            self.on_message(self, None, types.SimpleNamespace(topic=topic, payload=payload))


class Commander(FakeClient):
    """A client that commands every robot it has seen a state of, on each clock message of ``prefix``."""

    def __init__(self, broker: Broker, prefix: str) -> None:
        super().__init__(broker, client_id="commander")
        self.prefix = prefix
        self.robots: set[str] = set()
        self.connect("in-process", 0)
        self.subscriptions |= {f"{prefix}/+/state", f"{prefix}/clock"}

    def deliver(self, topic: str, payload: bytes) -> None:
        if topic == f"{self.prefix}/clock":
            for robot in sorted(self.robots):
                self.publish(f"{self.prefix}/{robot}/cmd", json.dumps(COMMAND))
        else:
            self.robots.add(topic.split("/")[-2])


def fake_paho(broker: Broker) -> dict[str, types.ModuleType]:
    """``paho``, ``paho.mqtt`` and ``paho.mqtt.client`` whose ``Client`` connects to ``broker``."""
    client = types.ModuleType("paho.mqtt.client")
    client.Client = lambda *args, **kwargs: FakeClient(broker, *args, **kwargs)  # type: ignore[attr-defined]
    client.CallbackAPIVersion = types.SimpleNamespace(VERSION2=2)  # type: ignore[attr-defined]
    client.MQTTv311 = 4  # type: ignore[attr-defined]
    client.MQTT_ERR_SUCCESS = 0  # type: ignore[attr-defined]
    mqtt = types.ModuleType("paho.mqtt")
    mqtt.client = client  # type: ignore[attr-defined]
    paho = types.ModuleType("paho")
    paho.mqtt = mqtt  # type: ignore[attr-defined]
    return {"paho": paho, "paho.mqtt": mqtt, "paho.mqtt.client": client}


def mqtt_bridge(name: str) -> Any:
    """An MQTT bridge (free mode) on the in-process broker, publishing the state, commanded by the commander."""
    from federates.mqtt.federate import MqttBridge

    broker = Broker()
    Commander(broker, "coopsim")
    modules = fake_paho(broker)

    class DoubledMqttBridge(MqttBridge):
        def setup(self, ctx: Any) -> Any:
            with swapped(modules):  # the link imports paho here and keeps its client
                return super().setup(ctx)

    bridge = DoubledMqttBridge(name, ports=("state",))
    bridge.broker = broker  # type: ignore[attr-defined]
    return bridge
