"""A gRPC server that hosts federates for an orchestrator in another process or on another machine.

It serves ``coopsim.federate.v1.FederateHost`` (``federates/remote/proto/coopsim_federate_v1.proto``). Each
``Session`` stream is one federate: after an optional ``hello``, the ``setup`` request names its type (a federate
kind or a ``package.module:Class`` path), its name and keyword parameters; the host builds it and then answers
``spawn``, ``despawn``, ``step``, ``next_time`` and ``finalize`` in lock step, one reply per request, until the
stream ends. A federate's exception travels back as the reply's ``error`` and the session stays usable for
``finalize``. Spawns and despawns the federate asks for during a call travel back with that call's reply.

Run: ``coopsim host --listen 127.0.0.1:50051 --allow mypkg`` (or ``python -m federates.remote.host_command``; with
``--framed-listen HOST:PORT``, over framed TCP too). What a client may ask for is bounded (``docs/remote.md``):

- kinds: ``physics``, ``v2x`` and ``control``, plus what ``--allow`` names; every class is checked to be a
  Federate before anything is called (``federates.remote.policy``);
- files and addresses in parameters: only inside ``--allow-path`` directories and to ``--allow-broker``
  addresses;
- outputs: only under the host's own ``--out-root`` (default: a temporary directory per session); the client's
  ``out_dir`` is a label, never a path;
- size and time: frames up to ``--max-message-mb``, sessions closed after ``--idle-timeout-s`` of silence, at most
  ``--max-sessions`` at once;
- identity: ``COOPSIM_TOKEN`` (required beyond loopback) and optional TLS (``core.auth``).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent import futures
from pathlib import Path, PurePosixPath
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from core.auth import TokenInterceptor, require_token_beyond_loopback, server_credentials
from core.federate import Federate, SetupContext
from core.robots import robot_from_fields

from .codec import (
    PROTOCOL_VERSION,
    CodecError,
    decode_inputs,
    decode_map,
    encode_outputs,
    pb,
)
from .descriptions import decode_robot_fields, encode_meta
from .policy import HostPolicy
from .spawn_requests import SpawnRequests

SERVICE = "coopsim.federate.v1.FederateHost"
METHOD = f"/{SERVICE}/Session"
MIB = 1024 * 1024
SHUTDOWN_GRACE_S = 0.3
"""On SIGTERM, how long sessions get to finish their call and finalize; the process ends well within 1 s."""


def session_label(out_dir: Any, name: Any) -> str:
    """A directory name made from the client's ``out_dir`` (its last component only) and the federate's name:
    letters, digits, ``_.-``, never a path."""
    last = PurePosixPath(str(out_dir).replace("\\", "/")).name
    label = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{last}-{name}").strip("._-")[:48]
    return label or "session"


class _Host:
    """What all sessions of one server share: the policy, the limits, the live sessions and their directories."""

    def __init__(self, policy: HostPolicy, out_root: Path | None, max_message_bytes: int,
                 idle_timeout_s: float) -> None:
        self.policy = policy
        self.out_root = out_root
        self.max_message_bytes = max_message_bytes
        self.idle_timeout_s = idle_timeout_s
        self.sessions: set[_Session] = set()
        self.lock = threading.Lock()
        self.stopped = threading.Event()

    def session_dir(self, out_dir: Any, name: Any) -> tuple[Path, bool]:
        """A fresh directory for one session and whether it is removed when the session ends."""
        label = session_label(out_dir, name)
        if self.out_root is not None:  # mkdtemp with a sanitised prefix: always a new directory right under it
            return Path(tempfile.mkdtemp(prefix=f"{label}-", dir=self.out_root)), False
        return Path(tempfile.mkdtemp(prefix=f"coopsim-host-{label}-")), True

    def watch_idle(self) -> None:
        """Close sessions whose client has sent nothing for ``idle_timeout_s`` (runs in a daemon thread)."""
        interval = min(0.5, self.idle_timeout_s / 4)
        while not self.stopped.wait(interval):
            now = time.monotonic()
            with self.lock:
                idle = [s for s in self.sessions if not s.idle_closed and s.waiting_since is not None
                        and now - s.waiting_since > self.idle_timeout_s]
            for session in idle:
                session.idle_closed = True
                print(f"coopsim host: closing a session idle for {self.idle_timeout_s:g} s", file=sys.stderr,
                      flush=True)
                session.context.cancel()

    def remove_session_dirs(self) -> None:
        """Remove the temporary directories of the sessions still open (at shutdown)."""
        with self.lock:
            sessions = list(self.sessions)
        for session in sessions:
            session.remove_dir()


class _Session:
    """One hosted federate and the dispatch of its calls."""

    def __init__(self, host: _Host, context: grpc.ServicerContext) -> None:
        self.host = host
        self.context = context
        self.federate: Federate | None = None
        self.finalized = False
        self.out_dir: Path | None = None
        self.remove_out_dir = False
        self.waiting_since: float | None = time.monotonic()  # None while a call is being answered
        self.idle_closed = False
        self.requests = SpawnRequests()
        self.copy_inputs = True

    def handle(self, request: pb.Request) -> pb.Reply:
        """Answer one request; a failure becomes an error reply and the session stays usable for finalize."""
        reply = pb.Reply()
        call = request.WhichOneof("call")
        try:
            if call == "step" and self.federate is not None:  # the call of every instant: tested first
                outputs = self.federate.step(request.step.t_ns, decode_inputs(request.step, self.copy_inputs))
                encode_outputs(dict(outputs or {}), reply.outputs)
            elif call == "hello":
                self._hello(request.hello, reply.welcome)
            elif call == "setup":
                self._setup(request.setup, reply.meta)
            elif self.federate is None:
                raise RuntimeError(f"'{call}' before 'setup'")
            elif call == "spawn":
                fields = [decode_robot_fields(robot) for robot in request.spawn.robots]
                for i, robot in enumerate(fields):  # before anything is resolved from them
                    self.host.policy.check_values(robot["config"], f"robots[{i}].config.")
                self.federate.spawn([robot_from_fields(robot) for robot in fields])
                reply.done.SetInParent()
            elif call == "despawn":
                self.federate.despawn(list(request.despawn.robot_ids))
                reply.done.SetInParent()
            elif call == "next_time":
                t_ns = self.federate.next_time()
                reply.next_time.SetInParent()
                if t_ns is not None:
                    reply.next_time.t_ns = int(t_ns)
            elif call == "finalize":
                self.finalized = True
                self.federate.finalize()
                reply.done.SetInParent()
            else:
                raise RuntimeError("an empty request (no call set)")
        except Exception as exc:  # the federate's failure is the orchestrator's to report, with name and time
            reply = error_reply(exc)
        reply.requests.extend(self.requests.pending)
        self.requests.pending.clear()
        return reply

    def _hello(self, hello: pb.Hello, welcome: pb.Welcome) -> None:
        if hello.protocol_version != PROTOCOL_VERSION:
            raise RuntimeError(f"this host speaks protocol version {PROTOCOL_VERSION} (coopsim.federate.v1), the "
                               f"client {hello.protocol_version}")
        self.requests.enabled = "spawn_requests" in hello.capabilities
        welcome.protocol_version = PROTOCOL_VERSION
        welcome.capabilities.append("spawn_requests")
        welcome.host = "coopsim host"

    def _setup(self, setup: pb.Setup, meta: pb.Meta) -> None:
        from federates import FEDERATE_KINDS

        if self.federate is not None:
            raise RuntimeError("'setup' twice in one session")
        kind, name, params = setup.type, setup.name, decode_map(setup.params, "params")
        # only what the host was told to serve: a client must not make it import and call arbitrary code
        self.host.policy.check_kind(kind)
        cls = FEDERATE_KINDS.get(kind)
        if not (isinstance(cls, type) and issubclass(cls, Federate)):
            raise TypeError(f"'{kind}' is not a Federate")
        self.host.policy.check_params(cls, name, params)
        self.federate = cls(name, **params)
        # as in process: a built-in kind gets arrays of its own, a plug-in read-only views (no copy)
        self.copy_inputs = ":" not in kind
        if setup.HasField("out_label"):  # the client's label only names the session directory, never a path
            self.out_dir, self.remove_out_dir = self.host.session_dir(setup.out_label, name)
        ctx = SetupContext(seed=setup.seed, end_ns=setup.end_ns, scheduler=self.requests, out_dir=self.out_dir)
        encode_meta(self.federate.setup(ctx), meta)

    def close(self) -> None:
        """Finalize a federate its client left without ``finalize``, and remove a temporary directory."""
        if self.federate is not None and not self.finalized:
            self.finalized = True
            with contextlib.suppress(Exception):
                self.federate.finalize()
        self.remove_dir()

    def remove_dir(self) -> None:
        if self.out_dir is not None and self.remove_out_dir:
            shutil.rmtree(self.out_dir, ignore_errors=True)


def error_reply(exc: BaseException) -> pb.Reply:
    """An error reply naming the exception's type, its message and its robot when it carries one."""
    reply = pb.Reply()
    reply.error.type, reply.error.message = type(exc).__name__, str(exc)
    robot = getattr(exc, "robot", None)
    if robot is not None:
        reply.error.robot = str(robot)
    return reply


