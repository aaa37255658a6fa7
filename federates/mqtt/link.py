"""The bridge's connection to the broker (paho-mqtt's threaded client): log-in and TLS, the first connection
with retries until ``connect_timeout_s``, then reconnection with bounded exponential backoff for the rest of the
run (paho doubles the wait after each failed attempt, from ``reconnect_min_s`` up to ``reconnect_max_s``, and
starts again from the minimum once connected)."""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from .params import ENV_PASSWORD, ENV_USERNAME, Credentials, MqttParams, TlsParams

LOG = logging.getLogger("coopsim.mqtt")

_REFUSED_FOR_GOOD = {"Not authorized", "Bad user name or password", "Client identifier not valid",
                     "Unsupported protocol version", "Banned"}
"""CONNACK reasons that another attempt will not change: set-up fails at once instead of waiting for the timeout."""


class BrokerUnavailableError(RuntimeError):
    """The broker could not be reached at set-up."""


class BrokerRefusedError(BrokerUnavailableError):
    """The broker was reached but refused the bridge (log-in, TLS): a setting to fix, never ridden out."""


class Link:
    """One MQTT client: ``start`` connects (or raises), ``publish`` is callable from any thread, ``close`` drains.

    ``on_message(topic, payload)`` and ``on_connected()`` run in the client's network thread.
    """

    def __init__(self, params: MqttParams, client_id: str, creds: Credentials, tls: TlsParams | None,
                 on_message: Callable[[str, bytes], None], on_connected: Callable[[], None]) -> None:
        import paho.mqtt.client as mqtt

        self.params = params
        self.where = f"{params.host}:{params.port}"
        self._mqtt = mqtt
        self._on_message = on_message
        self._on_connected = on_connected
        self._connected = threading.Event()
        self._refused: str | None = None
        self._last_info: Any = None
        self.connects = 0
        """Successful connections (the first included)."""
        self.disconnects = 0
        """Connections lost while the bridge ran."""
        self.sent = 0
        """Messages handed to the connection."""
        self.unsent = 0
        """Messages not published because the broker was away at that moment."""
        self.disconnected_s = 0.0
        self._down_since: float | None = None
        self._closing = False
        self._closed_unanswered = 0  # connections the broker closed before any CONNACK, at set-up
        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=True,
                             protocol=mqtt.MQTTv311)
        if creds.username is not None:
            client.username_pw_set(creds.username, creds.password)
        if tls is not None:
            client.tls_set(ca_certs=tls.ca_file, certfile=tls.cert_file, keyfile=tls.key_file,
                           cert_reqs=ssl.CERT_REQUIRED, tls_version=ssl.PROTOCOL_TLS_CLIENT)
            client.tls_insecure_set(tls.insecure)
        client.connect_timeout = min(5.0, params.connect_timeout_s)  # per attempt; start() retries until the end
        client.reconnect_delay_set(params.reconnect_min_s, params.reconnect_max_s)  # type: ignore[arg-type]
        client.on_connect = self._connect_cb
        client.on_disconnect = self._disconnect_cb
        client.on_message = self._message_cb
        self.client = client

    @property
    def connected(self) -> bool:
        """Whether the broker accepted the bridge and the connection is up now."""
        return self._connected.is_set()

    # -- callbacks (network thread) ----------------------------------------------------------------------------------
    def _connect_cb(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        if reason.is_failure:
            self._refused = str(reason)
            LOG.warning("MQTT bridge: the broker at %s refused the connection: %s", self.where, reason)
            return
        self.connects += 1
        sock = client.socket()
        if sock is not None:  # no Nagle: small messages go out at once (lock-step round trips, not 40 ms later)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._down_since is not None:
            self.disconnected_s += time.monotonic() - self._down_since
            self._down_since = None
            LOG.warning("MQTT bridge: reconnected to the broker at %s", self.where)
        self._on_connected()  # subscriptions: a clean session has none after a reconnect
        self._connected.set()

    def _disconnect_cb(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        was = self._connected.is_set()
        self._connected.clear()
        if not was and self.connects == 0:
            self._closed_unanswered += 1
        if was and not self._closing:
            self.disconnects += 1
            self._down_since = time.monotonic()
            LOG.warning("MQTT bridge: lost the broker at %s (%s); reconnecting with backoff %g s to %g s",
                        self.where, reason, self.params.reconnect_min_s, self.params.reconnect_max_s)

    def _message_cb(self, client: Any, userdata: Any, message: Any) -> None:
        try:
            self._on_message(message.topic, bytes(message.payload))
        except Exception:  # a bug in handling one message must not stop the network thread, so no more input
            LOG.exception("MQTT bridge: handling a message on %s failed", message.topic)

    # -- set-up ------------------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Connect within ``connect_timeout_s`` (retrying with backoff), then run the network thread; raises
        ``BrokerUnavailableError`` naming host:port and the cause."""
        p = self.params
        deadline = time.monotonic() + p.connect_timeout_s
        delay, cause = p.reconnect_min_s, "no attempt"
        while True:
            try:
                self.client.connect(p.host, p.port, keepalive=p.keepalive_s)
                break
            except ssl.SSLError as exc:  # certificates do not change between attempts
                raise BrokerRefusedError(f"cannot connect to the MQTT broker at {self.where}: TLS: "
                                             f"{exc.reason or exc}") from None
            except (OSError, ValueError) as exc:
                cause = f"{type(exc).__name__}: {exc}"
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrokerUnavailableError(f"cannot connect to the MQTT broker at {self.where} within "
                                             f"connect_timeout_s = {p.connect_timeout_s:g} s ({cause})")
            time.sleep(min(delay, left))
            delay = min(2 * delay, p.reconnect_max_s)
        self.client.loop_start()
        while not self._connected.wait(0.05):
            if self._refused is not None:
                hint = ""
                if self._refused in ("Not authorized", "Bad user name or password"):
                    hint = f" (check {ENV_USERNAME} / {ENV_PASSWORD} or the bridge's 'username')"
                if self._refused in _REFUSED_FOR_GOOD:
                    self.stop()
                    raise BrokerRefusedError(f"the MQTT broker at {self.where} refused the bridge: "
                                                 f"{self._refused}{hint}")
            if time.monotonic() >= deadline:
                self.stop()
                hint = ""
                if self._closed_unanswered:  # e.g. a TLS client certificate missing: TLS 1.3 says so only later
                    hint = (f" (it closed the connection {self._closed_unanswered} time(s) without answering: does "
                            "it require TLS (tls:) or a client certificate (tls.cert_file), or is it no MQTT "
                            "broker?)")
                raise BrokerUnavailableError(f"cannot connect to the MQTT broker at {self.where}: no answer to "
                                             f"CONNECT within connect_timeout_s = {p.connect_timeout_s:g} s{hint}")

    def start_in_background(self) -> None:
        """Keep trying to connect in the network thread (``on_broker_unavailable: continue``)."""
        self._down_since = time.monotonic()
        self._closing = False
        self.client.connect_async(self.params.host, self.params.port, keepalive=self.params.keepalive_s)
        self.client.loop_start()

    # -- use ---------------------------------------------------------------------------------------------------------
    def subscribe(self, topic: str) -> None:
        """Subscribe (network thread, from ``on_connected``)."""
        self.client.subscribe(topic, qos=self.params.qos)

    def publish(self, topic: str, payload: bytes | str) -> None:
        """Publish now if connected; otherwise count it as unsent (nothing is queued for later: stale state is
        of no use to a listener, and the queue would grow without bound while the broker is away)."""
        if not self._connected.is_set():
            self.unsent += 1
            return
        info = self.client.publish(topic, payload, qos=self.params.qos)
        if info.rc != self._mqtt.MQTT_ERR_SUCCESS:
            self.unsent += 1
        else:
            self.sent += 1
            self._last_info = info

    def close(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until the last message is out, then disconnect and stop the thread."""
        info = self._last_info
        if info is not None and self._connected.is_set():
            # the queue is in order: the last one out means all are; a connection lost meanwhile loses them, as
            # while it was away
            with contextlib.suppress(RuntimeError, ValueError):
                info.wait_for_publish(timeout_s)
        self.stop()

    def stop(self) -> None:
        """Disconnect and end the network thread."""
        self._closing = True
        try:
            self.client.disconnect()
        finally:
            self.client.loop_stop()
        if self._down_since is not None:
            self.disconnected_s += time.monotonic() - self._down_since
            self._down_since = None
