"""A federate that runs in a ``coopsim host`` elsewhere: the scheduler sees an ordinary Federate.

Every call of the interface becomes one request on a gRPC bidirectional stream and waits for its reply (lock
step), so the remote federate is stepped exactly as an in-process one would be and the traces are the same. A
failure on the far side is raised here with the remote message; the scheduler then stops the run with this
federate's name and the simulation time, as for any federate.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import grpc

from orchestrator.core.federate import Federate, FederateMeta, PortData, SetupContext, meta_from_dict
from orchestrator.core.robots import RobotSpec

from .auth import TLS_CA_ENV, client_tls, token_from_env, token_metadata
from .host import METHOD
from .wire import decode, encode

_END = object()
_HINTS = {
    grpc.StatusCode.CANCELLED: " (a host closes a session whose client is silent for longer than its "
                               "--idle-timeout-s, and every session when it stops)",
    grpc.StatusCode.RESOURCE_EXHAUSTED: " (the host serves --max-sessions federates at once and takes messages up "
                                        "to --max-message-mb)",
}


class RemoteError(RuntimeError):
    """The hosted federate raised, or its host cannot be reached."""

    def __init__(self, message: str, robot: str | None = None) -> None:
        super().__init__(message)
        self.robot = robot


class RemoteFederate(Federate):
    """Proxy of the federate ``type`` (with keyword ``params``) hosted at ``address`` ("host:port")."""

    def __init__(self, name: str, address: str, type: str, params: Mapping[str, Any] | None = None,
                 connect_timeout_s: float = 10.0, call_timeout_s: float = 60.0) -> None:
        super().__init__(name)
        self.address = address
        self.type = type
        self.params = dict(params or {})
        self.connect_timeout_s = connect_timeout_s
        self.call_timeout_s = call_timeout_s
        self._channel: grpc.Channel | None = None
        self._requests: queue.Queue[Any] = queue.Queue()
        self._replies: Iterator[bytes] | None = None

    # -- transport ----------------------------------------------------------------------------------------------
    def _open(self) -> None:
        # identity comes from the environment, never from the scenario (federates.remote.auth)
        try:
            credentials, tls_options = client_tls()
        except RuntimeError as exc:
            raise RemoteError(str(exc)) from None
        options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1), *tls_options]
        if credentials is None:
            self._channel = grpc.insecure_channel(self.address, options=options)
        else:
            self._channel = grpc.secure_channel(self.address, credentials, options=options)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=self.connect_timeout_s)
        except grpc.FutureTimeoutError:
            self._channel.close()
            self._channel = None
            hint = (f" (over TLS with {TLS_CA_ENV}: the host must present a certificate it signs)" if credentials
                    else " (a host started with --tls-cert needs COOPSIM_TLS_CA here)")
            raise RemoteError(f"no coopsim host answers at {self.address} (waited {self.connect_timeout_s:g} s); "
                              f"start one with 'coopsim host --listen ADDRESS'{hint}") from None
        stream = self._channel.stream_stream(METHOD, request_serializer=None, response_deserializer=None)
        self._replies = stream(self._outgoing(), metadata=token_metadata(token_from_env()))
        # replies are read by a thread so that every call can wait with a timeout (a frozen host must not hang
        # the run)
        self._inbox: queue.Queue[Any] = queue.Queue()
        threading.Thread(target=self._read_replies, args=(self._replies, self._inbox), daemon=True,
                         name=f"{self.name}-replies").start()

    @staticmethod
    def _read_replies(replies: Iterator[bytes], inbox: queue.Queue) -> None:
        try:
            for frame in replies:
                inbox.put(frame)
            inbox.put(StopIteration())
        except grpc.RpcError as exc:
            inbox.put(exc)

    def _outgoing(self) -> Iterator[bytes]:
        while (frame := self._requests.get()) is not _END:
            yield frame

    def _call(self, call: str, **fields: Any) -> Any:
        if self._replies is None:
            raise RemoteError(f"'{call}' on a closed connection to {self.address}")
        self._requests.put(encode({"call": call, **fields}))
        try:
            got = self._inbox.get(timeout=self.call_timeout_s)
        except queue.Empty:
            self._close()
            raise RemoteError(f"the host at {self.address} did not answer '{call}' within "
                              f"{self.call_timeout_s:g} s") from None
        if isinstance(got, StopIteration):
            self._close()
            raise RemoteError(f"the host at {self.address} closed the session during '{call}'")
        if isinstance(got, grpc.RpcError):
            self._close()
            code = got.code()
            hint = _HINTS.get(code, "")
            raise RemoteError(f"the host at {self.address} failed during '{call}': {code.name} "
                              f"{got.details()}{hint}")
        reply = decode(got)
        if not reply.get("ok"):
            raise RemoteError(f"remote: {reply.get('error')}", robot=reply.get("robot"))
        return reply.get("result")

    # -- the federate interface ---------------------------------------------------------------------------------
    def setup(self, ctx: SetupContext) -> FederateMeta:
        self._open()
        # the host writes under its own --out-root: out_dir is only a label there, so send just the last part
        label = (Path(ctx.out_dir).name or "run") if ctx.out_dir else None
        meta = self._call("setup", federate={"name": self.name, "type": self.type, "params": self.params},
                          seed=ctx.seed, end_ns=ctx.end_ns, out_dir=label)
        # (a failed setup is finalized by the scheduler, which closes the stream and the channel)
        return meta_from_dict(meta)

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        self._call("spawn", robots=[asdict(robot) for robot in robots])

    def despawn(self, robot_ids: Sequence[int]) -> None:
        self._call("despawn", robot_ids=[int(r) for r in robot_ids])

    def step(self, t_ns: int, inputs: Mapping[str, PortData]) -> Mapping[str, PortData]:
        return self._call("step", t_ns=int(t_ns), inputs=dict(inputs)) or {}

    def next_time(self) -> int | None:
        return self._call("next_time")

    def finalize(self) -> None:
        try:
            if self._replies is not None:
                self._call("finalize")
        finally:
            self._close()

    def _close(self) -> None:
        """End the stream and close the channel (idempotent)."""
        self._requests.put(_END)
        if self._replies is not None:
            self._replies.cancel()
            self._replies = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None
