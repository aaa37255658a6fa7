"""The framed-TCP transport of ``coopsim host``: the same sessions as over gRPC, one TCP connection each.

``coopsim host --framed-listen 127.0.0.1:7001`` serves it beside gRPC; clients name the address
``framed://127.0.0.1:7001``. The wire format is in ``federates.remote.framing`` and ``docs/remote.md`` ("Framed
TCP"). Each connection is read by a thread of its own, which hands every request to the same ``_Session`` as the
gRPC host (``federates.remote.host``) and writes its reply at once: no other thread touches a call, which is what
makes this transport cheaper than gRPC in Python. The rules are the gRPC host's: loopback unless a token is set,
the token compared in constant time, ``--max-sessions``, ``--max-message-mb`` (a length prefix above it is refused
before its body is read), ``--idle-timeout-s``, the same policy, and optional TLS with ``--tls-cert/--tls-key``.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from core.auth import ssl_server_context, token_refusal

from .codec import pb
from .framing import MAX_TOKEN_BYTES, PREAMBLE, FrameReader, frame, host_and_port
from .host import SHUTDOWN_GRACE_S, _Host, _Session, answer, make_host

_T = TypeVar("_T")
HANDSHAKE_S = 10.0
"""How long a new connection may take to send its preamble and token (and finish TLS)."""
HANDSHAKE_SLOTS = 8
"""Connections still in their handshake beyond ``--max-sessions``; one more is closed at once."""
POLL_S = 0.2
"""Under TLS, how often a session's thread waiting for a request looks whether its session was closed (idle,
stopping). A plain connection is woken instead, so its thread sleeps until a request comes."""


def _status_frame(status: str, message: str) -> bytes:
    """A reply frame whose error ends the session: ``status`` names it as a gRPC status code would."""
    reply = pb.Reply()
    reply.error.type, reply.error.message = status, message
    return frame(reply.SerializeToString())


class _Connection:
    """What a ``_Session`` needs from its transport (in gRPC, the call's context): ``cancel``, called once the
    session is marked closed (``idle_closed``: silent too long, or the host stops)."""

    def __init__(self, sock: socket.socket, tls: bool) -> None:
        self.sock, self.tls = sock, tls

    def cancel(self) -> None:
        """Wake the session's thread from its read; it then tells the client why and closes the connection. Under
        TLS the thread sees the mark within :data:`POLL_S` instead: no other thread may touch a TLS connection."""
        if not self.tls:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RD)  # the read ends; the write side stays open for that last reply


def _send(conn: socket.socket, data: bytes, stopped: threading.Event) -> None:
    """All of ``data``, however slowly the client reads, unless the host stops meanwhile (TimeoutError)."""
    view = memoryview(data)
    while view:
        try:
            view = view[conn.send(view):]
        except TimeoutError:  # the socket's timeout is the polling interval, not a limit on the client
            if stopped.is_set():
                raise


def _polled(read: Callable[[], _T | None], state: _Session) -> _T | None:
    """``read()``, retried every :data:`POLL_S` until it returns; None when the session is closed meanwhile."""
    while not state.idle_closed:
        try:
            return read()
        except TimeoutError:  # nothing yet; what was read so far stays buffered
            continue
    return None


class FramedServer:
    """A listening framed-TCP host; ``port`` is the port it listens on."""

    def __init__(self, host: _Host, listen: str, max_sessions: int, token: str | None,
                 tls: ssl.SSLContext | None) -> None:
        self.host = host
        self.max_sessions = max_sessions
        self.expected = token.encode() if token else None
        self.tls = tls
        self.connections = 0
        address, port = host_and_port(listen)
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.listener = socket.create_server((address, port), family=family)
        self.port: int = self.listener.getsockname()[1]
        self.stopped_at = 0.0

    def start(self) -> None:
        """Accept connections and watch for idle sessions, each in a daemon thread."""
        threading.Thread(target=self._accept, daemon=True, name="coopsim-framed-accept").start()
        threading.Thread(target=self.host.watch_idle, daemon=True, name="coopsim-framed-idle").start()

    def _accept(self) -> None:
        while not self.host.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:  # the listener was shut down: the host is stopping
                return
            with self.host.lock:
                full = self.connections >= self.max_sessions + HANDSHAKE_SLOTS
                if not full:
                    self.connections += 1
            if full:  # sockets cannot be hoarded by connections that never finish their handshake
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True, name="coopsim-framed-session").start()

    def _serve(self, conn: socket.socket) -> None:
        """One connection, from its handshake to its end; nothing a peer sends escapes as a traceback."""
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a reply leaves at once, not after 40 ms
            conn.settimeout(HANDSHAKE_S)
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            reader = FrameReader(conn)
            state = self._open(conn, reader)
            if state is not None:
                self._run(state, conn, reader)
        except (OSError, ValueError):  # a reset, a TLS failure, a handshake timeout: the connection just ends
            pass
        except Exception as exc:  # anything else ends this session only, said in one line rather than a traceback
            print(f"coopsim host: a framed session ended on {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        finally:
            with contextlib.suppress(OSError):
                conn.close()
            with self.host.lock:
                self.connections -= 1

    def _open(self, conn: socket.socket, reader: FrameReader) -> _Session | None:
        """Read the preamble and the token, take a session slot and answer the handshake; None when refused."""
        if reader.body(len(PREAMBLE)) != PREAMBLE:
            conn.sendall(_status_frame("INVALID_ARGUMENT", f"not a coopsim framed-TCP client: a session starts with "
                                                           f"{PREAMBLE!r}"))
            return None
        size = reader.length()
        if size is None:
            return None
        if size > MAX_TOKEN_BYTES:
            conn.sendall(_status_frame("INVALID_ARGUMENT", f"an authentication frame of {size} bytes, more than "
                                                           f"{MAX_TOKEN_BYTES}"))
            return None
        token = reader.body(size)
        if token is None:
            return None
        if self.expected is not None:
            refusal = token_refusal(token or None, self.expected)
            if refusal is not None:
                conn.sendall(_status_frame("UNAUTHENTICATED", refusal))
                return None
        state = _Session(self.host, _Connection(conn, self.tls is not None))  # type: ignore[arg-type]
        with self.host.lock:
            full = len(self.host.sessions) >= self.max_sessions
            if not full:
                self.host.sessions.add(state)
        if full:
            conn.sendall(_status_frame("RESOURCE_EXHAUSTED", f"this host serves {self.max_sessions} federates at "
                                                             "once (--max-sessions) and all are in use"))
            return None
        # from here silence is bounded by the idle watcher, which counts only the time spent waiting for a request
        conn.settimeout(POLL_S if self.tls is not None else None)
        try:
            conn.sendall(frame(b""))  # an empty Reply: the session is open
        except OSError:  # gone already: free the slot
            with self.host.lock:
                self.host.sessions.discard(state)
            raise
        return state

    def _run(self, state: _Session, conn: socket.socket, reader: FrameReader) -> None:
        """Answer the session's requests in order until the client closes it, then release what it holds."""
        limit, stopped = self.host.max_message_bytes, self.host.stopped
        try:
            while True:
                state.waiting_since = time.monotonic()
                size = _polled(reader.length, state)
                if size is None:
                    break
                if size > limit:  # refused before a byte of the body is read or buffered
                    _send(conn, _status_frame("RESOURCE_EXHAUSTED", f"a request of {size} bytes, more than this "
                                                                    f"host's limit of {limit} (--max-message-mb)"),
                          stopped)
                    break
                body = _polled(lambda size=size: reader.body(size), state)
                if body is None:
                    break
                state.waiting_since = None
                reply, more = answer(state, body)
                _send(conn, frame(reply), stopped)
                if not more:
                    break
            if state.idle_closed:  # the client learns why at its next call
                why = ("the host is stopping" if stopped.is_set() else
                       f"the session was silent for more than {self.host.idle_timeout_s:g} s (--idle-timeout-s)")
                with contextlib.suppress(OSError):
                    conn.settimeout(1.0)
                    conn.sendall(_status_frame("CANCELLED", f"this host closed the session: {why}"))
        finally:  # the client went away without finalize: release what the federate holds
            with self.host.lock:
                self.host.sessions.discard(state)
            state.close()

    def stop(self) -> None:
        """Stop accepting and end every session: one waiting for a request at once, one inside a call after it."""
        self.stopped_at = time.monotonic()
        self.host.stopped.set()
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self.listener.close()
        with self.host.lock:
            sessions = list(self.host.sessions)
        for session in sessions:
            session.idle_closed = True
            session.context.cancel()

    def wait(self, timeout_s: float) -> bool:
        """Wait until ``timeout_s`` after :meth:`stop` for the sessions to end, remove the temporary directories
        of those that did not; whether all ended."""
        deadline = self.stopped_at + timeout_s
        while time.monotonic() < deadline:
            with self.host.lock:
                if not self.host.sessions:
                    break
            time.sleep(0.01)
        self.host.remove_session_dirs()
        with self.host.lock:
            return not self.host.sessions

    def shutdown(self, timeout_s: float = SHUTDOWN_GRACE_S + 0.15) -> bool:
        """:meth:`stop`, then :meth:`wait`."""
        self.stop()
        return self.wait(timeout_s)


def serve_framed(listen: str, max_sessions: int = 8, allow: Sequence[str] = (), *,
                 allow_paths: Sequence[str | Path] = (), allow_brokers: Sequence[str] = (),
                 out_root: str | Path | None = None, max_message_mb: float = 8.0, idle_timeout_s: float = 120.0,
                 token: str | None = None, tls_cert: str | Path | None = None,
                 tls_key: str | Path | None = None) -> FramedServer:
    """Start a framed-TCP host on ``listen`` ("host:port"; port 0 picks a free one) with the options and rules of
    :func:`federates.remote.host.serve`, and return it running. Without ``token`` only a loopback address is
    accepted (RuntimeError naming ``COOPSIM_TOKEN``)."""
    host = make_host(listen, max_sessions, allow, allow_paths, allow_brokers, out_root, max_message_mb,
                     idle_timeout_s, token, tls_cert, tls_key)
    tls = None
    if tls_cert is not None and tls_key is not None:
        try:
            tls = ssl_server_context(tls_cert, tls_key)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"--tls-cert/--tls-key: cannot load them ({exc})") from None
    server = FramedServer(host, listen, max_sessions, token, tls)
    server.start()
    return server
