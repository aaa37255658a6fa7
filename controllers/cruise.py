"""Cruise control (CC), as in Plexe / SUMO's CC car-following model (Rajamani, Vehicle Dynamics and Control,
2nd ed., ch. 5): a saturated proportional speed loop, u = clamp(-Kp (v - v_des), -u_max, u_max)."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from .base import Arrays, ControllerParams
from .longitudinal import LongitudinalController, as_f64


class CruiseParams(ControllerParams):
    """Set speed and gain of the cruise controller."""

    desired_speed_mps: float = Field(
        100 / 3.6, ge=0, le=200, description="v_des: set speed [m/s] (100 km/h: the Plexe workloads' cruise)"
    )
    kp: float = Field(1.0, gt=0, le=1e3, description="Kp: proportional gain on the speed error [1/s]")
    max_accel_mps2: float = Field(1.5, gt=0, le=100, description="u_max: the command is clamped to +-u_max [m/s^2]")


def cruise_accel(v: np.ndarray, v_des: float | np.ndarray, kp: float, u_max: float) -> np.ndarray:
    """u = clamp(-Kp (v - v_des), -u_max, u_max)  [m/s^2] (Plexe's CC law)."""
    return np.clip(-kp * (v - v_des), -u_max, u_max)


class Cruise(LongitudinalController):
    """Cruise control: tracks ``desired_speed_mps`` and ignores the vehicle ahead."""

    Params = CruiseParams

    def compute(
        self, ego: Arrays, pred: Arrays, leader: Arrays, sensors: Arrays, dt: float
    ) -> dict[str, np.ndarray]:
        """``accel`` = clamp(-Kp (v - v_des), -u_max, u_max) for every row."""
        p: CruiseParams = self.params  # type: ignore[assignment]
        return {"accel": cruise_accel(as_f64(ego["v"]), p.desired_speed_mps, p.kp, p.max_accel_mps2)}

    def desired_gap(self, v: np.ndarray, curvature: np.ndarray | None = None) -> np.ndarray:
        """CC keeps no gap: NaN on every row."""
        return np.full_like(np.asarray(v, dtype=float), np.nan)
