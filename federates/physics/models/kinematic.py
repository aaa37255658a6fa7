"""Kinematic bicycle at the rear axle (AuNa's navigation model): x' = v cos th, y' = v sin th, th' = v tan(d)/L.

Speed follows the command within the acceleration limits, steering within the angle and rate limits. Over one step
the pose is integrated exactly along the arc driven at the mean speed, so a constant command traces the exact circle.
The wheels roll without slip: ``wheel_odometry()`` gives the rear wheels' exact distances along that arc.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numba import njit

from core.robots import param_column, param_rows

from .base import InputMode, VehicleModel

_PARAMS = ("wheelbase_m", "max_steer_rad", "max_steer_rate_radps", "max_speed_mps", "max_accel_mps2", "max_decel_mps2")
_STATE = ("x", "y", "yaw", "v", "a", "yaw_rate", "steer")


@njit(cache=True, fastmath=False)
def _step_kernel(x, y, yaw, v, a, yaw_rate, steer, cmd_speed, cmd_steer, p, dt, ds_out,
                 dth_out):  # pragma: no cover - compiled
    for i in range(x.shape[0]):
        wheelbase, max_steer, max_rate = p[i, 0], p[i, 1], p[i, 2]
        max_speed, max_acc, max_dec = p[i, 3], p[i, 4], p[i, 5]
        # steering: rate limit towards the clamped command
        target = min(max(cmd_steer[i], -max_steer), max_steer)
        d_max = max_rate * dt
        delta = steer[i] + min(max(target - steer[i], -d_max), d_max)
        # speed: acceleration-limited towards the clamped command (no reversing)
        v_target = min(max(cmd_speed[i], 0.0), max_speed)
        v0 = v[i]
        v1 = v0 + min(max(v_target - v0, -max_dec * dt), max_acc * dt)
        v_mean = 0.5 * (v0 + v1)
        tan_delta = delta if delta == 0.0 else np.tan(delta)  # tan(+-0) is +-0 exactly
        w = v_mean * tan_delta / wheelbase
        th0 = yaw[i]
        dth = w * dt
        th1 = th0 + dth
        if abs(dth) > 1e-9:
            radius = v_mean / w
            x[i] += radius * (np.sin(th0 + dth) - np.sin(th0))
            y[i] += radius * (np.cos(th0) - np.cos(th0 + dth))
            yaw[i] = np.arctan2(np.sin(th1), np.cos(th1))
        else:
            th_mid = th0 + 0.5 * dth
            if th_mid == th1:
                # driving straight: the mid-step and end headings are the same float (zeros of the same sign),
                # so one sine and cosine serve both; at +-0 they and atan2(sin, cos) are exact
                if th1 == 0.0:
                    c1, s1, yaw1 = 1.0, th1, th1
                else:
                    c1, s1 = np.cos(th1), np.sin(th1)
                    yaw1 = np.arctan2(s1, c1)
                x[i] += v_mean * dt * c1
                y[i] += v_mean * dt * s1
                yaw[i] = yaw1
            else:
                x[i] += v_mean * dt * np.cos(th_mid)
                y[i] += v_mean * dt * np.sin(th_mid)
                yaw[i] = np.arctan2(np.sin(th1), np.cos(th1))
        a[i] = (v1 - v0) / dt
        v[i] = v1
        yaw_rate[i] = v1 * tan_delta / wheelbase
        steer[i] = delta
        ds_out[i] = v_mean * dt  # arc length of the rear-axle point
        dth_out[i] = dth


class KinematicBicycle(VehicleModel):
    """Kinematic bicycle for N robots; input mode (speed, steering angle) only."""

    input_mode = "speed_steer"

    def __init__(self, dt: float, input_mode: InputMode = "speed_steer") -> None:
        super().__init__(dt)
        if input_mode != "speed_steer":
            raise ValueError(f"the kinematic model takes input_mode 'speed_steer' only, got '{input_mode}'")
        self._p = np.empty((0, len(_PARAMS)))
        self._s = {name: np.empty(0) for name in _STATE}
        self._track = np.empty(0)  # rear track [m], for the wheel odometry only
        self._wheel_radius = np.empty(0)  # [m]
        self._ds = np.empty(0)  # last step's arc length [m] and heading change [rad] of the rear-axle point
        self._dth = np.empty(0)

    def add(self, params: Sequence[Mapping[str, Any]], initial: Mapping[str, np.ndarray]) -> None:
        """Append robots with their parameters and initial ``x, y, yaw, v``."""
        rows = param_rows(params, lambda p: [float(p[k]) for k in _PARAMS]).reshape(-1, len(_PARAMS))
        if np.any(rows[:, 0] <= 0):
            raise ValueError("wheelbase_m must be positive")
        self._p = np.ascontiguousarray(np.vstack([self._p, rows]))
        n = len(params)
        new = {
            "x": initial["x"], "y": initial["y"], "yaw": initial["yaw"], "v": initial["v"],
            "a": np.zeros(n), "yaw_rate": np.zeros(n), "steer": initial.get("steer", np.zeros(n)),
        }
        for name in _STATE:
            self._s[name] = np.concatenate([self._s[name], np.asarray(new[name], dtype=np.float64)])
        self._track = np.concatenate([self._track, param_column(params, "track_m", 0.0)])
        radius = param_column(params, "wheel_radius_m", 0.05)
        self._wheel_radius = np.concatenate([self._wheel_radius, radius])
        self._ds = np.concatenate([self._ds, np.zeros(n)])
        self._dth = np.concatenate([self._dth, np.zeros(n)])

    def remove(self, rows: np.ndarray) -> None:
        """Delete robots at ``rows``."""
        self._p = np.ascontiguousarray(np.delete(self._p, rows, axis=0))
        for name in _STATE:
            self._s[name] = np.delete(self._s[name], rows)
        self._track = np.delete(self._track, rows)
        self._wheel_radius = np.delete(self._wheel_radius, rows)
        self._ds = np.delete(self._ds, rows)
        self._dth = np.delete(self._dth, rows)

    def step(self, commands: Mapping[str, np.ndarray]) -> None:
        """Advance by ``dt`` under ``commands['speed']`` and ``commands['steer']``."""
        s = self._s
        _step_kernel(
            s["x"], s["y"], s["yaw"], s["v"], s["a"], s["yaw_rate"], s["steer"],
            commands["speed"], commands["steer"], self._p, self.dt, self._ds, self._dth,
        )

    def wheel_odometry(self) -> dict[str, np.ndarray]:
        """What rear wheel encoders see in the last step without slip (new arrays, the same keys as
        ``DynamicSingleTrack.wheel_odometry``): ``dist_rl, dist_rr`` rolled distance [m] (the rear-axle arc length
        -+ heading change x track / 2), ``omega_rl, omega_rr`` mean angular speeds over the step [rad/s],
        ``slip_ratio`` zero [-]."""
        half = 0.5 * self._track * self._dth
        dist_rl = self._ds - half
        dist_rr = self._ds + half
        return {
            "omega_rl": dist_rl / (self.dt * self._wheel_radius), "omega_rr": dist_rr / (self.dt * self._wheel_radius),
            "dist_rl": dist_rl, "dist_rr": dist_rr, "slip_ratio": np.zeros(len(self._ds)),
        }

    @property
    def state(self) -> dict[str, np.ndarray]:
        """``x, y, yaw, v, a, yaw_rate, steer`` arrays (live views)."""
        return self._s
