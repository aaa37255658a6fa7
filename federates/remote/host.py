"""A gRPC server that hosts federates for an orchestrator in another process or on another machine.

Each ``Session`` stream is one federate: the first request (``setup``) names its type (a federate kind or a
``package.module:Class`` path), its name and keyword parameters; the host builds it and then answers ``spawn``,
``despawn``, ``step``, ``next_time`` and ``finalize`` in lock step, one reply per request, until the stream ends.
Messages are ``federates.remote.wire`` frames; a federate's exception travels back as ``{"ok": false, "error":
...}`` and the session stays usable for ``finalize``.

Run: ``coopsim host --listen 127.0.0.1:50051 --allow mypkg`` (or ``python -m federates.remote.host``). What a
client may ask for is bounded (``docs/remote.md``, "Security"):

- kinds: ``physics``, ``v2x`` and ``control``, plus what ``--allow`` names; every class is checked to be a
  Federate before anything is called (``federates.remote.policy``);
- files and addresses in parameters: only inside ``--allow-path`` directories and to ``--allow-broker``
  addresses;
- outputs: only under the host's own ``--out-root`` (default: a temporary directory per session); the client's
  ``out_dir`` is a label, never a path;
- size and time: frames up to ``--max-message-mb``, sessions closed after ``--idle-timeout-s`` of silence, at most
  ``--max-sessions`` at once;
- identity: ``COOPSIM_TOKEN`` (required beyond loopback) and optional TLS (``federates.remote.auth``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent import futures
from pathlib import Path, PurePosixPath
from typing import Any

import grpc

from orchestrator.core.federate import Federate, SetupContext, meta_to_dict
from orchestrator.core.robots import RobotSpec

from .auth import (
    TokenInterceptor,
    is_loopback,
    require_token_beyond_loopback,
    server_credentials,
    token_from_env,
)
from .options import add_host_arguments
from .policy import HostPolicy
from .wire import WireError, decode, encode

SERVICE = "coopsim.FederateHost"
METHOD = f"/{SERVICE}/Session"
MIB = 1024 * 1024
SHUTDOWN_GRACE_S = 0.3
"""On SIGTERM, how long sessions get to finish their call and finalize; the process ends well within 1 s."""


class _NoScheduler:
    """Stands in for the scheduler in a hosted federate's SetupContext: spawn requests do not cross processes."""

    def schedule_spawn(self, spec: RobotSpec, at_ns: int) -> None:
        raise RuntimeError("a remote federate cannot request spawns; declare the robots in the scenario")

    def schedule_despawn(self, robot_id: int, at_ns: int) -> None:
        raise RuntimeError("a remote federate cannot request despawns; declare them in the scenario")


def meta_message(meta: Any) -> dict[str, Any]:
    """FederateMeta as a wire message."""
    return meta_to_dict(meta)


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

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        call = request.get("call") if isinstance(request, dict) else None
        try:
            if call == "setup":
                return {"ok": True, "result": self._setup(request)}
            if self.federate is None:
                raise RuntimeError(f"'{call}' before 'setup'")
            if call == "spawn":
                for i, robot in enumerate(request["robots"]):
                    self.host.policy.check_values(robot.get("config") or {}, f"robots[{i}].config.")
                self.federate.spawn([RobotSpec(**robot) for robot in request["robots"]])
                return {"ok": True, "result": None}
            if call == "despawn":
                self.federate.despawn([int(r) for r in request["robot_ids"]])
                return {"ok": True, "result": None}
            if call == "step":
                outputs = self.federate.step(int(request["t_ns"]), request["inputs"])
                return {"ok": True, "result": {port: value for port, value in dict(outputs).items()}}
            if call == "next_time":
                return {"ok": True, "result": self.federate.next_time()}
            if call == "finalize":
                self.finalized = True
                self.federate.finalize()
                return {"ok": True, "result": None}
            raise RuntimeError(f"unknown call '{call}'")
        except Exception as exc:  # the federate's failure is the orchestrator's to report, with name and time
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "robot": getattr(exc, "robot", None)}

    def _setup(self, request: dict[str, Any]) -> dict[str, Any]:
        from federates import FEDERATE_KINDS

        if self.federate is not None:
            raise RuntimeError("'setup' twice in one session")
        spec = request["federate"]
        kind, name, params = str(spec["type"]), str(spec["name"]), spec.get("params") or {}
        if not isinstance(params, dict):
            raise TypeError(f"params must be a mapping, got {type(params).__name__}")
        # only what the host was told to serve: a client must not make it import and call arbitrary code
        self.host.policy.check_kind(kind)
        cls = FEDERATE_KINDS.get(kind)
        if not (isinstance(cls, type) and issubclass(cls, Federate)):
            raise TypeError(f"'{kind}' is not a Federate")
        self.host.policy.check_params(cls, name, params)
        self.federate = cls(name, **params)
        if request.get("out_dir") is not None:  # the client's out_dir is only a label for the session directory
            self.out_dir, self.remove_out_dir = self.host.session_dir(request["out_dir"], name)
        ctx = SetupContext(seed=int(request["seed"]), end_ns=int(request["end_ns"]), scheduler=_NoScheduler(),
                           out_dir=self.out_dir)
        return meta_message(self.federate.setup(ctx))

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


