"""Shared set-up for the physics tests: a dynamic model with clean inputs (no lags, no road loads)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from federates.physics.models.dynamic import DynamicSingleTrack
from federates.physics.presets import preset

CLEAN = {
    "rolling_resistance": 0.0, "drag_area_m2": 0.0, "accel_tau_s": 0.0, "steer_tau_s": 0.0,
    "max_steer_rate_radps": math.inf,
}


def make(vehicle: str, tyres: list[str], v: float | list[float], dt: float = 0.001, mode: str = "accel_steer",
         **over: Any) -> tuple[DynamicSingleTrack, dict[str, Any]]:
    """A model with one robot per tyre (or per speed), at the origin heading +x."""
    p = {**preset(vehicle), **CLEAN, **over}
    speeds = np.broadcast_to(np.asarray(v, float), (max(len(tyres), np.size(v)),)).copy()
    tyres = tyres if len(tyres) == len(speeds) else tyres * len(speeds)
    m = DynamicSingleTrack(dt, input_mode=mode)  # type: ignore[arg-type]
    n = len(speeds)
    m.add([dict(p, tyre_model=t) for t in tyres], {"x": np.zeros(n), "y": np.zeros(n), "yaw": np.zeros(n), "v": speeds})
    return m, p


def commands(n: int, speed: float | np.ndarray = 0.0, accel: float | np.ndarray = 0.0,
             steer: float | np.ndarray = 0.0, yaw_rate: float | np.ndarray = 0.0) -> dict[str, np.ndarray]:
    """A full command mapping of ``n`` rows."""
    return {k: np.broadcast_to(np.asarray(val, float), (n,)).copy()
            for k, val in (("speed", speed), ("accel", accel), ("steer", steer), ("yaw_rate", yaw_rate))}


def linear_ss(p: dict[str, Any], vx: float) -> tuple[np.ndarray, np.ndarray]:
    """State-space ``A, B`` of the linear single track (state ``[vy, r]``, input ``delta``), Rajamani eq. 2.45."""
    m, izz, L, a = p["mass_kg"], p["yaw_inertia_kgm2"], p["wheelbase_m"], p["cg_to_front_m"]
    b = L - a
    cf, cr = p["cornering_stiffness_front_npr"], p["cornering_stiffness_rear_npr"]
    A = np.array([
        [-(cf + cr) / (m * vx), -(a * cf - b * cr) / (m * vx) - vx],
        [-(a * cf - b * cr) / (izz * vx), -(a * a * cf + b * b * cr) / (izz * vx)],
    ])
    B = np.array([[cf / m], [a * cf / izz]])
    return A, B
