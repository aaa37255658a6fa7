"""The law of a vehicle that moves to a slot behind a target vehicle (a joiner alongside its gap, a rear platoon's
leader approaching the front platoon's tail), vectorised over vehicles.

The slot error s is the distance along the target's heading from the vehicle to the target, minus the wanted
distance D (rear axle to rear axle). The vehicle aims at the target's speed plus a bounded correction,
v_ref = v_t + clip(k_p s, -dv, dv) with dv = 0.2 |v_t| + 0.1 m/s, and commands a = clip(k_v (v_ref - v), -b, a_max).
Linearised (|k_p s| < dv), s'' + k_v s' + k_v k_p s = 0: with k_v = 1 /s and k_p = 0.3 /s the damping ratio is 0.91,
so the vehicle settles in its slot without overshooting into the vehicle ahead.
"""

from __future__ import annotations

import numpy as np


def slot_error(x: np.ndarray, y: np.ndarray, tx: np.ndarray, ty: np.ndarray, tyaw: np.ndarray,
               distance: np.ndarray) -> np.ndarray:
    """s [m]: how far each vehicle is behind its slot (negative: ahead of it), along the target's heading."""
    return (tx - x) * np.cos(tyaw) + (ty - y) * np.sin(tyaw) - distance


def slot_accel(s: np.ndarray, v: np.ndarray, target_v: np.ndarray, approach_gain: float, speed_gain: float,
               max_accel: float, max_decel: float) -> np.ndarray:
    """Acceleration [m/s^2] towards the slot; 0 where the target is unknown (NaN)."""
    dv = 0.2 * np.abs(target_v) + 0.1
    v_ref = target_v + np.clip(approach_gain * s, -dv, dv)
    a = np.clip(speed_gain * (v_ref - v), -max_decel, max_accel)
    return np.where(np.isfinite(a), a, 0.0)


def in_slot(s: np.ndarray, v: np.ndarray, target_v: np.ndarray, distance: np.ndarray) -> np.ndarray:
    """Whether each vehicle sits in its slot: |s| below 15 % of D + 0.2 m and its speed within 5 % + 0.1 m/s of the
    target's."""
    ok = (np.abs(s) < 0.15 * distance + 0.2) & (np.abs(v - target_v) < 0.05 * np.abs(target_v) + 0.1)
    return ok & np.isfinite(s)