def _session_handler(host: _Host) -> Any:
    limit = host.max_message_bytes

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
                try:
                    request = decode(frame, max_bytes=limit)
                except WireError as exc:  # a peer that cannot frame its messages gets one answer, then no more
                    yield encode({"ok": False, "error": f"WireError: {exc}", "robot": None})
                    return
                reply = encode(state.handle(request))
                if len(reply) > limit:
                    reply = encode({"ok": False, "robot": None, "error": f"WireError: the reply to "
                                    f"'{request.get('call')}' has {len(reply)} bytes, more than this host's limit "
                                    f"of {limit} (--max-message-mb)"})
                yield reply
        finally:  # the client went away without finalize: release what the federate holds
            with host.lock:
                host.sessions.discard(state)
            state.close()

    return session


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
    if max_sessions < 1 or max_message_mb <= 0 or idle_timeout_s <= 0:
        raise ValueError("--max-sessions, --max-message-mb and --idle-timeout-s must be positive")
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("--tls-cert and --tls-key go together")
    require_token_beyond_loopback(listen, token)
    policy = HostPolicy.from_options(allow, allow_paths, allow_brokers)
    root = None
    if out_root is not None:
        root = Path(out_root).expanduser().resolve()
        root.mkdir(parents=True, exist_ok=True)
    limit = int(max_message_mb * MIB)
    host = _Host(policy, root, limit, idle_timeout_s)
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


def main(argv: Sequence[str] | argparse.Namespace | None = None) -> int:
    """``coopsim host``: serve federates until SIGINT or SIGTERM (``argv`` may be options already parsed by
    ``coopsim``)."""
    if isinstance(argv, argparse.Namespace):
        args = argv
    else:
        parser = argparse.ArgumentParser(prog="coopsim host", description=__doc__.splitlines()[0])
        add_host_arguments(parser)
        args = parser.parse_args(argv)
    try:
        server = serve(args.listen, args.max_sessions, args.allow, allow_paths=args.allow_path,
                       allow_brokers=args.allow_broker, out_root=args.out_root, max_message_mb=args.max_message_mb,
                       idle_timeout_s=args.idle_timeout_s, token=token_from_env(), tls_cert=args.tls_cert,
                       tls_key=args.tls_key)
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_signal(*_: Any) -> None:
        if stop.is_set():  # a second signal: no more waiting
            os._exit(1)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    print(f"coopsim federate host listening on port {server.coopsim_port}", flush=True)
    if not is_loopback(args.listen) and args.tls_cert is None:
        print("warning: without --tls-cert/--tls-key the token and all data cross the network in clear text",
              file=sys.stderr, flush=True)
    stop.wait()
    clean = shutdown(server)
    if not clean:
        # a federate stuck in a call holds a worker thread that the interpreter would wait for at exit: abandon it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
