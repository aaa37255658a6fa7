"""Closed-loop longitudinal platoon for testing control laws through the ``Controller`` interface.

Vehicle 0 is the leader, vehicles 1..n-1 follow; controller row j drives vehicle j + 1. Plant per
vehicle: double integrator with a first-order actuator lag, a' = (u - a) / tau, integrated over each step
with the lag's exact decay and a trapezoidal speed update; speeds never go negative. The leader's acceleration is
``leader_accel(t)``: applied as is, or as a command through the same lag with ``leader_lag`` (as in Plexe,
where the leader has the same engine model).

Sensors are ideal: bumper-to-bumper gap and its rate, NaN beyond ``range_max_m``.

V2X: every ``beacon_period_s`` each vehicle broadcasts (v, a, u); a message generated at step g is received
at step g + d, d = max(1, round(delay_s / dt)) (at least one step: all followers are computed at once, so a
command is only known after the step that computes it); ``channel_up(t_gen)`` -> bool, or bool per follower,
decides delivery. ``pred`` / ``leader`` hold the newest received message, ``pred["age_s"]`` its age at use;
before t = 0 the platoon is taken to have cruised in steady state, so that state counts as received at t = 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from controllers.base import Controller


@dataclass
class PlatoonConfig:
    """One closed-loop run."""

    n_vehicles: int = 7
    dt: float = 0.01  # [s] controller and plant step
    duration_s: float = 60.0
    tau_s: float = 0.1  # follower actuator lag [s]
    delay_s: float = 0.0  # V2X delay [s]
    beacon_period_s: float = 0.0  # 0: a message every step
    length_m: float = 4.0
    v0_mps: float = 20.0
    initial_gap_m: float | None = None  # None: the law's desired gap at v0
    accel_limits: tuple[float, float] | None = None  # [m/s^2] applied to follower commands
    leader_lag: bool = False  # leader_accel is a command through the actuator lag
    send_u: bool = True  # messages carry the sender's command u (else only v, a)
    range_max_m: float = 250.0
    leader_accel: Callable[[float], float] = field(default=lambda t: 0.0)
    channel_up: Callable[[float], bool | np.ndarray] | None = None


@dataclass
class PlatoonRun:
    """Time series, one row per step, one column per vehicle (gap/age: per follower)."""

    t: np.ndarray
    x: np.ndarray
    v: np.ndarray
    a: np.ndarray
    u: np.ndarray
    gap: np.ndarray
    age: np.ndarray
    desired_gap: np.ndarray
    outputs: dict[str, np.ndarray]

    @property
    def spacing_error(self) -> np.ndarray:
        """gap - desired gap per follower [m]."""
        return self.gap - self.desired_gap


def simulate(ctrl: Controller, cfg: PlatoonConfig) -> PlatoonRun:
    """Runs the platoon under ``ctrl`` (rows = followers) and records every step."""
    n, nf, dt = cfg.n_vehicles, cfg.n_vehicles - 1, cfg.dt
    steps = round(cfg.duration_s / dt)
    d = max(1, round(cfg.delay_s / dt))
    beacon_every = max(1, round(cfg.beacon_period_s / dt)) if cfg.beacon_period_s > 0 else 1
    lag = 1.0 - math.exp(-dt / cfg.tau_s)

    gap0 = cfg.initial_gap_m
    if gap0 is None:
        gap0 = float(ctrl.desired_gap(np.array([cfg.v0_mps]))[0])
    x = -np.arange(n) * (gap0 + cfg.length_m)
    v = np.full(n, cfg.v0_mps)
    a = np.zeros(n)
    u = np.zeros(n)
    hist = np.zeros((steps, 3, n))  # sent (v, a, u) per step
    rx_pred = np.tile(np.array([[cfg.v0_mps], [0.0], [0.0]]), (1, nf))  # steady state before t = 0
    rx_lead = rx_pred.copy()
    rx_step = np.zeros(nf)  # generation step of the newest received message

    rec = {k: np.empty((steps, n)) for k in ("x", "v", "a", "u")}
    rec_gap = np.empty((steps, nf))
    rec_age = np.empty((steps, nf))
    rec_des = np.empty((steps, nf))
    outputs: dict[str, list[np.ndarray]] = {}

    for k in range(steps):
        t = k * dt
        gen = k - d
        if gen >= 0 and gen % beacon_every == 0:
            up = np.ones(nf, dtype=bool)
            if cfg.channel_up is not None:
                up = np.broadcast_to(cfg.channel_up(gen * dt), nf)
            rx_pred[:, up] = hist[gen][:, :-1][:, up]
            rx_lead[:, up] = hist[gen][:, [0]].repeat(nf, axis=1)[:, up]
            rx_step[up] = gen
        gap = x[:-1] - x[1:] - cfg.length_m
        gap_rate = v[:-1] - v[1:]
        far = gap > cfg.range_max_m
        pred = {"v": rx_pred[0], "a": rx_pred[1], "age_s": (k - rx_step) * dt}
        if cfg.send_u:
            pred["u"] = rx_pred[2]
        out = ctrl.compute(
            {"v": v[1:].copy(), "a": a[1:].copy()},
            pred,
            {"v": rx_lead[0], "a": rx_lead[1]},
            {"gap_m": np.where(far, np.nan, gap), "gap_rate_mps": np.where(far, np.nan, gap_rate)},
            dt,
        )
        u[0] = cfg.leader_accel(t)
        u[1:] = out["accel"]
        if cfg.accel_limits is not None:
            u[1:] = np.clip(u[1:], *cfg.accel_limits)
        for key, val in out.items():
            if key != "accel":
                outputs.setdefault(key, []).append(np.asarray(val).copy())

        rec["x"][k], rec["v"][k], rec["a"][k], rec["u"][k] = x, v, a, u
        rec_gap[k], rec_age[k] = gap, pred["age_s"]
        rec_des[k] = ctrl.desired_gap(v[1:])
        hist[k] = (v, a, u)

        a_new = a.copy()
        a_new[:] = a + (u - a) * lag
        if not cfg.leader_lag:
            a_new[0] = u[0]
        v_new = v + 0.5 * (a + a_new) * dt
        x = x + v * dt + (2.0 * a + a_new) / 6.0 * dt * dt
        stopped = v_new < 0.0  # no reversing: hold at standstill
        v_new[stopped] = 0.0
        a_new[stopped] = np.maximum(a_new[stopped], 0.0)
        v, a = v_new, a_new

    return PlatoonRun(
        t=np.arange(steps) * dt, x=rec["x"], v=rec["v"], a=rec["a"], u=rec["u"], gap=rec_gap, age=rec_age,
        desired_gap=rec_des, outputs={k: np.array(vals) for k, vals in outputs.items()},
    )


def l2(y: np.ndarray, dt: float) -> np.ndarray:
    """||y|| = sqrt(sum y_k^2 dt) per column."""
    return np.sqrt(np.sum(y * y, axis=0) * dt)


def ratios(norms: np.ndarray) -> np.ndarray:
    """rho_i = ||y_i|| / ||y_{i-1}|| along the columns."""
    return norms[1:] / norms[:-1]


def sine_amplitude(y: np.ndarray, t: np.ndarray, omega: float) -> np.ndarray:
    """Amplitude of the component at ``omega`` [rad/s] per column, by least squares on (sin, cos, 1)."""
    basis = np.column_stack([np.sin(omega * t), np.cos(omega * t), np.ones_like(t)])
    coef, *_ = np.linalg.lstsq(basis, y, rcond=None)
    return np.hypot(coef[0], coef[1])


def gamma_ploeg(omega: np.ndarray, h: float, kp: float, kd: float, tau: float, theta: float) -> np.ndarray:
    """|Gamma(jw)| = |(G K + D) / (H (1 + G K))|, G = 1/(s^2 (tau s + 1)), K = kp + kd s, H = h s + 1,
    D = exp(-theta s): u_i / u_{i-1} for Ploeg's CACC (Ploeg et al., IEEE TCST 22(2), 2014)."""
    s = 1j * np.asarray(omega)
    G = 1.0 / (s**2 * (tau * s + 1.0))
    K = kp + kd * s
    return np.abs((G * K + np.exp(-theta * s)) / ((h * s + 1.0) * (1.0 + G * K)))


def gamma_acc(omega: np.ndarray, T: float, lam: float, tau: float) -> np.ndarray:
    """|Gamma(jw)| = |(s + lambda) / (T tau s^3 + T s^2 + (1 + lambda T) s + lambda)| for Rajamani's ACC
    with a first-order lag; exceeds 1 somewhere unless T >= 2 tau."""
    s = 1j * np.asarray(omega)
    return np.abs((s + lam) / (T * tau * s**3 + T * s**2 + (1.0 + lam * T) * s + lam))
