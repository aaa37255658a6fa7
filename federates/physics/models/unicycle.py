"""Unicycle at the rear-axle point, the model the platoon controllers are designed on
(Bayuwindra et al., IEEE TCST 28(3), 2020):
x' = v cos th, y' = v sin th, th' = w, v' = a, driven directly by acceleration and yaw-rate commands.

No steering geometry and no limits besides a non-negative speed: the "theory" fidelity, against which the
car-like and dynamic models show what the physical robot adds. Integrated exactly over a step for constant
(a, w): the arc at the mean speed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numba import njit

from .base import VehicleModel

_STATE = ("x", "y", "yaw", "v", "a", "yaw_rate", "steer")


@njit(cache=True)
def _unicycle_kernel(x, y, yaw, v, a, yaw_rate, cmd_accel, cmd_yaw_rate, dt):  # pragma: no cover - compiled
    for i in range(x.shape[0]):
        v0 = v[i]
        v1 = max(v0 + cmd_accel[i] * dt, 0.0)
        v_mean = 0.5 * (v0 + v1)
        w = cmd_yaw_rate[i]
        th0 = yaw[i]
        dth = w * dt
        if abs(dth) > 1e-9:
            x[i] += v_mean / w * (np.sin(th0 + dth) - np.sin(th0))
            y[i] += v_mean / w * (np.cos(th0) - np.cos(th0 + dth))
        else:
            x[i] += v_mean * dt * np.cos(th0)
            y[i] += v_mean * dt * np.sin(th0)
        th1 = th0 + dth
        yaw[i] = np.arctan2(np.sin(th1), np.cos(th1))
        a[i] = (v1 - v0) / dt
        v[i] = v1
        yaw_rate[i] = w


class Unicycle(VehicleModel):
    """Unicycle for N robots; commands ``accel`` [m/s^2] and ``yaw_rate`` [rad/s]."""

    input_mode = "accel_yaw_rate"

    def __init__(self, dt: float) -> None:
        super().__init__(dt)
        self._s = {name: np.empty(0) for name in _STATE}

    def add(self, params: Sequence[Mapping[str, Any]], initial: Mapping[str, np.ndarray]) -> None:
        """Append robots at their initial ``x, y, yaw, v`` (vehicle parameters are not used)."""
        n = len(params)
        new = {"x": initial["x"], "y": initial["y"], "yaw": initial["yaw"], "v": initial["v"],
               "a": np.zeros(n), "yaw_rate": np.zeros(n), "steer": np.zeros(n)}
        for name in _STATE:
            self._s[name] = np.concatenate([self._s[name], np.asarray(new[name], dtype=np.float64)])

    def remove(self, rows: np.ndarray) -> None:
        """Delete robots at ``rows``."""
        for name in _STATE:
            self._s[name] = np.delete(self._s[name], rows)

    def step(self, commands: Mapping[str, np.ndarray]) -> None:
        """Advance by ``dt`` under ``commands['accel']`` and ``commands['yaw_rate']``."""
        s = self._s
        _unicycle_kernel(s["x"], s["y"], s["yaw"], s["v"], s["a"], s["yaw_rate"],
                         np.ascontiguousarray(commands["accel"], dtype=np.float64),
                         np.ascontiguousarray(commands["yaw_rate"], dtype=np.float64), self.dt)

    @property
    def state(self) -> dict[str, np.ndarray]:
        """``x, y, yaw, v, a, yaw_rate, steer`` (steer is always 0)."""
        return self._s
