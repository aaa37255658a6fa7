"""A control law plug-in: constant time-gap spacing on the V2X data, longitudinal only.

    a = kp (d - (r + h v)) + kd (v_pred - v),   d = distance between the rear axles

Rows without predecessor data get a = 0 (hold speed). The law does not steer: the control federate steers it by
pure pursuit on the predecessor's received path (``controller.lateral``).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field

from controllers.base import Arrays, Controller, ControllerParams


class TimeGapParams(ControllerParams):
    """Spacing policy and gains (``controller:`` keys besides type, period_s, predict, lateral, fallback)."""

    standstill_m: float = Field(1.0, gt=0, description="r: gap at standstill [m]")
    time_gap_s: float = Field(0.8, ge=0, description="h: time gap [s]")
    kp: float = Field(0.5, gt=0, description="gain on the spacing error [1/s^2]")
    kd: float = Field(1.0, ge=0, description="gain on the speed difference [1/s]")


class TimeGap(Controller):
    """Constant time-gap law on received predecessor states."""

    Params = TimeGapParams
    steers: ClassVar[bool] = False
    gap_reference: ClassVar[str] = "axle"

    def compute(self, ego: Arrays, pred: Arrays, leader: Arrays, sensors: Arrays,
                dt: float) -> dict[str, np.ndarray]:
        """``accel`` [m/s^2] per row; 0 where nothing was received yet."""
        p: TimeGapParams = self.params  # type: ignore[assignment]
        gap = np.hypot(pred["x"] - ego["x"], pred["y"] - ego["y"])
        accel = p.kp * (gap - self.desired_gap(ego["v"])) + p.kd * (pred["v"] - ego["v"])
        return {"accel": np.where(np.isfinite(accel), accel, 0.0)}

    def desired_gap(self, v: np.ndarray, curvature: np.ndarray | None = None) -> np.ndarray:
        """r + h v [m], rear axle to rear axle."""
        p: TimeGapParams = self.params  # type: ignore[assignment]
        return p.standstill_m + p.time_gap_s * np.asarray(v, dtype=np.float64)
