"""Jamming: a transmitter that puts power on the channel instead of messages (Amoozadeh et al., IEEE Commun. Mag.
2015; van der Heijden et al., VNC 2017 on platoons). Three models the literature uses: constant (on for the whole
window), periodic (on for ``duty_cycle`` of every ``period_s``) and reactive (on while a given station transmits).

A jammer forges nothing: the channel model adds its power at every station it reaches (``JammerSpec``), as
interference in the SINR of every frame it overlaps and, above the carrier-sense level, as a busy medium, so it
hits reception and channel access alike. It transmits from a fixed point (``x_m``, ``y_m``) or from the robot of
its scenario entry, moving with it (that robot's own radio hears it too, as a jammer on board would).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pydantic import Field, model_validator

from .base import Attack, AttackContext, AttackParams

JAM_MODES = ("constant", "periodic", "reactive")
"""The jammer models, in the order of the channel kernel's codes (``comms_models.itsg5.access.JAM_*``)."""


class JammingParams(AttackParams):
    power_dbm: float = Field(23.0, ge=-30.0, le=60.0, description="[dBm] transmit power (EIRP; ETSI allows a "
                             "station 33 dBm, a jammer obeys no limit)")
    x_m: float | None = Field(None, ge=-1e6, le=1e6, description="[m] east position of a fixed jammer (with y_m); "
                              "absent: it rides on the entry's robot")
    y_m: float | None = Field(None, ge=-1e6, le=1e6, description="[m] north position of a fixed jammer")

    @model_validator(mode="after")
    def _both_or_neither(self) -> JammingParams:
        if (self.x_m is None) != (self.y_m is None):
            raise ValueError("give both x_m and y_m (a fixed jammer) or neither (it rides on the robot)")
        return self


class PeriodicJammingParams(JammingParams):
    period_s: float = Field(0.1, ge=1e-5, le=3600.0, description="[s] period of the on/off cycle")
    duty_cycle: float = Field(0.5, gt=0.0, lt=1.0, description="fraction of each period it transmits, at its start")


class ReactiveJammingParams(JammingParams):
    target: str = Field(description="name of the robot whose frames it jams: it transmits while they are on air")


@dataclass(frozen=True)
class JammerSpec:
    """What the channel needs of a jammer: its model (``JAM_MODES``), power, window [from_ns, to_ns), where it is
    (a fixed point, or ``robot``'s position when ``x_m`` is None), its period and on-time (periodic) and its target
    (reactive; -1 otherwise)."""

    mode: str
    power_dbm: float
    from_ns: int
    to_ns: int
    robot: int
    x_m: float | None
    y_m: float | None
    period_ns: int = 0
    on_ns: int = 0
    target: int = -1


class Jamming(Attack):
    """Base of the jammers: they act on the air (``message`` "air"), never on a message's content."""

    Params: ClassVar[type[AttackParams]] = JammingParams
    message = "air"
    mode: ClassVar[str] = "constant"

    @classmethod
    def needs_robot(cls, params: AttackParams) -> bool:
        return params.x_m is None  # type: ignore[attr-defined]

    def jammer(self) -> JammerSpec:
        """This jammer as the channel model takes it."""
        p, c = self.params, self.ctx
        return JammerSpec(self.mode, p.power_dbm, c.from_ns, c.to_ns, c.robot, p.x_m, p.y_m,  # type: ignore
                          **self._timing())

    def _timing(self) -> dict[str, int]:
        return {}


class ConstantJamming(Jamming):
    """On for the whole window."""

    mode = "constant"


class PeriodicJamming(Jamming):
    """On for the first ``duty_cycle`` of each ``period_s`` from the window's start."""

    Params = PeriodicJammingParams
    mode = "periodic"

    def _timing(self) -> dict[str, int]:
        period = max(1, round(self.params.period_s * 1e9))  # type: ignore[attr-defined]
        on = min(max(1, round(self.params.duty_cycle * period)), period - 1)  # type: ignore[attr-defined]
        return {"period_ns": period, "on_ns": on}


class ReactiveJamming(Jamming):
    """On while a frame of the target station is on air (within the window): it jams that frame, and whatever
    overlaps it, and leaves the rest of the channel alone. An ideal reactive jammer: it reacts at the frame's
    first instant (a real one needs the preamble, a few microseconds, still within the frame's header)."""

    Params = ReactiveJammingParams
    mode = "reactive"

    def __init__(self, params: ReactiveJammingParams, ctx: AttackContext) -> None:
        super().__init__(params, ctx)
        if params.target not in ctx.ids_of:
            raise ValueError(f"jamming_reactive: no robot named '{params.target}'")

    def _timing(self) -> dict[str, int]:
        return {"target": int(self.ctx.ids_of[self.params.target])}  # type: ignore[attr-defined]
