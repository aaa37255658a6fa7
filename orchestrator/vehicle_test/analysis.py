"""Metrics of the handling tests: the quasi-steady part of a constant-radius run, the understeer gradient fitted on
it, the largest lateral acceleration, and the step-steer response (SAE J266 / ISO 4138, ISO 7401)."""

from __future__ import annotations

from typing import Any

import numpy as np

from federates.physics.models.dynamic_kernel import G_MPS2

from .simulate import Run


def quasi_steady(run: Run, radius_m: float, tol: float = 0.05, max_yaw_accel_radps2: float = 0.05) -> np.ndarray:
    """Mask (time x robot) of the quasi-steady part of a constant-radius run: True until the rear axle first leaves
    ``R (1 +- tol)`` around the centre ``(0, R)`` or the yaw acceleration first exceeds ``max_yaw_accel_radps2``."""
    dev = np.abs(np.hypot(run.x, run.y - radius_m) - radius_m) > tol * radius_m
    dt = float(run.t[1, 0] - run.t[0, 0])
    r_dot = np.abs(np.gradient(run.r, dt, axis=0))
    # ignore the first second (driver settling on the circle)
    r_dot[run.t < 1.0] = 0.0
    return np.cumsum(dev | (r_dot > max_yaw_accel_radps2), axis=0) == 0


def fit_understeer(run: Run, wheelbase_m: float, mu: float, valid: np.ndarray | None = None,
                   ay_frac: float = 0.4) -> np.ndarray:
    """Least-squares ``K_us`` [rad/(m/s^2)] per robot from ``delta - L r/vx = K_us vx r`` over ``a_y < ay_frac mu g``
    (steady-state relation of Rajamani eq. 3.15, with the measured path curvature ``r/vx``), where ``valid``."""
    out = np.full(run.vx.shape[1], np.nan)
    ok = np.ones_like(run.vx, dtype=bool) if valid is None else valid
    for j in range(run.vx.shape[1]):
        vx, r, d = run.vx[:, j], run.r[:, j], run.steer[:, j]
        ay = vx * r
        sel = (ay > 0.05 * mu * G_MPS2) & (ay < ay_frac * mu * G_MPS2) & (vx > 0.5) & ok[:, j]
        if sel.sum() < 10:
            continue
        lhs = d[sel] - wheelbase_m * r[sel] / vx[sel]
        out[j] = float(np.dot(ay[sel], lhs) / np.dot(ay[sel], ay[sel]))
    return out


def ay_max(run: Run, dt: float, window_s: float = 0.5) -> np.ndarray:
    """Largest moving-average (``window_s``) lateral acceleration of the CG from the tyre forces [m/s^2] per robot
    (in steady cornering equal to ``vx r``; bounded by the friction limit, also during a spin)."""
    w = max(1, int(window_s / dt))
    kernel = np.ones(w) / w
    return np.array([float(np.max(np.abs(np.convolve(run.ay[:, j], kernel, mode="valid"))))
                     for j in range(run.ay.shape[1])])


def step_metrics(run: Run, t_step: float, p: dict[str, Any], steer: float) -> list[dict[str, Any]]:
    """Per robot: steady yaw rate and its gain, rise time, overshoot, and whether ``vy`` starts the wrong way."""
    rows = []
    L = p["wheelbase_m"]
    for j in range(run.r.shape[1]):
        t, r, vy = run.t[:, j], run.r[:, j], run.vy[:, j]
        after = t >= t_step
        r_ss = float(np.mean(r[t >= t[-1] - 0.5]))
        vy_ss = float(np.mean(vy[t >= t[-1] - 0.5]))
        ta = t[after] - t_step
        ra = r[after]
        rise = np.nan
        if r_ss != 0:
            i10 = np.argmax(ra >= 0.1 * r_ss)
            i90 = np.argmax(ra >= 0.9 * r_ss)
            rise = float(ta[i90] - ta[i10])
        vy_a = vy[after]
        big = np.abs(vy_a) > 0.02 * max(np.max(np.abs(vy_a)), 1e-12)
        first = float(vy_a[np.argmax(big)]) if big.any() else 0.0
        vx = float(np.mean(run.vx[t >= t[-1] - 0.5, j]))
        rows.append({
            "yaw_rate_ss_radps": r_ss, "yaw_rate_gain_1ps": r_ss / steer, "kinematic_gain_1ps": vx / L,
            "yaw_rate_rise_time_s": rise, "yaw_rate_overshoot_pct": float(100 * (np.max(ra) / r_ss - 1)),
            "vy_ss_mps": vy_ss, "vy_starts_wrong_way": bool(first * vy_ss < 0),
            "ay_ss_mps2": float(np.mean(run.ay[t >= t[-1] - 0.5, j])),
        })
    return rows
