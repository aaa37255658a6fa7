"""Slow reference of the forward range sensor, the oracle the compiled scan (``federates/physics/range_scan.py``) is
checked against.

It is written from the sensor's definition (``RangeSensor``'s docstring), not from the kernel: every sensor looks
at every other vehicle (no broad phase), the field of view is tested on the bearing angle itself, and the distance
to the predicted path is taken from the circle's centre. Plain Python loops, no numba; fine for a few hundred
robots in a test.
"""

from __future__ import annotations

import math

import numpy as np


def predicted_curvature(yaw_rate: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Yaw rate / speed [1/m] above 0.1 m/s, else 0 (straight ahead)."""
    return np.array([w / s if s > 0.1 else 0.0 for w, s in zip(yaw_rate, v, strict=True)])


def distance_from_path(fwd: float, left: float, curvature: float) -> float:
    """Signed distance [m] of (fwd, left) in the sensor frame from the circle of ``curvature`` tangent to the
    heading at the origin, positive to the right of the path (outside a left turn, inside a right turn)."""
    if curvature == 0.0:
        return -left
    radius = 1.0 / curvature  # centre at (0, radius): left of the sensor for a left turn
    from_centre = math.hypot(fwd, left - radius)
    return math.copysign(from_centre - abs(radius), curvature)


def nearest_in_path(x: np.ndarray, y: np.ndarray, yaw: np.ndarray, v: np.ndarray, front: np.ndarray,
                    rear: np.ndarray, corridor: np.ndarray, curvature: np.ndarray, locked: np.ndarray,
                    ids: np.ndarray, max_range: float, fov: float, keep_factor: float,
                    ) -> dict[str, np.ndarray]:
    """Noise-free ``range``, ``range_rate``, ``bearing`` and ``target`` row per robot, and ``target_id`` (the ids
    of the targets, -1 for none, which the next call takes as ``locked``)."""
    n = len(x)
    out = {"range": np.full(n, np.nan), "range_rate": np.full(n, np.nan), "bearing": np.full(n, np.nan),
           "target": np.full(n, -1, np.int64), "target_id": np.full(n, -1, np.int64)}
    for i in range(n):
        heading = np.array([math.cos(yaw[i]), math.sin(yaw[i])])
        normal = np.array([-heading[1], heading[0]])
        sensor = np.array([x[i], y[i]]) + front[i] * heading
        for j in range(n):
            if j == i:
                continue
            target = np.array([x[j], y[j]]) - rear[j] * np.array([math.cos(yaw[j]), math.sin(yaw[j])])
            rel = target - sensor
            fwd, left = float(rel @ heading), float(rel @ normal)
            dist = float(np.linalg.norm(rel))
            bearing = math.atan2(left, fwd)
            if fwd <= 0.0 or dist > max_range or abs(bearing) > 0.5 * fov:
                continue
            limit = corridor[i] * (keep_factor if ids[j] == locked[i] else 1.0)
            if abs(distance_from_path(fwd, left, curvature[i])) > limit:
                continue
            if out["target"][i] >= 0 and dist >= out["range"][i]:
                continue
            vel_i = v[i] * heading
            vel_j = v[j] * np.array([math.cos(yaw[j]), math.sin(yaw[j])])
            out["range"][i] = dist
            out["range_rate"][i] = float((vel_j - vel_i) @ rel) / dist
            out["bearing"][i] = bearing
            out["target"][i] = j
            out["target_id"][i] = ids[j]
    return out
