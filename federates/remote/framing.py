"""What both ends of the framed-TCP transport share, and remote addresses (no gRPC import: scenarios load this).

The framed transport carries the same ``coopsim.federate.v1`` ``Request`` and ``Reply`` messages as the gRPC
stream, over one plain TCP connection per session (``docs/remote.md``, "Framed TCP"):

1. the client sends the preamble :data:`PREAMBLE` (``COOPSIM-FRAMED 1\\n``), then one authentication frame: the
   UTF-8 token (``COOPSIM_TOKEN``; empty when none), at most :data:`MAX_TOKEN_BYTES`;
2. the host answers with one ``Reply`` frame: nothing set when the session is open, else ``error`` with a status
   name as its type (:data:`STATUS_TYPES`) and it closes the connection;
3. then each request is a frame holding a serialized ``Request``, answered by one frame holding a ``Reply``.

A frame is a 4-byte big-endian unsigned length followed by that many bytes.
"""

from __future__ import annotations

import argparse
import socket
import struct

PREAMBLE = b"COOPSIM-FRAMED 1\n"
"""The first bytes a client sends: the transport's name and version, then a line feed."""
HEADER = struct.Struct(">I")
"""The length prefix of every frame: 4 bytes, big-endian, unsigned."""
MAX_TOKEN_BYTES = 4096
"""The largest authentication frame a host reads."""
STATUS_TYPES = frozenset({"UNAUTHENTICATED", "RESOURCE_EXHAUSTED", "CANCELLED", "INVALID_ARGUMENT", "UNAVAILABLE"})
"""``Error.type`` values of a reply that ends the session (the host closes the connection after it), named as gRPC
status codes; a federate's own failure is named by its exception type instead and the session stays usable."""
FRAMED = "framed"
GRPC = "grpc"
SCHEMES = (GRPC, FRAMED)


def split_address(address: str) -> tuple[str, str]:
    """``(transport, "host:port")`` of a remote address: ``host:port`` or ``grpc://host:port`` is gRPC,
    ``framed://host:port`` framed TCP. ValueError for another scheme or a malformed address."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = GRPC, address
    elif scheme not in SCHEMES:
        raise ValueError(f"unknown transport '{scheme}' in '{address}': use host:port (gRPC), grpc://host:port or "
                         "framed://host:port")
    host, _, port = rest.rpartition(":")
    if not host or "/" in rest or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"must be 'host:port' or 'framed://host:port' with a port in 1-65535, got '{address}'")
    return scheme, rest


def host_and_port(address: str) -> tuple[str, int]:
    """The host (brackets removed) and the port of ``host:port``."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def frame(body: bytes) -> bytes:
    """``body`` behind its length prefix."""
    return HEADER.pack(len(body)) + body


class FrameReader:
    """Reads frames from a socket through one buffer, so a small frame usually costs a single ``recv``."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def _fill(self, size: int) -> bool:
        """Read until ``size`` bytes are buffered; False when the peer closed first."""
        while len(self.buffer) < size:
            chunk = self.sock.recv(max(65536, size - len(self.buffer)))
            if not chunk:
                return False
            self.buffer += chunk
        return True

    def length(self) -> int | None:
        """The length prefix of the next frame, consumed (None: the peer closed)."""
        if not self._fill(HEADER.size):
            return None
        (size,) = HEADER.unpack_from(self.buffer)
        del self.buffer[:HEADER.size]
        return size

    def body(self, size: int) -> bytes | None:
        """The next ``size`` bytes (None: the peer closed first)."""
        if not self._fill(size):
            return None
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data


def add_framed_arguments(parser: argparse.ArgumentParser) -> None:
    """The option of ``coopsim host`` that serves the framed-TCP transport beside gRPC."""
    parser.add_argument("--framed-listen", default=None, metavar="HOST:PORT",
                        help="also serve sessions over framed TCP on this address (clients use "
                             "'framed://HOST:PORT'); the same rules as --listen: beyond loopback COOPSIM_TOKEN is "
                             "required, --tls-cert/--tls-key apply, each listener serves --max-sessions")
