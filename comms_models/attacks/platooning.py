"""Platooning attacks on the desired acceleration a platooning message carries (the feed-forward term of CACC laws):
van der Heijden, Lukaseder and Kargl (VNC 2017) found falsified acceleration of the predecessor or leader the most
effective attack on feed-forward laws; Dadras, Gerdes and Sharma (AsiaCCS 2015) showed that an insider varying it
periodically, at the frequency where the string amplifies most, destabilises a platoon."""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from .base import Attack, AttackParams


class ConstantDesiredAccelParams(AttackParams):
    u_mps2: float = Field(2.0, ge=-20, le=20, description="[m/s^2] the desired acceleration every PM reports")


class ConstantDesiredAccel(Attack):
    """Every platooning message reports the same desired acceleration."""

    Params = ConstantDesiredAccelParams
    message = "pm"

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"u_des": np.full_like(values["u_des"], self.params.u_mps2)}  # type: ignore[attr-defined]


class SinusoidalDesiredAccelParams(AttackParams):
    amplitude_mps2: float = Field(1.0, gt=0, le=20, description="[m/s^2] amplitude of the reported sinusoid")
    frequency_hz: float = Field(0.2, gt=0, le=50, description="[Hz] its frequency (pick the platoon's most "
                                "amplified one)")
    offset_mps2: float = Field(0.0, ge=-20, le=20, description="[m/s^2] added to it")
    add_to_true: bool = Field(False, description="add the sinusoid to the true desired acceleration instead of "
                              "replacing it")


class SinusoidalDesiredAccel(Attack):
    """The reported desired acceleration is offset + amplitude sin(2 pi f (t - start))."""

    Params = SinusoidalDesiredAccelParams
    message = "pm"

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = self.params
        tau = (t_ns - self.ctx.from_ns) / 1e9
        wave = p.offset_mps2 + p.amplitude_mps2 * math.sin(2.0 * math.pi * p.frequency_hz * tau)  # type: ignore
        base = np.nan_to_num(values["u_des"]) if p.add_to_true else 0.0  # type: ignore[attr-defined]
        return {"u_des": base + np.full_like(values["u_des"], wave)}
