"""Adaptive cruise control (ACC) with a constant time gap, as in Plexe / SUMO's CC car-following model
(Rajamani, Vehicle Dynamics and Control, 2nd ed., ch. 6, constant time-gap policy):

- delta = -gap + T v + r                        spacing error [m] (positive: too close)
- u_acc = -(1/T) (v - v_pred + lambda delta)      [m/s^2]
- u = min(u_cc, u_acc); u = u_cc when the gap is unknown (NaN) or beyond ``max_range_m``.

ACC uses only the on-board range sensor: v - v_pred is -gap_rate; when the sensor gives no rate it falls back
to the received predecessor speed. String stable for a first-order actuator lag tau when T >= 2 tau (no
delay).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from pydantic import Field

from .base import Arrays, ControllerParams
from .cruise import CruiseParams
from .longitudinal import LongitudinalController, as_f64, column


class AccParams(ControllerParams):
    """Time gap, gains and the embedded cruise controller of the ACC."""

    time_gap_s: float = Field(1.5, gt=0, le=10, description="T: time gap of the spacing policy [s]")
    lambda_gain: float = Field(0.1, gt=0, le=1e3, description="lambda: gain on the spacing error [1/s]")
    standstill_m: float = Field(2.0, ge=0, le=100, description="r: bumper-to-bumper gap at standstill [m]")
    max_range_m: float = Field(250.0, gt=0, le=10_000, description="beyond this gap ACC yields to pure CC [m]")
    cruise: CruiseParams = Field(
        default_factory=CruiseParams, description="the CC used beyond range and in min()"
    )


@njit(cache=True)
def acc_kernel(
    gap, gap_rate, v, v_pred, T, lam, r, max_range, v_des, kp_cc, u_cc_max, out
):  # pragma: no cover
    """Fills ``out`` [m/s^2] with min(u_cc, u_acc), or u_cc without a usable gap."""
    for j in range(v.shape[0]):
        u_cc = min(max(-kp_cc * (v[j] - v_des), -u_cc_max), u_cc_max)
        g = gap[j]
        if not np.isfinite(g) or g > max_range:
            out[j] = u_cc
            continue
        # d gap / dt: the range sensor's rate, else the received predecessor speed minus own
        rel = gap_rate[j] if np.isfinite(gap_rate[j]) else v_pred[j] - v[j]
        delta = -g + T * v[j] + r
        u_acc = -(1.0 / T) * (-rel + lam * delta)
        out[j] = min(u_cc, u_acc)


class Acc(LongitudinalController):
    """Rajamani's constant-time-gap ACC on the range sensor, combined with CC as min(CC, ACC)."""

    Params = AccParams

    def compute(
        self, ego: Arrays, pred: Arrays, leader: Arrays, sensors: Arrays, dt: float
    ) -> dict[str, np.ndarray]:
        """``accel`` = min(u_cc, -(1/T)(v - v_pred + lambda(-gap + T v + r))); u_cc alone without a target."""
        p: AccParams = self.params  # type: ignore[assignment]
        v = as_f64(ego["v"])
        n = v.shape[0]
        out = np.empty(n)
        acc_kernel(
            column(sensors, "gap_m", n), column(sensors, "gap_rate_mps", n), v, column(pred, "v", n),
            p.time_gap_s, p.lambda_gain, p.standstill_m, p.max_range_m,
            p.cruise.desired_speed_mps, p.cruise.kp, p.cruise.max_accel_mps2, out,
        )
        return {"accel": out}

    def desired_gap(self, v: np.ndarray, curvature: np.ndarray | None = None) -> np.ndarray:
        """r + T v, bumper to bumper (measured along the lane, so ``curvature`` does not change it)."""
        p: AccParams = self.params  # type: ignore[assignment]
        return p.standstill_m + p.time_gap_s * np.asarray(v, dtype=float)
