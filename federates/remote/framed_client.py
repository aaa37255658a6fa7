"""The client end of the framed-TCP transport: one TCP connection per remote federate (``framed://host:port``).

A call is one ``sendall`` of the request's frame and, usually, one ``recv`` of the reply's, both in the caller's
thread: no event loop and no other thread take part, which is where it saves over gRPC in Python. The wire format
is in ``federates.remote.framing`` and ``docs/remote.md`` ("Framed TCP"); the token and the TLS options come from
the environment as for gRPC (``core.auth``).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import time

from google.protobuf.message import DecodeError

from core.auth import ssl_client_context, token_from_env

from .codec import pb
from .framing import HEADER, PREAMBLE, STATUS_TYPES, FrameReader, frame, host_and_port

_RETRY_S = 0.05
"""Between two connection attempts while the host is not listening yet (within ``connect_timeout_s``)."""


class SessionEndedError(Exception):
    """The host ended the session: ``(status, details)``, the status named as a gRPC status code."""


class FramedTransport:
    """One session's connection to a framed-TCP host at ``address`` ("host:port")."""

    def __init__(self, address: str, connect_timeout_s: float, call_timeout_s: float) -> None:
        self.address = address
        self.connect_timeout_s = connect_timeout_s
        self.call_timeout_s = call_timeout_s
        self.tls = False
        self._sock: socket.socket | None = None
        self._reader: FrameReader | None = None
        self._handshake_due = True

    def open(self) -> None:
        """Connect, retrying until ``connect_timeout_s`` while nothing listens (TimeoutError then), and send the
        preamble and the token. RuntimeError when TLS fails or its CA cannot be read."""
        context, server_name = ssl_client_context()
        self.tls = context is not None
        host, port = host_and_port(self.address)
        deadline = time.monotonic() + self.connect_timeout_s
        while True:
            try:
                sock = socket.create_connection((host, port), timeout=max(0.05, deadline - time.monotonic()))
                break
            except (ConnectionRefusedError, TimeoutError, socket.gaierror) as exc:
                if time.monotonic() + _RETRY_S >= deadline:
                    raise TimeoutError(str(exc)) from None
                time.sleep(_RETRY_S)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # each frame leaves at once
            if context is not None:
                sock = context.wrap_socket(sock, server_hostname=server_name or host)
            token = (token_from_env() or "").encode()
            sock.sendall(PREAMBLE + frame(token))
        except ssl.SSLError as exc:
            sock.close()
            raise RuntimeError(f"TLS with the host failed: {exc.reason or exc}") from None
        except OSError as exc:
            sock.close()
            raise TimeoutError(str(exc)) from None
        sock.settimeout(self.call_timeout_s)  # bounds every read and write of a call (TimeoutError)
        self._sock, self._reader = sock, FrameReader(sock)
        self._handshake_due = True

    def _read_reply(self) -> pb.Reply | None:
        """The next reply (None: the host closed the connection); SessionEndedError for a reply that ends the
        session or bytes that are not a reply."""
        assert self._reader is not None
        try:
            size = self._reader.length()
            body = None if size is None else self._reader.body(size)
        except (ConnectionResetError, ssl.SSLError) as exc:
            raise SessionEndedError("UNAVAILABLE", f"the connection was reset ({exc})") from None
        if body is None:
            return None
        try:
            reply = pb.Reply.FromString(body)
        except DecodeError:
            raise SessionEndedError("INTERNAL", "the host's answer is not a coopsim.federate.v1.Reply") from None
        if reply.HasField("error") and reply.error.type in STATUS_TYPES and reply.WhichOneof("result") is None:
            raise SessionEndedError(reply.error.type, reply.error.message)
        return reply

    def exchange(self, request: pb.Request) -> pb.Reply | None:
        """Send ``request`` and return its reply (None: the host closed the session). TimeoutError after
        ``call_timeout_s`` without progress, SessionEndedError when the host refused or ended the session."""
        assert self._sock is not None
        if self._handshake_due:  # the host's answer to the token: read with the first call, so it names the call
            try:
                opened = self._read_reply() is not None
            except SessionEndedError as exc:  # a refusal is raised as it is; a reset is told like a close
                if exc.args[0] != "UNAVAILABLE":
                    raise
                opened = False
            if not opened:
                hint = "" if self.tls else "; a host started with --tls-cert needs COOPSIM_TLS_CA here"
                raise SessionEndedError("UNAVAILABLE", "the host closed the connection without opening a session "
                                                       f"(is it a --framed-listen address?{hint})")
            self._handshake_due = False
        data = request.SerializeToString()
        try:
            self._sock.sendall(HEADER.pack(len(data)) + data)
        except TimeoutError:
            raise
        except OSError as exc:  # the host closed first; it may have said why (a request over its limit)
            with contextlib.suppress(OSError):
                self._sock.settimeout(1.0)
                if self._read_reply() is None:
                    return None
            raise SessionEndedError("UNAVAILABLE", f"the connection was closed ({exc.strerror or exc})") from None
        return self._read_reply()

    def close(self) -> None:
        """Close the connection (idempotent); the host then finalizes a federate left without ``finalize``."""
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()