def answer(state: _Session, frame: bytes) -> tuple[bytes, bool]:
    """The serialized reply to one frame of a session and whether the session goes on (shared by both
    transports). Bytes that are not a Request get one error reply and end it; a reply over the limit becomes an
    error reply."""
    try:  # parsed here rather than by the transport, so a peer that sends garbage gets a reply saying so
        request = pb.Request.FromString(frame)
    except DecodeError as exc:
        return error_reply(CodecError(f"not a coopsim.federate.v1.Request: {exc}")).SerializeToString(), False
    reply = state.handle(request).SerializeToString()
    limit = state.host.max_message_bytes
    if len(reply) > limit:
        reply = error_reply(CodecError(f"the reply to '{request.WhichOneof('call')}' has {len(reply)} bytes, more "
                                       f"than this host's limit of {limit} (--max-message-mb)")).SerializeToString()
    return reply, True


def _session_handler(host: _Host) -> Any:
    def session(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        state = _Session(host, context)
        with host.lock:
            host.sessions.add(state)
        try:
            while True:
                state.waiting_since = time.monotonic()
                try:
                    frame = next(requests)
                except (StopIteration, grpc.RpcError):  # the client ended the stream, or it was cancelled
                    return
                state.waiting_since = None
                if state.idle_closed:
                    return
                reply, more = answer(state, frame)
                yield reply
                if not more:  # garbage: one answer, then no more
                    return
        finally:  # the client went away without finalize: release what the federate holds
            with host.lock:
                host.sessions.discard(state)
            state.close()

    return session


def make_host(listen: str, max_sessions: int, allow: Sequence[str], allow_paths: Sequence[str | Path],
              allow_brokers: Sequence[str], out_root: str | Path | None, max_message_mb: float,
              idle_timeout_s: float, token: str | None, tls_cert: str | Path | None,
              tls_key: str | Path | None) -> _Host:
    """The checked options of one listener as the state its sessions share (ValueError, RuntimeError)."""
    if max_sessions < 1 or max_message_mb <= 0 or idle_timeout_s <= 0:
        raise ValueError("--max-sessions, --max-message-mb and --idle-timeout-s must be positive")
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("--tls-cert and --tls-key go together")
    require_token_beyond_loopback(listen, token)
    policy = HostPolicy.from_options(allow, allow_paths, allow_brokers)
    root = None if out_root is None else Path(out_root).expanduser().resolve()
    if root is not None:
        root.mkdir(parents=True, exist_ok=True)
    return _Host(policy, root, int(max_message_mb * MIB), idle_timeout_s)


def serve(listen: str, max_sessions: int = 8, allow: Sequence[str] = (), *, allow_paths: Sequence[str | Path] = (),
          allow_brokers: Sequence[str] = (), out_root: str | Path | None = None, max_message_mb: float = 8.0,
          idle_timeout_s: float = 120.0, token: str | None = None, tls_cert: str | Path | None = None,
          tls_key: str | Path | None = None) -> grpc.Server:
    """Start a host on ``listen`` ("host:port"; port 0 picks a free one) and return the running server; its
    port is ``server.coopsim_port``.

    It serves :data:`~federates.remote.policy.SAFE_KINDS` and the kinds or ``module:Class`` prefixes in
    ``allow``; file and address parameters only inside ``allow_paths`` and to ``allow_brokers``. Hosted
    federates write under ``out_root`` (None: a temporary directory per session). Frames above
    ``max_message_mb`` are refused, a session silent for ``idle_timeout_s`` is closed, one beyond
    ``max_sessions`` is refused at once (RESOURCE_EXHAUSTED). With ``token``, calls without it are refused
    (UNAUTHENTICATED); without one, only a loopback address is accepted (RuntimeError). ``tls_cert`` and
    ``tls_key`` (PEM files, both or neither) serve over TLS.
    """
    host = make_host(listen, max_sessions, allow, allow_paths, allow_brokers, out_root, max_message_mb,
                     idle_timeout_s, token, tls_cert, tls_key)
    limit = host.max_message_bytes
    # a worker thread per session: measured 10-20 µs sooner per call than a grpc.aio server (docs/remote.md, Cost)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_sessions), maximum_concurrent_rpcs=max_sessions,
        interceptors=[TokenInterceptor(token)] if token else None,
        options=[("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit),
                 # a connection with no session open is dropped too, so sockets cannot be hoarded
                 ("grpc.max_connection_idle_ms", int(idle_timeout_s * 1000))])
    handler = grpc.method_handlers_generic_handler(SERVICE, {"Session": grpc.stream_stream_rpc_method_handler(
        _session_handler(host), request_deserializer=None, response_serializer=None)})
    server.add_generic_rpc_handlers((handler,))
    if tls_cert is not None and tls_key is not None:
        port = server.add_secure_port(listen, server_credentials(tls_cert, tls_key))
    else:
        port = server.add_insecure_port(listen)
    if port == 0:
        raise OSError(f"cannot listen on {listen}")
    server.start()
    threading.Thread(target=host.watch_idle, daemon=True, name="coopsim-host-idle").start()
    server.coopsim_port = port  # type: ignore[attr-defined]
    server.coopsim_host = host  # type: ignore[attr-defined]
    return server


def shutdown(server: grpc.Server) -> bool:
    """Stop ``server`` within about half a second: sessions get :data:`SHUTDOWN_GRACE_S` to end, temporary
    directories are removed. Returns whether every session ended (False: one is stuck in a federate's call and
    its thread is abandoned)."""
    host: _Host = server.coopsim_host  # type: ignore[attr-defined]
    host.stopped.set()
    done = server.stop(grace=SHUTDOWN_GRACE_S)
    ended = done.wait(SHUTDOWN_GRACE_S + 0.15)
    host.remove_session_dirs()
    with host.lock:
        return ended and not host.sessions
