"""An MQTT bridge: the run's robots as JSON messages on a broker, for dashboards, digital twins and other
programs that speak MQTT.

Scenario entry (``type: mqtt``)::

    - name: mqtt
      type: mqtt
      params: {broker: 127.0.0.1:1883, period_s: 0.1, ports: [state], topic_prefix: coopsim, qos: 0}

Every ``period_s`` of simulation time it publishes, per robot and listed port, ``<prefix>/<robot>/<port>`` with
``{"t": seconds, "<field>": value, ...}`` (SI units, as on the port; null where a value is NaN), and then
``<prefix>/clock`` (``{"t": seconds}``), which thus says that everything about that time has been sent.

MQTT has no notion of simulation time, so the bridge only publishes: inputs taken from a broker as they arrive
would make runs depend on wall-clock timing (use the gRPC host or HELICS for that). The run is not slowed down:
messages are handed to the client's own event loop, and ``finalize`` waits until they are sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from orchestrator.core.federate import Federate, FederateMeta, Input, PortData, SetupContext
from orchestrator.core.robots import RobotSpec
from orchestrator.core.timebase import NS_PER_S, seconds_to_ns


class MqttBridge(Federate):
    """Publishes robot ports to an MQTT broker (see the module docstring)."""

    def __init__(self, name: str, broker: str = "127.0.0.1:1883", period_s: float = 0.1,
                 ports: Sequence[str] = ("state",), topic_prefix: str = "coopsim", qos: int = 0,
                 connect_timeout_s: float = 10.0) -> None:
        super().__init__(name)
        if period_s <= 0:
            raise ValueError(f"period_s must be positive, got {period_s}")
        if qos not in (0, 1, 2):
            raise ValueError(f"qos must be 0, 1 or 2, got {qos}")
        host, _, port = broker.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"broker must be 'host:port', got '{broker}'")
        self.host, self.port = host, int(port)
        self.period_ns = seconds_to_ns(period_s)
        self.ports = list(ports)
        self.prefix = topic_prefix.rstrip("/")
        self.qos = qos
        self.connect_timeout_s = connect_timeout_s
        self._names: dict[int, str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None
        self._pending: list[Future] = []

    def setup(self, ctx: SetupContext) -> FederateMeta:
        try:
            import aiomqtt
        except ImportError:
            raise RuntimeError("the MQTT bridge needs aiomqtt: pip install 'coopsim[mqtt]'") from None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"{self.name}-mqtt", daemon=True)
        self._thread.start()
        async def connect() -> None:  # the client belongs to the loop it is made in
            # unique per process and bridge: parallel runs (sweeps) on one broker must not knock each other off
            self._client = aiomqtt.Client(self.host, self.port, identifier=f"coopsim-{self.name}-{os.getpid()}-"
                                                                           f"{id(self):x}")
            await self._client.__aenter__()

        try:
            self._run(connect()).result(timeout=self.connect_timeout_s)
        except Exception as exc:
            self._stop_loop()
            raise RuntimeError(f"cannot connect to the MQTT broker at {self.host}:{self.port}: {exc}") from None
        return FederateMeta(inputs=tuple(Input(port) for port in self.ports), period_ns=self.period_ns)

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        self._names.update({r.id: r.name for r in robots})

    def despawn(self, robot_ids: Sequence[int]) -> None:
        for rid in robot_ids:
            self._names.pop(int(rid), None)

    def step(self, t_ns: int, inputs: Mapping[str, PortData]) -> Mapping[str, PortData]:
        t_s = t_ns / NS_PER_S
        for port in self.ports:
            data = inputs.get(port)
            if data is None or data.get("id") is None:
                continue
            fields = {k: np.asarray(v) for k, v in data.items() if k != "id" and v is not None}
            for row, rid in enumerate(np.asarray(data["id"]).tolist()):
                name = self._names.get(rid)
                if name is not None:
                    payload = {"t": t_s, **{k: _json_value(values[row]) for k, values in fields.items()
                                            if values.shape and len(values) == len(data["id"])}}
                    self._publish(f"{self.prefix}/{name}/{port}", payload)
        self._publish(f"{self.prefix}/clock", {"t": t_s})  # last: everything about t has been sent
        for future in (f for f in self._pending if f.done()):
            if future.exception() is not None:  # reported at the step where it is first seen
                raise RuntimeError(f"publishing to the MQTT broker failed: {future.exception()}")
        self._pending = [f for f in self._pending if not f.done()]
        return {}

    def _publish(self, topic: str, payload: Mapping[str, Any]) -> None:
        message = json.dumps(payload, allow_nan=False)
        self._pending.append(self._run(self._client.publish(topic, message, qos=self.qos)))

    def _run(self, coroutine: Any) -> Future:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def finalize(self) -> None:
        if self._loop is None:
            return
        try:
            for future in self._pending:
                future.result(timeout=self.connect_timeout_s)
            self._run(self._client.__aexit__(None, None, None)).result(timeout=self.connect_timeout_s)
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._loop.close()
            self._loop = None


def _json_value(value: np.generic) -> Any:
    """A JSON value for one array element: NaN and infinities (no data) become null."""
    item = value.item()
    return None if isinstance(item, float) and not np.isfinite(item) else item
