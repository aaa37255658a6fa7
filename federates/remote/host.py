"""A gRPC server that hosts federates for an orchestrator in another process or on another machine.

Each ``Session`` stream is one federate: the first request (``setup``) names its type (a registered federate
kind or a ``package.module:Class`` path), its name and keyword parameters; the host builds it and then answers
``spawn``, ``despawn``, ``step``, ``next_time`` and ``finalize`` in lock step, one reply per request, until the
stream ends. Messages are ``federates.remote.wire`` frames; a federate's exception travels back as
``{"ok": false, "error": ...}`` and the session stays usable for ``finalize``.

Run: ``coopsim host --listen 127.0.0.1:50051 --allow mypkg`` (or ``python -m federates.remote.host``). The
host serves the registered federate kinds and ``module:Class`` paths under its ``--allow`` prefixes only, and
checks that the class is a Federate: a client cannot make it run arbitrary code. There is no authentication, so
listen on loopback or a trusted network.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from orchestrator.core.federate import Federate, SetupContext, meta_to_dict
from orchestrator.core.robots import RobotSpec

from .options import add_host_arguments
from .wire import decode, encode

SERVICE = "coopsim.FederateHost"
METHOD = f"/{SERVICE}/Session"


class _NoScheduler:
    """Stands in for the scheduler in a hosted federate's SetupContext: spawn requests do not cross processes."""

    def schedule_spawn(self, spec: RobotSpec, at_ns: int) -> None:
        raise RuntimeError("a remote federate cannot request spawns; declare the robots in the scenario")

    def schedule_despawn(self, robot_id: int, at_ns: int) -> None:
        raise RuntimeError("a remote federate cannot request despawns; declare them in the scenario")


def meta_message(meta: Any) -> dict[str, Any]:
    """FederateMeta as a wire message."""
    return meta_to_dict(meta)


class _Session:
    """One hosted federate and the dispatch of its calls."""

    def __init__(self, allow: Sequence[str]) -> None:
        self.federate: Federate | None = None
        self.allow = tuple(allow)
        self.finalized = False

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        call = request.get("call")
        try:
            if call == "setup":
                return {"ok": True, "result": self._setup(request)}
            if self.federate is None:
                raise RuntimeError(f"'{call}' before 'setup'")
            if call == "spawn":
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

        spec = request["federate"]
        kind = str(spec["type"])
        # only what the host was told to serve: a client must not make it import and call arbitrary code
        if ":" in kind and not any(kind.split(":", 1)[0] == a or kind.startswith(a + ".") for a in self.allow):
            raise PermissionError(f"this host does not serve '{kind}'; start it with --allow "
                                  f"{kind.split(':', 1)[0].rsplit('.', 1)[0]} (a package or module prefix)")
        cls = FEDERATE_KINDS.get(kind)
        if not (isinstance(cls, type) and issubclass(cls, Federate)):
            raise TypeError(f"'{kind}' is not a Federate")
        self.federate = cls(spec["name"], **spec.get("params", {}))
        out_dir = request.get("out_dir")
        ctx = SetupContext(seed=int(request["seed"]), end_ns=int(request["end_ns"]), scheduler=_NoScheduler(),
                           out_dir=Path(out_dir) if out_dir else None)
        return meta_message(self.federate.setup(ctx))


def _session_handler(allow: Sequence[str]) -> Any:
    def session(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        state = _Session(allow)
        try:
            for frame in requests:
                yield encode(state.handle(decode(frame)))
        finally:  # the client went away without finalize: release what the federate holds
            if state.federate is not None and not state.finalized:
                with contextlib.suppress(Exception):
                    state.federate.finalize()

    return session


def serve(listen: str, max_sessions: int = 8, allow: Sequence[str] = ()) -> grpc.Server:
    """Start a host on ``listen`` ("host:port"; port 0 picks a free one) and return the running server; its
    port is ``server.coopsim_port``. It serves the registered federate kinds and ``module:Class`` paths under
    the ``allow`` prefixes; a session beyond ``max_sessions`` is refused at once (RESOURCE_EXHAUSTED)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_sessions), maximum_concurrent_rpcs=max_sessions,
                         options=[("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)])
    handler = grpc.method_handlers_generic_handler(SERVICE, {"Session": grpc.stream_stream_rpc_method_handler(
        _session_handler(allow), request_deserializer=None, response_serializer=None)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port(listen)
    if port == 0:
        raise OSError(f"cannot listen on {listen}")
    server.start()
    server.coopsim_port = port  # type: ignore[attr-defined]
    return server


def main(argv: Sequence[str] | None = None) -> int:
    """``coopsim host``: serve federates until SIGINT or SIGTERM."""
    parser = argparse.ArgumentParser(prog="coopsim host", description=__doc__.splitlines()[0])
    add_host_arguments(parser)
    args = parser.parse_args(argv)
    try:
        server = serve(args.listen, args.max_sessions, args.allow)
    except (OSError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"coopsim federate host listening on port {server.coopsim_port}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.stop(grace=1.0).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
