"""The MQTT bridge federate: robot ports and received V2X messages out as JSON, commands in from
``<prefix>/<robot>/cmd`` for the robots the scenario gives to it."""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from core.federate import Federate, FederateMeta, Input, PortData, SetupContext
from core.params import parse_params
from core.ports import CAM_RX, command_port, fields_of
from core.robots import RobotSpec
from core.timebase import NS_PER_S, seconds_to_ns

from .commands import BadCommandError, Command, CommandInbox, Tally, parse_command
from .params import MqttParams, credentials, tls_options

LOG = logging.getLogger("coopsim.mqtt")

CAM_PORT = "cam_rx"
_CAM_FIELDS = ("receiver", "sender", "generated_ns", "received_ns", "x", "y", "yaw", "v", "a", "yaw_rate", "u_des")
_RESEND_S = 1.0  # lock-step after a reconnect: how often a waiting period is published again
_DUMPS = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode


class MqttBridge(Federate):
    """Robots on an MQTT broker, both ways (``docs/bridges.md``, MQTT): every ``period_s`` the listed ports per
    robot on ``<prefix>/<robot>/<port>`` and ``<prefix>/clock`` last; commands from ``<prefix>/<robot>/cmd``."""

    Params = MqttParams

    def __init__(self, name: str, broker: str = "127.0.0.1:1883", period_s: float = 0.1,
                 ports: Sequence[str] = ("state", CAM_PORT), topic_prefix: str = "coopsim", qos: int = 0,
                 mode: str = "free", lockstep_timeout_s: float = 10.0, connect_timeout_s: float = 10.0,
                 on_broker_unavailable: str = "fail", reconnect_min_s: float = 0.1, reconnect_max_s: float = 5.0,
                 keepalive_s: int = 10, max_payload_bytes: int = 1024, username: str | None = None,
                 tls: Mapping[str, Any] | None = None) -> None:
        super().__init__(name)
        given = {k: v for k, v in locals().items() if k not in ("self", "name", "__class__")}
        self.params: MqttParams = parse_params(MqttParams, given, "mqtt bridge")
        self.period_ns = seconds_to_ns(self.params.period_s)
        self.lockstep = self.params.mode == "lockstep"
        self.prefix = self.params.topic_prefix
        self.tally = Tally(name)
        self.inbox = CommandInbox(self.lockstep, self.tally)
        self._port = command_port(name).name
        self._link: Any = None
        # read by the network thread: replaced whole, never changed in place
        self._ids: dict[str, int] = {}  # robot name -> id, every live robot
        self._driven: dict[int, str] = {}  # robot id -> its cmd topic, the robots this bridge drives, spawn order
        self._names: dict[int, str] = {}
        self._tls = False
        self.unavailable_at_setup: str | None = None
        self.commands = 0
        """Rows of the command port (commands the run took)."""
        self.ignored = 0
        """Free mode: commands of robots that were gone when a step took them."""
        self.resent = 0
        """Lock-step: times a period was published again because the broker came back while it waited."""
        self._period: list[tuple[str, str]] = []
        self._connects = 0  # the link's connection count when the period was published
        self._resend_at: float | None = None

    # -- set-up ------------------------------------------------------------------------------------------------------
    def setup(self, ctx: SetupContext) -> FederateMeta:
        try:
            import paho.mqtt.client  # noqa: F401 - the client the link uses
        except ImportError:
            raise RuntimeError("the MQTT bridge needs paho-mqtt: pip install 'coopsim[mqtt]'") from None
        from .link import BrokerRefusedError, BrokerUnavailableError, Link

        p = self.params
        tls = tls_options(p)
        self._tls = tls is not None
        self._link = Link(p, f"coopsim-{self.name}-{os.getpid()}-{id(self):x}", credentials(p), tls,
                          self._on_message, self._on_connected)
        try:
            self._link.start()
        except BrokerRefusedError:
            raise
        except BrokerUnavailableError as exc:
            if p.on_broker_unavailable == "fail":
                raise
            self.unavailable_at_setup = str(exc)
            LOG.warning("MQTT bridge '%s': %s; the run goes on without it (on_broker_unavailable: continue), "
                        "trying again in the background", self.name, exc)
            self._link.start_in_background()
        inputs = [Input(port) for port in p.ports if port != CAM_PORT]
        if CAM_PORT in p.ports:
            inputs.append(Input(CAM_PORT, queued=True, fields=fields_of(CAM_RX, _CAM_FIELDS), optional=True))
        return FederateMeta(inputs=tuple(inputs), outputs=(command_port(self.name),), period_ns=self.period_ns)

    def _on_connected(self) -> None:
        self._link.subscribe(f"{self.prefix}/+/cmd")

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        ids, driven, names = dict(self._ids), dict(self._driven), dict(self._names)
        for robot in robots:
            if any(c in robot.name for c in "/+#"):
                raise ValueError(f"robot '{robot.name}': '/', '+' and '#' cannot be in an MQTT topic level; "
                                 "rename it")
            ids[robot.name] = robot.id
            names[robot.id] = robot.name
            if robot.driven_by(self.name):
                driven[robot.id] = f"{self.prefix}/{robot.name}/cmd"
        self._ids, self._driven, self._names = ids, driven, names

    def despawn(self, robot_ids: Sequence[int]) -> None:
        gone = set(map(int, robot_ids))
        self._ids = {n: r for n, r in self._ids.items() if r not in gone}
        self._driven = {r: t for r, t in self._driven.items() if r not in gone}
        self._names = {r: n for r, n in self._names.items() if r not in gone}

    def _on_message(self, topic: str, payload: bytes) -> None:
        """A message on ``<prefix>/+/cmd`` (network thread): checked, then offered to the inbox or counted."""
        name = topic[len(self.prefix) + 1:-len("/cmd")]
        rid = self._ids.get(name)
        if rid is None:
            return self.tally.drop("unknown_robot", topic, payload)
        if rid not in self._driven:
            return self.tally.drop("not_driven", topic, payload)
        try:
            command = parse_command(payload, self.params.max_payload_bytes)
        except BadCommandError as bad:
            return self.tally.drop(bad.reason, topic, payload)
        self.inbox.offer(rid, command, topic, payload)

    # -- stepping ----------------------------------------------------------------------------------------------------
    def step(self, t_ns: int, inputs: Mapping[str, PortData]) -> Mapping[str, PortData]:
        driven = self._driven
        if self.lockstep:
            self.inbox.open_period(t_ns)  # before publishing: a fast answer must find the period open
        self._connects, self._resend_at = self._link.connects, None
        self._publish(t_ns, inputs)
        if self.lockstep:
            commands = self.inbox.wait_period(driven, self.params.lockstep_timeout_s, driven, self._resend)
        else:
            commands = self.inbox.take_free()
            self.ignored += sum(1 for r in commands if r not in driven)
        rows = [r for r in driven if r in commands]  # spawn order: the same table on every rerun
        self.commands += len(rows)
        return {self._port: _command_table(rows, commands)}

    def _publish(self, t_ns: int, inputs: Mapping[str, PortData]) -> None:
        t_s = t_ns / NS_PER_S
        names = self._names
        self._period = []
        publish = self._publish_kept if self.lockstep else self._link.publish

        for port in self.params.ports:
            if port == CAM_PORT:
                self._publish_cams(t_s, inputs.get(CAM_PORT) or (), publish)
                continue
            data = inputs.get(port)
            if data is None or data.get("id") is None:
                continue
            ids = np.asarray(data["id"]).tolist()
            columns = {k: _json_column(v) for k, v in data.items()
                       if k != "id" and v is not None and np.ndim(v) == 1 and len(v) == len(ids)}
            keys = ["t", *columns]
            for row, rid in enumerate(ids):
                name = names.get(rid)
                if name is not None:
                    values = [t_s, *(column[row] for column in columns.values())]
                    publish(f"{self.prefix}/{name}/{port}", _DUMPS(dict(zip(keys, values, strict=True))))
        publish(f"{self.prefix}/clock", _DUMPS({"t": t_s}))  # last: everything about t has been sent

    def _resend(self) -> None:
        """Lock-step, while waiting: once the broker came back since the period was published, publish the period
        again, and every ``_RESEND_S`` until answered (the commander reconnects on its own schedule: what is sent
        before it subscribed again goes nowhere)."""
        link = self._link
        if link.connects == self._connects or not link.connected:
            return
        now = time.monotonic()
        if self._resend_at is not None and now < self._resend_at:
            return
        self._resend_at = now + _RESEND_S
        self.resent += 1
        for topic, payload in self._period:
            link.publish(topic, payload)

    def _publish_kept(self, topic: str, payload: str) -> None:
        """Lock-step: publish, and keep it to send again if the broker comes back while the period waits."""
        self._period.append((topic, payload))
        self._link.publish(topic, payload)

    def _publish_cams(self, t_s: float, tables: Sequence[PortData], publish: Callable[[str, str], None]) -> None:
        """One message per receiving robot: the V2X messages it received since the last period, in order."""
        per_robot: dict[int, list[dict[str, Any]]] = {}
        names = self._names
        for table in tables:
            if len(table["receiver"]) == 0:
                continue
            cols = {k: _json_column(table[k]) for k in _CAM_FIELDS if table.get(k) is not None}
            for i, receiver in enumerate(cols["receiver"]):
                if receiver not in names:
                    continue
                sender = cols["sender"][i]
                per_robot.setdefault(receiver, []).append({
                    "sender": names.get(sender, str(sender)), "sender_id": sender,
                    "generated_t": cols["generated_ns"][i] / NS_PER_S, "received_t": cols["received_ns"][i] / NS_PER_S,
                    **{k: cols[k][i] for k in ("x", "y", "yaw", "v", "a", "yaw_rate", "u_des") if k in cols}})
        for receiver, messages in per_robot.items():
            publish(f"{self.prefix}/{names[receiver]}/{CAM_PORT}", _DUMPS({"t": t_s, "messages": messages}))

    # -- end ---------------------------------------------------------------------------------------------------------
    def run_summary(self) -> dict[str, Any]:
        """Counts for ``run.json``: commands taken, messages ignored by reason, publishing and the connection."""
        link, inbox, malformed = self._link, self.inbox, self.tally.snapshot()
        out: dict[str, Any] = {"mode": self.params.mode, "broker": self.params.broker, "tls": self._tls,
                               "commands": self.commands, "received": inbox.received, "malformed": malformed,
                               "malformed_total": sum(malformed.values()), "ignored": self.ignored}
        if link is not None:
            out["published"], out["unsent"] = link.sent, link.unsent
            out["connection"] = {"available_at_setup": self.unavailable_at_setup is None, "connects": link.connects,
                                 "disconnects": link.disconnects,
                                 "disconnected_s": round(link.disconnected_s, 3)}
            if self.unavailable_at_setup is not None:
                out["connection"]["setup_error"] = self.unavailable_at_setup
        if self.lockstep:
            trips = np.asarray(inbox.round_trips_s)
            out["lockstep"] = {"periods": len(trips), "waits": inbox.waits, "resent": self.resent,
                               "round_trip_p50_s": float(np.percentile(trips, 50)) if len(trips) else None,
                               "round_trip_p99_s": float(np.percentile(trips, 99)) if len(trips) else None}
        else:
            out["superseded"] = inbox.superseded
        return out

    def finalize(self) -> None:
        if self._link is not None:
            self._link.close(self.params.connect_timeout_s)


def _command_table(rows: list[int], commands: Mapping[int, Command]) -> dict[str, np.ndarray]:
    """The command port's rows for ``rows`` (NaN where the payload did not give a field)."""
    return {"robot": np.asarray(rows, np.int64),
            "speed": np.array([commands[r].speed for r in rows], np.float64),
            "accel": np.array([commands[r].accel for r in rows], np.float64),
            "steer": np.array([commands[r].steer for r in rows], np.float64),
            "yaw_rate": np.array([commands[r].yaw_rate for r in rows], np.float64)}


def _json_column(values: Any) -> list[Any]:
    """A column as JSON-ready Python values: NaN and infinities (no data) become null."""
    array = np.asarray(values)
    out = array.tolist()
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        out = [v if math.isfinite(v) else None for v in out]
    return out
