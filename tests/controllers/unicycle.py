"""Unicycle platoon for testing steering laws: x' = v cos th, y' = v sin th, th' = w, v' = a.

Each step integrates with the inputs held (midpoint rule on heading and speed, second order in dt). The leader
follows a profile (v, w, a as functions of time; its v is taken from the profile, not integrated); follower j
gets its predecessor's ground truth (x, y, yaw, v, yaw_rate) without delay.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from controllers.base import Controller


def unicycle_step(
    x: np.ndarray, y: np.ndarray, th: np.ndarray, v: np.ndarray, w: np.ndarray, a: np.ndarray, dt: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One step with w, a held; speeds never go negative."""
    v_new = np.maximum(v + a * dt, 0.0)
    v_mid = 0.5 * (v + v_new)
    th_mid = th + 0.5 * w * dt
    return x + v_mid * np.cos(th_mid) * dt, y + v_mid * np.sin(th_mid) * dt, th + w * dt, v_new


@dataclass
class UnicycleRun:
    """Poses per step (rows) and vehicle (columns; 0 is the leader)."""

    t: np.ndarray
    x: np.ndarray
    y: np.ndarray
    th: np.ndarray
    v: np.ndarray


def simulate_platoon(
    ctrl: Controller,
    leader_inputs: Callable[[float], tuple[float, float]],
    n_followers: int,
    spacing_m: float,
    v0: float,
    duration_s: float,
    dt: float,
    record_every: int = 10,
) -> UnicycleRun:
    """Leader (speed, yaw rate) = leader_inputs(t); followers start in line behind it on the x axis,
    ``spacing_m`` apart, at speed v0; ``ctrl`` commands their accel and yaw_rate."""
    n = n_followers + 1
    x = -np.arange(n) * spacing_m
    y = np.zeros(n)
    th = np.zeros(n)
    v = np.full(n, v0)
    w = np.zeros(n)
    steps = round(duration_s / dt)
    rec = []
    for k in range(steps):
        t = k * dt
        v_lead, w_lead = leader_inputs(t)
        v[0], w[0] = v_lead, w_lead
        ego = {"x": x[1:], "y": y[1:], "yaw": th[1:], "v": v[1:]}
        pred = {"x": x[:-1], "y": y[:-1], "yaw": th[:-1], "v": v[:-1], "yaw_rate": w[:-1]}
        out = ctrl.compute(ego, pred, {}, {}, dt)
        a = np.concatenate([[0.0], out["accel"]])
        w = np.concatenate([[w_lead], out["yaw_rate"]])
        if k % record_every == 0:
            rec.append((t, x.copy(), y.copy(), th.copy(), v.copy()))
        x, y, th, v = unicycle_step(x, y, th, v, w, a, dt)
    t_rec, xs, ys, ths, vs = zip(*rec, strict=True)
    return UnicycleRun(np.array(t_rec), np.array(xs), np.array(ys), np.array(ths), np.array(vs))
