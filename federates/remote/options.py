"""The command-line options of ``coopsim host`` (kept apart so that ``coopsim --help`` does not load gRPC)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_host_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``coopsim host``."""
    parser.add_argument("--listen", default="127.0.0.1:50051", metavar="HOST:PORT",
                        help="address to listen on, host:port (default: %(default)s; port 0: any free port). "
                             "Anything but loopback needs COOPSIM_TOKEN in the environment")
    parser.add_argument("--allow", action="append", default=[], metavar="KIND_OR_PREFIX",
                        help="also serve this federate kind (fmu, mqtt, helics, ros2, an installed plug-in) or the "
                             "'module:Class' federates under this package or module (repeatable); physics, v2x "
                             "and control are served by default")
    parser.add_argument("--allow-path", action="append", default=[], metavar="DIR", type=Path,
                        help="let federate parameters name files inside DIR (repeatable; default: none)")
    parser.add_argument("--allow-broker", action="append", default=[], metavar="HOST:PORT",
                        help="let federate parameters name this broker or server address (repeatable; default: "
                             "none)")
    parser.add_argument("--out-root", type=Path, default=None, metavar="DIR",
                        help="where hosted federates write their files, one directory per session, kept "
                             "(default: a temporary directory per session, removed when the session ends)")
    parser.add_argument("--max-sessions", type=int, default=8, metavar="N",
                        help="federates served at once (default: %(default)s)")
    parser.add_argument("--max-message-mb", type=float, default=8.0, metavar="MIB",
                        help="largest request or reply, in MiB (default: %(default)s)")
    parser.add_argument("--idle-timeout-s", type=float, default=120.0, metavar="S",
                        help="a session whose client sends nothing for this long is closed and its slot freed "
                             "(default: %(default)s)")
    parser.add_argument("--tls-cert", type=Path, default=None, metavar="PEM",
                        help="serve over TLS with this certificate (with --tls-key); clients set COOPSIM_TLS_CA")
    parser.add_argument("--tls-key", type=Path, default=None, metavar="PEM", help="the private key of --tls-cert")
