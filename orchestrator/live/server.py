"""The live view's server: the page over plain HTTP at ``/``, the frames over a websocket at ``/ws``.

Threads, none of them the scheduler's: the server's accept loop, one per connected viewer (websockets' threaded
server), and one encoder that turns the newest snapshot into a JSON frame once for all viewers. A slow viewer skips
frames (each sends the newest it has not sent yet); nothing queues.

Who may look (as ``coopsim host`` decides it, ``core.auth``):

- bound to loopback (the default, 127.0.0.1), no token is needed unless ``COOPSIM_TOKEN`` is set; the ``Host``
  header must then name a loopback address and a websocket's ``Origin`` this very page, so a web page elsewhere
  cannot read the run through the browser (DNS rebinding, cross-site websockets);
- bound anywhere else, ``COOPSIM_TOKEN`` is required (the server refuses to start without it);
- with a token, the page and the websocket both need ``?token=...`` (the printed address carries it; the page
  passes it on), compared in constant time. Missing: 401; wrong: 403.
"""

from __future__ import annotations

import hmac
import http
import sys
import threading
import time
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from core.auth import TOKEN_ENV, is_loopback, token_from_env

from .frames import LinkWindow, frame_message, roster_message
from .snapshot import DEFAULT_RATE_HZ, DEFAULT_WINDOW_S, LiveObserver, Mailbox, RosterBook, Watchers

DEFAULT_PORT = 8765
"""``--live`` without a port; 0 asks the system for any free one."""

_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


class LiveViewError(RuntimeError):
    """The live view cannot start as asked (no token beyond loopback, port taken, websockets missing)."""


def page_html() -> bytes:
    """The page, shipped as package data (self-contained: no request leaves the viewer's machine)."""
    return resources.files(__package__).joinpath("page.html").read_bytes()


