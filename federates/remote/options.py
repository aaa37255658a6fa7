"""The command-line options of ``coopsim host`` (kept apart so that ``coopsim --help`` does not load gRPC)."""

from __future__ import annotations

import argparse


def add_host_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``coopsim host``."""
    parser.add_argument("--listen", default="127.0.0.1:50051",
                        help="address to listen on, host:port (default: %(default)s; port 0: any free port). The "
                             "host has no authentication: listen on loopback or a trusted network only")
    parser.add_argument("--allow", action="append", default=[], metavar="PREFIX",
                        help="also serve 'module:Class' federates under this package or module (repeatable); "
                             "registered kinds are always served")
    parser.add_argument("--max-sessions", type=int, default=8, help="federates served at once (default: %(default)s)")
