"""The CAN bridge's parameters (the scenario's ``params:``), validated with messages that name the field."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class CanParams(BaseModel):
    """Parameters of ``type: can`` (``docs/bridges.md``, section CAN)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    interface: str = Field("virtual", min_length=1, description="python-can interface: virtual (in this process), "
                           "udp_multicast (between processes), socketcan, or any other python-can backend")
    channel: str | None = Field(None, description="python-can channel; default: 'coopsim' on virtual, the "
                                "interface's own default otherwise (udp_multicast: use an ff11:: group to stay on "
                                "this host)")
    bitrate: int = Field(500_000, gt=0, le=8_000_000, description="[bit/s] given to interfaces that set it, and used "
                         "for the bus load estimate")
    bus_options: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="further keyword arguments of can.Bus (e.g. port for udp_multicast)")
    period_s: float = Field(0.02, gt=0, description="[s] bridge period: send the state frames, take commands")
    mode: Literal["free", "lockstep"] = Field(
        "free", description="free: apply the newest valid command that arrived since the last period; lockstep: "
        "wait each period for every driven robot's command echoing the period's counter")
    lockstep_timeout_s: float = Field(10.0, gt=0, le=3600, description="[s] wall time to wait for a period's "
                                      "commands before the run fails")
    state_port: Literal["state", "estimate"] = Field(
        "state", description="what the state frames carry: ground truth (state) or the robot's own estimate")
    log: Literal["asc", "blf", "none"] = Field("asc", description="bus log in the run directory: "
                                               "can/<bridge>.asc (Vector ASC) or .blf, or none")

    @model_validator(mode="after")
    def _consistent(self) -> CanParams:
        reserved = {"interface", "channel", "bitrate", "receive_own_messages"} & self.bus_options.keys()
        if reserved:
            raise ValueError(f"bus_options must not repeat {sorted(reserved)}: they are parameters of their own "
                             "(receive_own_messages is always false)")
        return self