class LiveServer:
    """Serves a running simulation to browsers. ``start()`` binds, ``observer()`` is what the scheduler calls,
    ``close()`` lets viewers receive the final frame and stops every thread."""

    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, token: str | None = None,
                 rate_hz: float = DEFAULT_RATE_HZ, window_s: float = DEFAULT_WINDOW_S) -> None:
        if token is None and not is_loopback(f"{host}:{port}"):
            raise LiveViewError(
                f"the live view on {host} reaches beyond loopback and needs a token: set {TOKEN_ENV} (e.g. export "
                f"{TOKEN_ENV}=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')), or leave "
                "--live-host at 127.0.0.1")
        self.host = host
        self.port = port
        self.token = token
        self.loopback = is_loopback(f"{host}:{port}")
        self.watchers = Watchers()
        self.roster = RosterBook()
        self.mailbox = Mailbox(round(window_s * 1e9))
        self.rate_hz = rate_hz
        self._page = page_html()
        self._cond = threading.Condition()
        self._frame: tuple[str, bool] | None = None  # (JSON text, whether it is the run's final frame)
        self._frame_seq = 0
        self._roster_msg: tuple[int, str] | None = None
        self._final_sent = threading.Event()
        self._closing = False
        self._encode_failed = False  # said once on stderr
        self._server: Any = None
        self._threads: list[threading.Thread] = []

    # -- life cycle ---------------------------------------------------------------------------------------------
    def start(self) -> LiveServer:
        """Bind and start serving (LiveViewError when the address cannot be bound or websockets is missing)."""
        try:
            from websockets.sync.server import serve
        except ImportError:
            raise LiveViewError("the live view needs the websockets package: pip install 'coopsim[live]'") from None
        try:
            self._server = serve(self._serve_viewer, self.host, self.port, process_request=self._process_request,
                                 compression=None, server_header=None, max_size=4096)
        except OSError as exc:
            raise LiveViewError(f"the live view cannot listen on {self.host}:{self.port}: {exc.strerror or exc}") \
                from None
        self.port = self._server.socket.getsockname()[1]
        for target, name in ((self._server.serve_forever, "live-accept"), (self._encode, "live-encode")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    @property
    def url(self) -> str:
        """Where a browser opens the view (with the token when one is set)."""
        host = self.host if self.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        query = f"?token={quote(self.token, safe='')}" if self.token else ""
        return f"http://{host}:{self.port}/{query}"

    def observer(self) -> LiveObserver:
        """The scheduler observer that feeds this server."""
        return LiveObserver(self.mailbox, self.watchers, self.roster, self.rate_hz)

    def close(self, linger_s: float = 1.0) -> None:
        """Stop serving; connected viewers first get up to ``linger_s`` to receive the final frame."""
        if self._server is None:
            return
        deadline = time.monotonic() + linger_s
        while self.watchers.watched and not self._final_sent.wait(0.05) and time.monotonic() < deadline:
            pass  # a viewer that left stops counting within a quarter second
        self.mailbox.close()
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._server.shutdown()
        for thread in self._threads:
            thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- encoder thread -----------------------------------------------------------------------------------------
    def _encode(self) -> None:
        links = LinkWindow(self.mailbox.window_ns)
        predecessors: dict[int, int | None] = {}
        roster_version = -1
        while True:
            snap = self.mailbox.take(timeout=0.5)
            if snap is None:
                if self.mailbox.closed:
                    return
                continue
            if snap.roster_version != roster_version:
                roster_version, specs = self.roster.specs()
                predecessors = {int(s.id): s.predecessor for s in specs}
                with self._cond:
                    self._roster_msg = (roster_version, roster_message(specs, roster_version))
            try:
                text = frame_message(snap, predecessors, links)
            except Exception as exc:  # a bad frame must not end the view, and never the run
                if not self._encode_failed:
                    print(f"warning: the live view skips a frame it cannot encode: {type(exc).__name__}: {exc}",
                          file=sys.stderr)
                    self._encode_failed = True
                continue
            with self._cond:
                self._frame = (text, snap.final)
                self._frame_seq += 1
                self._cond.notify_all()
            if snap.final and not self.watchers.watched:
                self._final_sent.set()

    # -- one thread per viewer ----------------------------------------------------------------------------------
    def _serve_viewer(self, connection: Any) -> None:
        from websockets.exceptions import ConnectionClosed

        self.watchers.joined()
        sent_seq, sent_roster = 0, -1
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda seen=sent_seq: self._closing or self._frame_seq != seen, timeout=0.25)
                    if self._closing:
                        return
                    if connection.close_code is not None:  # the viewer left: stop counting it as watching
                        return
                    seq, frame, roster = self._frame_seq, self._frame, self._roster_msg
                if roster is not None and roster[0] != sent_roster:
                    connection.send(roster[1])
                    sent_roster = roster[0]
                if frame is not None and seq != sent_seq:
                    connection.send(frame[0])
                    sent_seq = seq
                    if frame[1]:
                        self._final_sent.set()
        except ConnectionClosed:
            pass
        finally:
            self.watchers.left()

    # -- HTTP: the page, and the checks before a websocket opens ------------------------------------------------
    def _process_request(self, connection: Any, request: Any) -> Any:
        url = urlsplit(request.path)
        host_header = request.headers.get("Host", "")
        if self.loopback and _host_name(host_header) not in _LOOPBACK_NAMES:
            return _respond(http.HTTPStatus.FORBIDDEN, b"this view answers only to a loopback Host\n")
        if self.token is not None:
            sent = parse_qs(url.query).get("token", [None])[0]
            if sent is None:
                return _respond(http.HTTPStatus.UNAUTHORIZED, f"a token is needed: ?token=<{TOKEN_ENV}>\n".encode())
            if not hmac.compare_digest(sent.encode(), self.token.encode()):
                return _respond(http.HTTPStatus.FORBIDDEN, b"wrong token\n")
        if url.path in ("/", "/index.html"):
            return _respond(http.HTTPStatus.OK, self._page, "text/html; charset=utf-8")
        if url.path == "/ws":
            origin = request.headers.get("Origin")
            if origin is not None and origin != f"http://{host_header}":
                return _respond(http.HTTPStatus.FORBIDDEN, b"a websocket from another origin\n")
            return None  # on to the websocket handshake
        return _respond(http.HTTPStatus.NOT_FOUND, b"not found\n")


def _host_name(host_header: str) -> str:
    """The name or address in a ``Host`` header, port and brackets removed."""
    if host_header.startswith("["):
        return host_header[1:].split("]", 1)[0]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


def _respond(status: http.HTTPStatus, body: bytes, content_type: str = "text/plain; charset=utf-8") -> Any:
    from websockets.datastructures import Headers
    from websockets.http11 import Response

    headers = Headers([
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        ("Cache-Control", "no-store"),
        ("X-Content-Type-Options", "nosniff"),
        # the page loads nothing: no script, style or image from anywhere but itself, and talks only to this server
        ("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                    "connect-src 'self'; img-src data:"),
        ("Connection", "close"),
    ])
    return Response(status.value, status.phrase, headers, body)


def start_live_view(port: int = DEFAULT_PORT, host: str = "127.0.0.1") -> LiveServer:
    """Start a live view on ``host:port`` with the token of ``COOPSIM_TOKEN`` (required beyond loopback)."""
    return LiveServer(host, port, token_from_env()).start()
