"""A federate that runs in a ``coopsim host`` elsewhere: the scheduler sees an ordinary Federate.

Every call of the interface becomes one ``coopsim.federate.v1.Request`` on a gRPC bidirectional stream, or on a
framed-TCP connection for a ``framed://`` address (``federates.remote.framed_client``), and waits for its
``Reply`` (lock step), so the remote federate is stepped exactly as an in-process one would be and the traces are
the same. A failure on the far side is raised here with the remote message; the scheduler then stops
the run with this federate's name and the simulation time, as for any federate.

Speed: the stream lives as long as the federate, and each call is driven in the caller's own thread by the one
asyncio loop of this process's remote federates (``run_until_complete``), so a lock-step call costs one write and
one read on gRPC's completion queue and no hand-over between Python threads. gRPC sets TCP_NODELAY on its
sockets. Port values travel as packed columns where they can (``codec``). What is left is gRPC's own round trip
(``bench/bench_remote.py`` prints it beside a run's figures), which no Python thread of the orchestrator delays:
during a run only the step watchdog (woken every 50 ms) and gRPC's poller run beside the caller.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc

from core import __version__
from core.auth import TLS_CA_ENV, client_tls, token_from_env, token_metadata
from core.federate import Federate, FederateMeta, PortData, SetupContext
from core.robots import RobotSpec

from .codec import PROTOCOL_VERSION, CodecError, decode_outputs, encode_inputs, encode_map, pb
from .descriptions import decode_meta, decode_robot, encode_robot, meta_dict
from .framed_client import FramedTransport, SessionEndedError
from .framing import FRAMED, split_address
from .host import METHOD

_HINTS = {  # by status name, the same for both transports
    "CANCELLED": " (a host closes a session whose client is silent for longer than its --idle-timeout-s, and every "
                 "session when it stops)",
    "RESOURCE_EXHAUSTED": " (the host serves --max-sessions federates at once and takes messages up to "
                          "--max-message-mb)",
}


class RemoteError(RuntimeError):
    """The hosted federate raised, or its host cannot be reached."""

    def __init__(self, message: str, robot: str | None = None) -> None:
        super().__init__(message)
        self.robot = robot


_LOCK = threading.Lock()
_LOOP: asyncio.AbstractEventLoop | None = None


def _loop() -> asyncio.AbstractEventLoop:
    """The one event loop of this process's remote federates. Never closed: gRPC keeps every loop it served and
    may still deliver a late event of a closed call to it, which a closed loop would refuse."""
    global _LOOP
    if _LOOP is None:
        _LOOP = asyncio.new_event_loop()
    return _LOOP


def _run(coroutine: Any, timeout_s: float | None = None) -> Any:
    """Run ``coroutine`` to its end on the shared loop, in the caller's thread (one caller at a time); TimeoutError
    after ``timeout_s``. (A timer that cancels the task costs less per call than ``asyncio.wait_for``.)"""
    with _LOCK:
        loop = _loop()
        task = loop.create_task(coroutine)
        expired: list[bool] = []
        timer = None if timeout_s is None else loop.call_later(timeout_s, lambda: expired.append(task.cancel()))
        try:
            return loop.run_until_complete(task)
        except asyncio.CancelledError:
            if expired:
                raise TimeoutError from None
            raise
        finally:
            if timer is not None:
                timer.cancel()


def build_request(call: str, **fields: Any) -> pb.Request:
    """The request of one interface call from Python values, e.g. ``build_request("step", t_ns=0, inputs={...})``
    (``setup`` takes ``federate={name, type, params}``, ``seed``, ``end_ns``, ``out_dir``: a label or None)."""
    request = pb.Request()
    if call in ("setup", "spawn", "despawn", "step", "next_time", "finalize"):
        getattr(request, call).SetInParent()  # selects the call even when its fields are all defaults
    if call == "setup":
        setup, federate = request.setup, fields["federate"]
        setup.name, setup.type = str(federate["name"]), str(federate["type"])
        encode_map(federate.get("params") or {}, setup.params, "params")
        setup.seed, setup.end_ns = int(fields["seed"]), int(fields["end_ns"])
        if fields.get("out_dir") is not None:
            setup.out_label = str(fields["out_dir"])
    elif call == "spawn":
        for i, robot in enumerate(fields["robots"]):
            encode_robot(robot, request.spawn.robots.add(), f"robots[{i}]")
    elif call == "despawn":
        request.despawn.robot_ids[:] = [int(r) for r in fields["robot_ids"]]
    elif call == "step":
        request.step.t_ns = int(fields["t_ns"])
        encode_inputs(fields["inputs"], request.step)
    elif call not in ("next_time", "finalize"):
        raise ValueError(f"unknown call '{call}'")
    return request


class RemoteFederate(Federate):
    """Proxy of the federate ``type`` (with keyword ``params``) hosted at ``address``: "host:port" (or
    "grpc://host:port") over gRPC, "framed://host:port" over framed TCP."""

    def __init__(self, name: str, address: str, type: str, params: Mapping[str, Any] | None = None,
                 connect_timeout_s: float = 10.0, call_timeout_s: float = 60.0) -> None:
        super().__init__(name)
        self.address = address
        self.type = type
        self.params = dict(params or {})
        self.connect_timeout_s = connect_timeout_s
        self.call_timeout_s = call_timeout_s
        self._channel: grpc.aio.Channel | None = None
        self._stream: Any = None
        self._framed: FramedTransport | None = None  # in place of the gRPC stream for a framed:// address
        self._hello_due = True
        self._ctx: SetupContext | None = None
        self.welcome: pb.Welcome | None = None

    # -- transport ----------------------------------------------------------------------------------------------
    def _open(self) -> None:
        try:
            transport, target = split_address(self.address)
        except ValueError as exc:
            raise RemoteError(f"remote address: {exc}") from None
        self._hello_due = True
        if transport == FRAMED:
            self._open_framed(target)
            return
        # identity comes from the environment, never from the scenario (core.auth)
        try:
            credentials, tls_options = client_tls()
        except RuntimeError as exc:
            raise RemoteError(str(exc)) from None
        try:
            _run(self._connect(target, credentials, tls_options))
        except TimeoutError:
            self._close()
            hint = (f" (over TLS with {TLS_CA_ENV}: the host must present a certificate it signs)" if credentials
                    else " (a host started with --tls-cert needs COOPSIM_TLS_CA here)")
            raise RemoteError(f"no coopsim host answers at {self.address} (waited {self.connect_timeout_s:g} s); "
                              f"start one with 'coopsim host --listen ADDRESS'{hint}") from None

    def _open_framed(self, target: str) -> None:
        framed = FramedTransport(target, self.connect_timeout_s, self.call_timeout_s)
        try:
            framed.open()
        except TimeoutError as exc:
            raise RemoteError(f"no coopsim host answers at {self.address} (waited {self.connect_timeout_s:g} s: "
                              f"{exc}); start one with 'coopsim host --framed-listen ADDRESS'") from None
        except RuntimeError as exc:  # TLS: the CA cannot be read, or the host's certificate is not trusted
            raise RemoteError(f"the host at {self.address}: {exc}") from None
        self._framed = framed

    async def _connect(self, target: str, credentials: grpc.ChannelCredentials | None, tls_options: list) -> None:
        options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1), *tls_options]
        if credentials is None:
            self._channel = grpc.aio.insecure_channel(target, options=options)
        else:
            self._channel = grpc.aio.secure_channel(target, credentials, options=options)
        await asyncio.wait_for(self._channel.channel_ready(), self.connect_timeout_s)
        method = self._channel.stream_stream(METHOD, request_serializer=pb.Request.SerializeToString,
                                             response_deserializer=pb.Reply.FromString)
        self._stream = method(metadata=token_metadata(token_from_env()))

    async def _status_of_a_silent_call(self, code: str, details: str) -> tuple[str, str]:
        """Why the host ended the first call. A write that crossed the host's refusal (a wrong token) can turn
        its status into INTERNAL; a second call that writes nothing gets the refusal itself. Unchanged when that
        call is not refused within a few seconds."""
        if self._channel is None:
            return code, details
        method = self._channel.stream_stream(METHOD, request_serializer=pb.Request.SerializeToString,
                                             response_deserializer=pb.Reply.FromString)
        probe = method(metadata=token_metadata(token_from_env()))
        try:
            await asyncio.wait_for(probe.read(), min(self.call_timeout_s, 5.0))
        except grpc.RpcError as exc:
            return exc.code().name, exc.details()
        except TimeoutError:
            pass
        finally:
            probe.cancel()
        return code, details

    async def _exchange(self, request: pb.Request) -> pb.Reply | object:
        try:
            await self._stream.write(request)
            return await self._stream.read()
        except grpc.RpcError as exc:
            raise SessionEndedError(exc.code().name, exc.details()) from exc
        except asyncio.InvalidStateError:  # written after the host ended the call: its status says why
            raise SessionEndedError((await self._stream.code()).name, await self._stream.details()) from None

    def _one(self, call: str, request: pb.Request) -> pb.Reply:
        """Send ``request`` and wait up to ``call_timeout_s`` for its reply."""
        if self._stream is None and self._framed is None:
            raise RemoteError(f"'{call}' on a closed connection to {self.address}")
        try:
            if self._framed is not None:  # in the caller's thread, its socket bounded by call_timeout_s
                reply = self._framed.exchange(request)
            else:
                reply = _run(self._exchange(request), self.call_timeout_s)
        except TimeoutError:
            self._close()
            raise RemoteError(f"the host at {self.address} did not answer '{call}' within "
                              f"{self.call_timeout_s:g} s") from None
        except SessionEndedError as ended:
            code, details = ended.args
            if code == "INTERNAL" and self._hello_due and self._framed is None:
                code, details = _run(self._status_of_a_silent_call(code, details))
            self._close()
            raise RemoteError(f"the host at {self.address} failed during '{call}': {code} "
                              f"{details}{_HINTS.get(code, '')}") from None
        if reply is None or reply is grpc.aio.EOF:
            self._close()
            raise RemoteError(f"the host at {self.address} closed the session during '{call}'")
        self._raise_error(reply)
        return reply

    def _round_trip(self, call: str, request: pb.Request) -> pb.Reply:
        """The reply to ``request``, after the Hello on the first call (a refusal of the session then names the
        call that opened it); spawn requests that come with it are handed to the scheduler."""
        if self._hello_due:
            # not pipelined with the call: a write racing the host's refusal (a wrong token) could mask its status
            hello = pb.Request()
            hello.hello.protocol_version = PROTOCOL_VERSION
            hello.hello.capabilities.append("spawn_requests")
            hello.hello.client = f"coopsim {__version__}"
            self.welcome = self._one(call, hello).welcome
            self._hello_due = False
        reply = self._one(call, request)
        self._apply_requests(reply)
        return reply

    @staticmethod
    def _raise_error(reply: pb.Reply) -> None:
        if reply.HasField("error"):
            error = reply.error
            raise RemoteError(f"remote: {error.type}: {error.message}",
                              robot=error.robot if error.HasField("robot") else None)

    def _apply_requests(self, reply: pb.Reply) -> None:
        """Spawns and despawns the hosted federate asked for during the call, handed to the scheduler as an
        in-process federate's would be."""
        if not reply.requests:
            return
        if self._ctx is None or self._ctx.scheduler is None:
            raise RemoteError("the hosted federate asked for spawns outside a run")
        for item in reply.requests:
            if item.HasField("spawn"):
                self._ctx.request_spawn(decode_robot(item.spawn.robot), item.spawn.at_ns)
            elif item.HasField("despawn"):
                self._ctx.request_despawn(item.despawn.robot_id, item.despawn.at_ns)

    def _call(self, call: str, **fields: Any) -> Any:
        """One interface call from Python values to Python values (``setup`` answers the meta as plain data)."""
        try:
            request = build_request(call, **fields)
        except CodecError as exc:
            raise RemoteError(f"'{call}' cannot be sent: {exc}") from None
        reply = self._round_trip(call, request)
        try:
            if call == "setup":
                return meta_dict(reply.meta)
            if call == "step":
                return decode_outputs(reply.outputs)
            if call == "next_time":
                return reply.next_time.t_ns if reply.next_time.HasField("t_ns") else None
        except CodecError as exc:
            raise RemoteError(f"the reply to '{call}' cannot be read: {exc}") from None
        return None

    # -- the federate interface ---------------------------------------------------------------------------------
    def setup(self, ctx: SetupContext) -> FederateMeta:
        self._ctx = ctx
        self._open()
        # the host writes under its own --out-root: out_dir is only a label there, so send just the last part
        label = (Path(ctx.out_dir).name or "run") if ctx.out_dir else None
        request = build_request("setup", federate={"name": self.name, "type": self.type, "params": self.params},
                                seed=ctx.seed, end_ns=ctx.end_ns, out_dir=label)
        # (a failed setup is finalized by the scheduler, which closes the stream and the channel)
        try:
            return decode_meta(self._round_trip("setup", request).meta)
        except CodecError as exc:
            raise RemoteError(f"the reply to 'setup' cannot be read: {exc}") from None

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        self._call("spawn", robots=robots)

    def despawn(self, robot_ids: Sequence[int]) -> None:
        self._call("despawn", robot_ids=robot_ids)

    def step(self, t_ns: int, inputs: Mapping[str, PortData]) -> Mapping[str, PortData]:
        return self._call("step", t_ns=t_ns, inputs=inputs)

    def next_time(self) -> int | None:
        return self._call("next_time")

    def finalize(self) -> None:
        try:
            if self._stream is not None or self._framed is not None:
                self._call("finalize")
        finally:
            self._close()

    def _close(self) -> None:
        """End the stream and close the channel, or the framed connection (idempotent)."""
        framed, self._framed = self._framed, None
        if framed is not None:
            framed.close()
        stream, self._stream = self._stream, None
        channel, self._channel = self._channel, None
        if stream is not None:
            stream.cancel()
        # a call still running in another thread holds the loop: then the channel goes with the process
        if channel is not None and _LOCK.acquire(timeout=1.0):
            try:
                _loop().run_until_complete(channel.close())
            finally:
                _LOCK.release()
