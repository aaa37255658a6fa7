"""Between unicycle commands (acceleration a, yaw rate w) and car-like commands (speed v, steering angle delta).

Kinematic bicycle at the rear axle: w = v tan(delta) / L, so delta = atan(w L / v). At low speed the ratio is
guarded with a minimum speed so that no command becomes infinite or NaN; the result is clamped to the steering
limit. The speed command is the integral of a, never negative.
"""

from __future__ import annotations

import numpy as np
from numba import njit

MIN_SPEED_FOR_STEER_MPS = 0.1
"""Below this speed the steering angle is computed as if driving at it (w L / v would blow up)."""


def yaw_rate_to_steer(
    yaw_rate: np.ndarray, speed: np.ndarray, wheelbase: np.ndarray, max_steer: np.ndarray
) -> np.ndarray:
    """delta = atan(w L / max(v, v_min)), clamped to +-max_steer."""
    arrays = (yaw_rate, speed, wheelbase, max_steer)
    if not all(isinstance(a, np.ndarray) and a.ndim == 1 and a.dtype == np.float64 and len(a) == len(yaw_rate)
               for a in arrays):  # scalars, other shapes or types: plain numpy
        v = np.maximum(np.abs(speed), MIN_SPEED_FOR_STEER_MPS)
        return np.clip(np.arctan(yaw_rate * wheelbase / v), -max_steer, max_steer)
    # the same operations in two compiled passes around numpy's atan (compiled atan may differ in the last bit)
    steer = np.empty(len(yaw_rate))
    _steer_ratio(yaw_rate, speed, wheelbase, MIN_SPEED_FOR_STEER_MPS, steer)
    np.arctan(steer, out=steer)
    _clip_symmetric(steer, max_steer)
    return steer


@njit(cache=True)
def _steer_ratio(yaw_rate, speed, wheelbase, min_speed, out):  # pragma: no cover - compiled
    """w L / max(|v|, v_min), NaN where any input is NaN (as numpy's maximum)."""
    for i in range(out.shape[0]):
        v = abs(speed[i])
        if v < min_speed:
            v = min_speed
        out[i] = yaw_rate[i] * wheelbase[i] / v


@njit(cache=True)
def _clip_symmetric(x, limit):  # pragma: no cover - compiled
    """x clipped in place to [-limit, limit] as numpy's clip (max first, then min; NaN stays NaN)."""
    for i in range(x.shape[0]):
        x[i] = _clip(x[i], -limit[i], limit[i])


@njit(cache=True, inline="always")
def _clip(x, lo, hi):  # pragma: no cover - compiled
    """numpy's clip of one value, bit for bit: NaN passes, then (x > lo ? x : lo), then (y < hi ? y : hi) (so
    -0.0 clipped at 0.0 becomes 0.0, as in numpy)."""
    if np.isnan(x):
        return x
    y = x if x > lo else lo
    return y if y < hi else hi


def steer_to_yaw_rate(steer: np.ndarray, speed: np.ndarray, wheelbase: np.ndarray) -> np.ndarray:
    """w = v tan(delta) / L."""
    return speed * np.tan(steer) / wheelbase


def integrate_speed(speed_cmd: np.ndarray, accel: np.ndarray, dt: float, max_speed: np.ndarray) -> np.ndarray:
    """v_{k+1} = clamp(v_k + a dt, 0, max_speed)."""
    return np.clip(speed_cmd + accel * dt, 0.0, max_speed)


def integrate_speed_rows(speed_cmd: np.ndarray, accel: np.ndarray, stop: np.ndarray, max_speed: np.ndarray,
                         rows: np.ndarray, dt: float) -> None:
    """``integrate_speed`` of ``rows`` in place, 0 where ``stop``: speed_cmd[r] = 0 if stop[r] else
    clamp(speed_cmd[r] + accel[r] dt, 0, max_speed[r])."""
    _integrate_rows(speed_cmd, accel, stop, max_speed, np.asarray(rows, np.int64), float(dt))


@njit(cache=True)
def _integrate_rows(speed_cmd, accel, stop, max_speed, rows, dt):  # pragma: no cover - compiled
    for k in range(rows.shape[0]):
        r = rows[k]
        v = _clip(speed_cmd[r] + accel[r] * dt, 0.0, max_speed[r])
        speed_cmd[r] = 0.0 if stop[r] else v
