"""Actuators and road loads: steering servo, drive/brake lag, torque- and power-limited drivetrain, resistances.

Scalar ``@njit`` functions, inlined by the vehicle kernel and callable from Python with floats (tests, analysis).

- Steering: the command is clamped to ``+-max_angle``, followed through a first-order lag of time constant
  ``tau`` (discretised like the drive lag below) and rate-limited to ``+-max_rate``.
- Drive/brake: first-order lag on acceleration as in Plexe (Segata et al., "Plexe: a platooning extension for
  Veins", IEEE VNC 2014): ``a_k = alpha u_k + (1 - alpha) a_{k-1}``, ``alpha = dt / (tau + dt)``, with ``u`` clamped
  to ``[-max_decel, max_accel]``; ``tau = 0`` passes the command through.
- Drivetrain: the tractive force is capped by a maximum force (torque / wheel radius) and by ``P_max / v``.
- Road loads: rolling resistance ``c_rr m g`` (only while moving) and aerodynamic drag ``0.5 rho CdA v^2``
  (Rajamani, *Vehicle Dynamics and Control*, 2nd ed., sec. 4.2).
"""

from __future__ import annotations

import math

from numba import njit

G_MPS2 = 9.81  # gravity [m/s^2]


@njit(cache=True, inline="always")
def lag_alpha(tau_s: float, dt_s: float) -> float:
    """Discrete first-order lag gain ``dt / (tau + dt)`` (1 for ``tau <= 0``)."""
    if tau_s <= 0.0:
        return 1.0
    return dt_s / (tau_s + dt_s)


@njit(cache=True, inline="always")
def steer_update(
    steer_rad: float, cmd_rad: float, max_angle_rad: float, max_rate_radps: float, tau_s: float, dt_s: float,
) -> float:
    """Steering angle [rad] after ``dt_s``: clamp, first-order lag, then rate limit."""
    target = min(max(cmd_rad, -max_angle_rad), max_angle_rad)
    d = lag_alpha(tau_s, dt_s) * (target - steer_rad)
    d_max = max_rate_radps * dt_s
    return steer_rad + min(max(d, -d_max), d_max)


@njit(cache=True, inline="always")
def accel_update(
    a_prev_mps2: float, cmd_mps2: float, max_accel_mps2: float, max_decel_mps2: float, tau_s: float, dt_s: float,
) -> float:
    """Plexe-style lagged acceleration [m/s^2]: ``alpha u + (1 - alpha) a_prev`` with ``u`` clamped."""
    u = min(max(cmd_mps2, -max_decel_mps2), max_accel_mps2)
    alpha = lag_alpha(tau_s, dt_s)
    return alpha * u + (1.0 - alpha) * a_prev_mps2


@njit(cache=True, inline="always")
def drive_force_limit(force_n: float, v_mps: float, max_force_n: float, max_power_w: float) -> float:
    """Tractive force [N] after the drivetrain's force (torque) and power limits; braking passes unchanged."""
    if force_n <= 0.0:
        return force_n
    f = min(force_n, max_force_n)
    # P = F v; below 0.5 m/s the power limit is held at its 0.5 m/s value (no infinite force at standstill)
    return min(f, max_power_w / max(abs(v_mps), 0.5))


@njit(cache=True, inline="always")
def resistance_force(v_mps: float, mass_kg: float, c_rr: float, drag_area_m2: float, rho_kgpm3: float) -> float:
    """Rolling resistance plus aerodynamic drag [N], opposing motion (positive for forward motion)."""
    if abs(v_mps) < 1e-3:
        return 0.0
    return math.copysign(c_rr * mass_kg * G_MPS2 + 0.5 * rho_kgpm3 * drag_area_m2 * v_mps * v_mps, v_mps)
