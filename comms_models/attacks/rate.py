"""Attacks on the message rate and on identities: denial of service by a raised beacon rate, and a ghost vehicle
(Sybil: frames under a fabricated station id describing a vehicle that does not exist), both from the VeReMi
extension's catalogue (Kamel et al., ICC 2020). Added frames go through the station's own queue and radio: a ghost
frame queued while the station's own CAM still waits replaces it, as one CAM queue per station holds one frame."""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from .base import Attack, AttackContext, AttackParams


class _Periodic(Attack):
    """Added frames every ``1 / rate_hz`` from the attack's start."""

    extra_frames = True

    def __init__(self, params: AttackParams, ctx: AttackContext) -> None:
        super().__init__(params, ctx)
        self.period_ns = max(1, round(1e9 / params.rate_hz))  # type: ignore[attr-defined]
        self.next_ns = ctx.from_ns

    def extra_due(self, t_ns: int) -> bool:
        if not self.ctx.active(t_ns) or t_ns < self.next_ns:
            return False
        self.next_ns += self.period_ns * (1 + (t_ns - self.next_ns) // self.period_ns)
        return True


class DenialOfServiceParams(AttackParams):
    rate_hz: float = Field(50.0, gt=0, le=1000, description="[Hz] CAMs per second, beside the regular ones (the "
                           "V2X step bounds it)")


class DenialOfService(_Periodic):
    """DoS: the station sends true CAMs at a raised rate, ignoring the generation rules and DCC."""

    Params = DenialOfServiceParams


class GhostVehicleParams(AttackParams):
    station_id: int | None = Field(None, ge=0, le=2**32 - 1, description="the fabricated station id (default "
                                   "900000 + the attacker's id)")
    ahead_m: float = Field(10.0, ge=-1e4, le=1e4, description="[m] the ghost starts this far ahead of the attacker, "
                           "along the attacker's heading at the attack's start")
    speed_mps: float | None = Field(None, ge=0, le=163.8, description="[m/s] the ghost's speed at the start "
                                    "(default: the attacker's)")
    decel_mps2: float = Field(0.0, ge=0, le=20, description="[m/s^2] the ghost brakes this hard ...")
    brake_after_s: float = Field(0.0, ge=0, description="[s] ... from this long after the attack's start")
    rate_hz: float = Field(10.0, gt=0, le=1000, description="[Hz] the ghost's CAM rate")


class GhostVehicle(_Periodic):
    """A ghost on a straight line ahead of the attacker, driving at a constant speed, then braking to a stop; its
    CAMs are the attacker's added frames under the fabricated id. The attacker's own CAMs stay honest."""

    Params = GhostVehicleParams
    only_extra = True

    def __init__(self, params: GhostVehicleParams, ctx: AttackContext) -> None:
        super().__init__(params, ctx)
        self.anchor: tuple[float, float, float, float] | None = None  # x, y, yaw, v at the first ghost frame

    def claimed_id(self) -> int | None:
        p = self.params
        return int(p.station_id) if p.station_id is not None else 900_000 + self.ctx.robot  # type: ignore[attr-defined]

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = self.params
        if self.anchor is None:
            v0 = float(values["v"][0]) if p.speed_mps is None else p.speed_mps  # type: ignore[attr-defined]
            self.anchor = (float(values["x"][0]), float(values["y"][0]), float(values["yaw"][0]), v0)
        x0, y0, yaw, v0 = self.anchor
        tau = (t_ns - self.ctx.from_ns) / 1e9
        tb, d = p.brake_after_s, p.decel_mps2  # type: ignore[attr-defined]
        braking = max(tau - tb, 0.0)
        if d > 0:
            braking = min(braking, v0 / d)  # stopped after v0 / d
        s = p.ahead_m + v0 * min(tau, tb) + v0 * braking - 0.5 * d * braking**2  # type: ignore[attr-defined]
        v = max(v0 - d * max(tau - tb, 0.0), 0.0)
        a = -d if (tau > tb and v > 0) else 0.0
        k = len(values["x"])
        return {"x": np.full(k, x0 + s * math.cos(yaw)), "y": np.full(k, y0 + s * math.sin(yaw)),
                "yaw": np.full(k, yaw), "v": np.full(k, v), "a": np.full(k, a), "yaw_rate": np.zeros(k)}
