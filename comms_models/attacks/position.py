"""Position attacks of the VeReMi families (van der Heijden et al., SecureComm 2018; Kamel et al., ICC 2020): the
station reports a fixed position, its true position shifted by a fixed offset, a random position, its true position
shifted by a random offset, or, from the attack's start, the position where it stopped telling the truth."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from .base import Attack, AttackParams


class ConstantPositionParams(AttackParams):
    x_m: float = Field(description="[m] reported east position (local frame)")
    y_m: float = Field(description="[m] reported north position (local frame)")


class ConstantPosition(Attack):
    """Type 1: every CAM reports the same position."""

    Params = ConstantPositionParams

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        p = self.params
        return {**values, "x": np.full_like(values["x"], p.x_m), "y": np.full_like(values["y"], p.y_m)}


class ConstantOffsetParams(AttackParams):
    dx_m: float = Field(0.0, ge=-1e4, le=1e4, description="[m] east offset added to the true position")
    dy_m: float = Field(0.0, ge=-1e4, le=1e4, description="[m] north offset added to the true position")


class ConstantOffset(Attack):
    """Type 2: the true position shifted by a fixed offset (east, north)."""

    Params = ConstantOffsetParams

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**values, "x": values["x"] + self.params.dx_m, "y": values["y"] + self.params.dy_m}


class RandomPositionParams(AttackParams):
    half_width_m: float = Field(300.0, gt=0, le=1e5, description="[m] positions are drawn uniformly in the square "
                                "of this half-width around the local origin")


class RandomPosition(Attack):
    """Type 4: a position drawn anew for every CAM, anywhere in a square around the origin."""

    Params = RandomPositionParams

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        h, k = self.params.half_width_m, len(values["x"])
        return {**values, "x": self.draws(t_ns, 0, k).uniform(-h, h, k), "y": self.draws(t_ns, 1, k).uniform(-h, h, k)}


class RandomOffsetParams(AttackParams):
    max_offset_m: float = Field(5.0, gt=0, le=1e4, description="[m] offsets drawn uniformly in [-max, max] east "
                                "and north, anew for every CAM")


class RandomOffset(Attack):
    """Type 8: the true position shifted by a random offset drawn for every CAM."""

    Params = RandomOffsetParams

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        m, k = self.params.max_offset_m, len(values["x"])
        return {**values, "x": values["x"] + self.draws(t_ns, 0, k).uniform(-m, m, k),
                "y": values["y"] + self.draws(t_ns, 1, k).uniform(-m, m, k)}


class EventualStop(Attack):
    """Type 16: from the attack's start the station reports standing where it was (speed, acceleration and yaw
    rate zero, the heading it had), as a broken-down vehicle would."""

    def __init__(self, params: AttackParams, ctx) -> None:  # type: ignore[no-untyped-def]
        super().__init__(params, ctx)
        self.frozen: dict[str, float] | None = None  # x, y, yaw at the first forged CAM

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.frozen is None:
            self.frozen = {name: float(values[name][0]) for name in ("x", "y", "yaw")}
        zero = np.zeros_like(values["v"])
        return {**{name: np.full_like(values[name], value) for name, value in self.frozen.items()},
                "v": zero, "a": zero.copy(), "yaw_rate": zero.copy()}
