"""``coopsim host``: the command that serves federates over gRPC (``host.serve``) and, with ``--framed-listen``, over
framed TCP (``framed.serve_framed``) until SIGINT or SIGTERM. Run: ``coopsim host ...`` or
``python -m federates.remote.host_command ...``."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from core.auth import is_loopback, token_from_env

from . import host as host_module
from .framed import serve_framed
from .framing import add_framed_arguments
from .host import SHUTDOWN_GRACE_S, serve, shutdown
from .options import add_host_arguments


def main(argv: Sequence[str] | argparse.Namespace | None = None) -> int:
    """``coopsim host``: serve federates until SIGINT or SIGTERM (``argv`` may be options already parsed by
    ``coopsim``)."""
    if isinstance(argv, argparse.Namespace):
        args = argv
    else:
        parser = argparse.ArgumentParser(prog="coopsim host", description=(host_module.__doc__ or "").splitlines()[0])
        add_host_arguments(parser)
        add_framed_arguments(parser)
        args = parser.parse_args(argv)
    options: dict[str, Any] = dict(allow_paths=args.allow_path, allow_brokers=args.allow_broker, out_root=args.out_root,
                                   max_message_mb=args.max_message_mb, idle_timeout_s=args.idle_timeout_s,
                                   token=token_from_env(), tls_cert=args.tls_cert, tls_key=args.tls_key)
    framed = None
    try:
        if getattr(args, "framed_listen", None):
            framed = serve_framed(args.framed_listen, args.max_sessions, args.allow, **options)
        server = serve(args.listen, args.max_sessions, args.allow, **options)
    except (OSError, RuntimeError, ValueError) as exc:
        if framed is not None:
            framed.shutdown()
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
    if framed is not None:
        print(f"coopsim framed host listening on port {framed.port}", flush=True)
    if args.tls_cert is None and not all(map(is_loopback, [args.listen, *([args.framed_listen] if framed else [])])):
        print("warning: without --tls-cert/--tls-key the token and all data cross the network in clear text",
              file=sys.stderr, flush=True)
    stop.wait()
    if framed is not None:
        framed.stop()  # its sessions end while gRPC's get their grace
    clean = shutdown(server)
    clean = (framed is None or framed.wait(SHUTDOWN_GRACE_S + 0.15)) and clean
    if not clean:
        # a federate stuck in a call holds a worker thread that the interpreter would wait for at exit: abandon it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
