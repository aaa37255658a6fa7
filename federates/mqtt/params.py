"""The MQTT bridge's parameters (the scenario's ``params:``), validated with messages that name the field, and the
credentials and TLS files it takes from the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from core.params import raise_at

ENV_USERNAME = "COOPSIM_MQTT_USERNAME"
ENV_PASSWORD = "COOPSIM_MQTT_PASSWORD"
ENV_TLS = {"ca_file": "COOPSIM_MQTT_CA_FILE", "cert_file": "COOPSIM_MQTT_CERT_FILE",
           "key_file": "COOPSIM_MQTT_KEY_FILE", "insecure": "COOPSIM_MQTT_TLS_INSECURE"}
"""Environment variables of the TLS options; any of them set turns TLS on, scenario values win."""

_SECRET_KEYS = ("password", "passwd", "pass", "pw")


class TlsParams(BaseModel):
    """``tls:``: TLS to the broker (an empty mapping: TLS with the system's trusted CAs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ca_file: str | None = Field(None, description="PEM file of the CA(s) that signed the broker's certificate "
                                "(default: the system's trusted CAs)")
    cert_file: str | None = Field(None, description="PEM client certificate, for brokers that require one")
    key_file: str | None = Field(None, description="PEM private key of cert_file (if not inside it)")
    insecure: bool = Field(False, description="skip the check that the broker's certificate names its host "
                           "(testing only: anyone can then pose as the broker)")

    @field_validator("ca_file", "cert_file", "key_file")
    @classmethod
    def _readable(cls, value: str | None) -> str | None:
        if value is not None and not Path(value).expanduser().is_file():
            raise ValueError(f"no such file: '{value}'")
        return value

    @model_validator(mode="after")
    def _pair(self) -> TlsParams:
        if self.key_file is not None and self.cert_file is None:
            raise_at("TlsParams", [(("key_file",), "needs cert_file (the certificate the key belongs to)",
                                    self.key_file)])
        return self


class MqttParams(BaseModel):
    """Parameters of ``type: mqtt`` (``docs/bridges.md``, section MQTT, has the whole story)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    broker: str = Field("127.0.0.1:1883", description="the broker as host:port")
    period_s: float = Field(0.1, gt=0, description="[s] bridge period: publish, take commands")
    ports: tuple[str, ...] = Field(("state", "cam_rx"), min_length=1, description="ports published per robot on "
                                   "<prefix>/<robot>/<port>: robot-indexed ones (state, estimate, range, ...) and "
                                   "cam_rx (the V2X messages each robot received since the last period)")
    topic_prefix: str = Field("coopsim", min_length=1, description="first level(s) of every topic")
    qos: int = Field(0, ge=0, le=2, description="MQTT QoS of what the bridge publishes and of its command "
                     "subscription")
    mode: Literal["free", "lockstep"] = Field(
        "free", description="free: each period takes the newest command per robot that arrived; lockstep: each "
        "period waits for every driven robot's command whose t is the period's time")
    lockstep_timeout_s: float = Field(10.0, gt=0, le=3600, description="[s] wall time to wait for a lock-step "
                                      "period's commands before the run fails")
    connect_timeout_s: float = Field(10.0, gt=0, le=3600, description="[s] wall time to reach the broker at set-up")
    on_broker_unavailable: Literal["fail", "continue"] = Field(
        "fail", description="a broker not reached within connect_timeout_s: fail the run, or go on without it "
        "(the bridge keeps trying in the background)")
    reconnect_min_s: float = Field(0.1, gt=0, le=60, description="[s] first wait before reconnecting after the "
                                   "broker went away; doubled after each failed attempt")
    reconnect_max_s: float = Field(5.0, gt=0, le=600, description="[s] longest wait between reconnect attempts")
    keepalive_s: int = Field(10, ge=1, le=65535, description="[s] MQTT keep-alive: a silent broker is given up "
                             "after 1.5 times this")
    max_payload_bytes: int = Field(1024, ge=64, le=1_048_576, description="[bytes] longer command payloads are "
                                   "ignored (too_large)")
    username: str | None = Field(None, min_length=1, description="user name at the broker (default: the "
                                 f"environment's {ENV_USERNAME}); the password only ever comes from {ENV_PASSWORD}")
    tls: TlsParams | None = Field(None, description="TLS to the broker (see TlsParams); also from the environment")

    @model_validator(mode="before")
    @classmethod
    def _no_secrets(cls, data: Any) -> Any:
        if isinstance(data, dict):
            secret = [k for k in data if str(k).lower() in _SECRET_KEYS and data[k] is not None]
            if secret:  # the value is never echoed: the error goes to logs and terminals
                raise_at("MqttParams", [((secret[0],), f"a password must not be in the scenario file: set the "
                                         f"environment variable {ENV_PASSWORD} instead", "<hidden>")])
        return data

    @field_validator("broker")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, _, port = value.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"must be 'host:port' with a port in 1-65535, got '{value}'")
        return value

    @field_validator("topic_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        value = value.strip("/")
        if not value or any(c in value for c in "+#\0"):
            raise ValueError(f"must be topic levels without wildcards (+, #), got '{value}'")
        return value

    @field_validator("ports")
    @classmethod
    def _once(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"lists a port twice: {list(value)}")
        if "cmd" in value:
            raise ValueError("'cmd' is the command topic of each robot, not a port to publish")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> MqttParams:
        if self.reconnect_min_s > self.reconnect_max_s:
            raise_at("MqttParams", [(("reconnect_min_s",), f"must not exceed reconnect_max_s "
                                     f"({self.reconnect_max_s:g}), got {self.reconnect_min_s:g}",
                                     self.reconnect_min_s)])
        return self

    @property
    def host(self) -> str:
        """The broker's host name or address."""
        return self.broker.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        """The broker's TCP port."""
        return int(self.broker.rpartition(":")[2])


@dataclass(frozen=True)
class Credentials:
    """What the bridge logs in with: the user name (scenario or environment) and the password (environment)."""

    username: str | None
    password: str | None

    def __repr__(self) -> str:  # never print the password
        return f"Credentials(username={self.username!r}, password={'set' if self.password else 'unset'})"


def credentials(params: MqttParams, env: dict[str, str] | None = None) -> Credentials:
    """The user name from the scenario or ``COOPSIM_MQTT_USERNAME``, the password from ``COOPSIM_MQTT_PASSWORD``."""
    env = dict(os.environ) if env is None else env
    username = params.username or env.get(ENV_USERNAME) or None
    password = env.get(ENV_PASSWORD) or None
    if password is not None and username is None:
        raise ValueError(f"{ENV_PASSWORD} is set but no user name: set {ENV_USERNAME} or the bridge's 'username'")
    return Credentials(username, password)


def tls_options(params: MqttParams, env: dict[str, str] | None = None) -> TlsParams | None:
    """The TLS options: the scenario's ``tls:`` completed from the environment; None when neither asks for TLS."""
    env = dict(os.environ) if env is None else env
    from_env: dict[str, Any] = {}
    for key, var in ENV_TLS.items():
        value = env.get(var)
        if value:
            from_env[key] = value.lower() in ("1", "true", "yes") if key == "insecure" else value
    if params.tls is None and not from_env:
        return None
    given = params.tls.model_dump(exclude_defaults=True) if params.tls is not None else {}
    try:
        return TlsParams(**{**from_env, **given})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False))
        raise ValueError(f"TLS options from the environment ({', '.join(sorted(ENV_TLS.values()))}): "
                         f"{problems}") from None
