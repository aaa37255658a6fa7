"""Speed attacks of the VeReMi extension (Kamel et al., ICC 2020): a fixed speed, the true speed plus a fixed
offset, or a random speed drawn for every CAM. The position stays true, so the position-speed consistency check is
the one made for them."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from .base import Attack, AttackParams


class ConstantSpeedParams(AttackParams):
    v_mps: float = Field(0.0, ge=0, le=163.8, description="[m/s] reported speed (at most the CAM's 163.82 m/s)")


class ConstantSpeed(Attack):
    """Every CAM reports the same speed."""

    Params = ConstantSpeedParams

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**values, "v": np.full_like(values["v"], self.params.v_mps)}


class SpeedOffsetParams(AttackParams):
    dv_mps: float = Field(5.0, ge=-163.8, le=163.8, description="[m/s] added to the true speed (the result is "
                          "clipped at 0)")


class SpeedOffset(Attack):
    """The true speed plus a fixed offset."""

    Params = SpeedOffsetParams

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**values, "v": np.clip(values["v"] + self.params.dv_mps, 0.0, 163.8)}


class RandomSpeedParams(AttackParams):
    max_mps: float = Field(30.0, gt=0, le=163.8, description="[m/s] speeds drawn uniformly in [0, max]")


class RandomSpeed(Attack):
    """A speed drawn uniformly for every CAM."""

    Params = RandomSpeedParams

    def forge(self, t_ns: int, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        k = len(values["v"])
        return {**values, "v": self.draws(t_ns, 0, k).uniform(0.0, self.params.max_mps, k)}
