"""Who may talk to a ``coopsim host``: a shared token and optional TLS, read from the environment on the client.

- ``COOPSIM_TOKEN``: the shared secret. The client sends it as ``authorization: Bearer <token>`` call metadata
  (gRPC) or in the authentication frame (framed TCP); the host compares it in constant time
  (``hmac.compare_digest``) before any session starts. Required on a host that listens beyond loopback; used
  when set on loopback.
- ``COOPSIM_TLS_CA``: on the client, a PEM file of the certificate (or its CA) the host presents; with it the
  client connects over TLS. ``COOPSIM_TLS_SERVER_NAME`` overrides the name checked against the certificate.
- The host takes ``--tls-cert`` and ``--tls-key`` (PEM files), for both transports.

Tokens and certificates never come from a scenario: a scenario is shared, the environment is not.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import ssl
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import grpc

TOKEN_ENV = "COOPSIM_TOKEN"
TLS_CA_ENV = "COOPSIM_TLS_CA"
TLS_SERVER_NAME_ENV = "COOPSIM_TLS_SERVER_NAME"
_METADATA_KEY = "authorization"


def token_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """The token in ``COOPSIM_TOKEN`` (None when unset or empty)."""
    token = (os.environ if env is None else env).get(TOKEN_ENV, "").strip()
    return token or None


def token_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """The call metadata that carries ``token`` (none without a token)."""
    return ((_METADATA_KEY, f"Bearer {token}"),) if token else ()


def listen_host(listen: str) -> str:
    """The host part of a ``host:port`` listen address, brackets removed (``''`` for all interfaces)."""
    host = listen.rsplit(":", 1)[0] if ":" in listen else listen
    return host.strip("[]")


def is_loopback(listen: str) -> bool:
    """Whether a listen address keeps the server off the network (127.0.0.0/8, ::1 or ``localhost``)."""
    host = listen_host(listen)
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name other than localhost, or '' (every interface): may be reachable from elsewhere
        return False


def require_token_beyond_loopback(listen: str, token: str | None) -> None:
    """Refuse to serve beyond loopback without a token (RuntimeError saying how to set one)."""
    if token is None and not is_loopback(listen):
        raise RuntimeError(
            f"listening on {listen} reaches beyond loopback and needs a token: set {TOKEN_ENV} in the host's "
            f"environment and in every orchestrator's that connects, e.g. export {TOKEN_ENV}=$(python3 -c "
            "'import secrets; print(secrets.token_urlsafe(32))'), or listen on 127.0.0.1")


def _refuse(details: str) -> grpc.RpcMethodHandler:
    def behaviour(requests: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, details)

    return grpc.stream_stream_rpc_method_handler(behaviour)


def token_refusal(sent: bytes | None, expected: bytes) -> str | None:
    """Why a client that sent ``sent`` (None: nothing) is refused by a host expecting ``expected``, or None when
    they match (constant-time comparison)."""
    if sent is None:
        return f"this host needs a token: set {TOKEN_ENV} in the orchestrator's environment"
    if not hmac.compare_digest(sent, expected):
        return f"wrong token: {TOKEN_ENV} differs from the host's"
    return None


class TokenInterceptor(grpc.ServerInterceptor):
    """Lets a call through only when its metadata carries the host's token (constant-time comparison)."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
                          handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        sent = dict(handler_call_details.invocation_metadata or ()).get(_METADATA_KEY)
        got = sent.encode() if isinstance(sent, str) else None if sent is None else bytes(sent)
        refusal = token_refusal(got, self._expected)
        if refusal is not None:
            return _refuse(refusal)
        return continuation(handler_call_details)


def server_credentials(cert: str | Path, key: str | Path) -> grpc.ServerCredentials:
    """TLS credentials of a host from PEM files."""
    return grpc.ssl_server_credentials([(Path(key).read_bytes(), Path(cert).read_bytes())])


def client_tls(env: Mapping[str, str] | None = None) -> tuple[grpc.ChannelCredentials | None, list[tuple[str, Any]]]:
    """The client's TLS credentials from ``COOPSIM_TLS_CA`` (None: plain TCP) and the channel options they need."""
    env = os.environ if env is None else env
    ca = env.get(TLS_CA_ENV, "").strip()
    if not ca:
        return None, []
    try:
        credentials = grpc.ssl_channel_credentials(root_certificates=Path(ca).read_bytes())
    except OSError as exc:
        raise RuntimeError(f"{TLS_CA_ENV}={ca}: cannot read it ({exc.strerror})") from None
    name = env.get(TLS_SERVER_NAME_ENV, "").strip()
    return credentials, [("grpc.ssl_target_name_override", name)] if name else []


def ssl_server_context(cert: str | Path, key: str | Path) -> ssl.SSLContext:
    """The TLS context of a framed-TCP host from PEM files."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def ssl_client_context(env: Mapping[str, str] | None = None) -> tuple[ssl.SSLContext | None, str | None]:
    """The framed-TCP client's TLS context from ``COOPSIM_TLS_CA`` (None: plain TCP) and the name to check
    (``COOPSIM_TLS_SERVER_NAME``; None: the address's host)."""
    env = os.environ if env is None else env
    ca = env.get(TLS_CA_ENV, "").strip()
    if not ca:
        return None, None
    try:
        context = ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise RuntimeError(f"{TLS_CA_ENV}={ca}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    return context, env.get(TLS_SERVER_NAME_ENV, "").strip() or None
