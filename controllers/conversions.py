"""Between unicycle commands (acceleration a, yaw rate w) and car-like commands (speed v, steering angle delta).

Kinematic bicycle at the rear axle: w = v tan(delta) / L, so delta = atan(w L / v). At low speed the ratio is
guarded with a minimum speed so that no command becomes infinite or NaN; the result is clamped to the steering
limit. The speed command is the integral of a, never negative.
"""

from __future__ import annotations

import numpy as np

MIN_SPEED_FOR_STEER_MPS = 0.1
"""Below this speed the steering angle is computed as if driving at it (w L / v would blow up)."""


def yaw_rate_to_steer(
    yaw_rate: np.ndarray, speed: np.ndarray, wheelbase: np.ndarray, max_steer: np.ndarray
) -> np.ndarray:
    """delta = atan(w L / max(v, v_min)), clamped to +-max_steer."""
    v = np.maximum(np.abs(speed), MIN_SPEED_FOR_STEER_MPS)
    return np.clip(np.arctan(yaw_rate * wheelbase / v), -max_steer, max_steer)


def steer_to_yaw_rate(steer: np.ndarray, speed: np.ndarray, wheelbase: np.ndarray) -> np.ndarray:
    """w = v tan(delta) / L."""
    return speed * np.tan(steer) / wheelbase


def integrate_speed(speed_cmd: np.ndarray, accel: np.ndarray, dt: float, max_speed: np.ndarray) -> np.ndarray:
    """v_{k+1} = clamp(v_k + a dt, 0, max_speed)."""
    return np.clip(speed_cmd + accel * dt, 0.0, max_speed)
