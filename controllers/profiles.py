"""Leader input profiles: unicycle inputs (speed v, yaw rate w, acceleration a) as functions of time.

The shapes are those used to evaluate platoon controllers (Bayuwindra et al. 2020 and the AuNa evaluation;
Plexe): AuNa's circle, circle with speed
change and S-curve; Plexe's sinusoid and emergency braking; a lateral weave (the steering counterpart of the
sinusoid) to measure lateral string stability at one frequency. Each function is vectorised over time ``t`` [s].
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from pydantic import Field

from .base import ControllerParams

Profile = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


class ProfileParams(ControllerParams):
    """Shape parameters shared by the profiles (each profile uses the ones it names)."""

    speed_mps: float = Field(1.0, ge=0, description="cruise speed v [m/s] (circle, s_curve; sinusoid/braking mean)")
    yaw_rate_radps: float = Field(0.1, description="turn rate w on the arcs [rad/s]")
    accel_mps2: float = Field(0.25, ge=0, description="peak of the acceleration triangles [m/s^2]")
    amplitude_mps: float = Field(10 / 3.6, ge=0, description="sinusoid amplitude [m/s]")
    frequency_hz: float = Field(0.2, gt=0, description="sinusoid / weave frequency [Hz]")
    start_s: float = Field(5.0, ge=0, description="sinusoid / weave / braking start time [s]")
    decel_mps2: float = Field(8.0, gt=0, description="emergency braking deceleration [m/s^2]")


def ramp(t: np.ndarray, t0: float, t1: float) -> np.ndarray:
    """0 before t0, 1 after t1, linear in between."""
    return np.clip((t - t0) / (t1 - t0), 0.0, 1.0)


def trapezoid(t: np.ndarray, t0: float, t1: float, ramp_s: float) -> np.ndarray:
    """1 on [t0 + ramp_s, t1 - ramp_s], ramps of ``ramp_s`` at both ends, 0 outside [t0, t1]."""
    return ramp(t, t0, t0 + ramp_s) - ramp(t, t1 - ramp_s, t1)


def _triangle(t: np.ndarray, t0: float, t1: float) -> np.ndarray:
    """Triangle of height 1 on [t0, t1]."""
    mid = 0.5 * (t0 + t1)
    return np.clip(1.0 - np.abs(t - mid) / (mid - t0), 0.0, None)


def circle(t: np.ndarray, p: ProfileParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """v constant; w ramps from 0 to ``yaw_rate_radps`` between 6 and 8 s and stays."""
    v = np.full_like(t, p.speed_mps)
    return v, p.yaw_rate_radps * ramp(t, 6.0, 8.0), np.zeros_like(t)


def circle_speed_change(t: np.ndarray, p: ProfileParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """w as ``circle``; from v0 = speed_mps / 2, a is a +accel triangle over 4-8 s and a -accel one over 12-16 s
    (each changes v by 2 * accel_mps2)."""
    a = p.accel_mps2 * (_triangle(t, 4.0, 8.0) - _triangle(t, 12.0, 16.0))
    # integral of a triangle of height A on [t0, t0 + 4]: piecewise quadratic, written through the ramp's square
    def tri_integral(t0: float) -> np.ndarray:
        u = np.clip(t - t0, 0.0, 4.0)
        rise = np.minimum(u, 2.0)
        fall = np.clip(u - 2.0, 0.0, 2.0)
        return 0.5 * rise**2 / 2.0 + (fall - 0.5 * fall**2 / 2.0)
    v = 0.5 * p.speed_mps + p.accel_mps2 * (tri_integral(4.0) - tri_integral(12.0))
    return v, p.yaw_rate_radps * ramp(t, 6.0, 8.0), a


def s_curve(t: np.ndarray, p: ProfileParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """v constant; w = +yaw_rate over 6-12 s and -yaw_rate over 16-22 s, trapezoids with 2 s ramps."""
    w = p.yaw_rate_radps * (trapezoid(t, 6.0, 12.0, 2.0) - trapezoid(t, 16.0, 22.0, 2.0))
    return np.full_like(t, p.speed_mps), w, np.zeros_like(t)


def sinusoid(t: np.ndarray, p: ProfileParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Plexe sinusoidal: v = speed + amplitude sin(2 pi f (t - start)) from ``start_s``; straight."""
    phase = 2 * np.pi * p.frequency_hz * np.maximum(t - p.start_s, 0.0)
    on = t >= p.start_s
    v = p.speed_mps + np.where(on, p.amplitude_mps * np.sin(phase), 0.0)
    a = np.where(on, p.amplitude_mps * 2 * np.pi * p.frequency_hz * np.cos(phase), 0.0)
    return v, np.zeros_like(t), a


def weave(t: np.ndarray, p: ProfileParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Constant speed; from ``start_s`` the yaw rate is w = yaw_rate sin(2 pi f (t - start)): a slalom whose
    frequency response along the chain is the lateral string-stability gain |Gamma_lat(j 2 pi f)|."""
    phase = 2 * np.pi * p.frequency_hz * np.maximum(t - p.start_s, 0.0)
    w = np.where(t >= p.start_s, p.yaw_rate_radps * np.sin(phase), 0.0)
    return np.full_like(t, p.speed_mps), w, np.zeros_like(t)


def braking(t: np.ndarray, p: ProfileParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Plexe braking: cruise at ``speed_mps``, brake at ``decel_mps2`` from ``start_s`` to standstill."""
    v = np.maximum(p.speed_mps - p.decel_mps2 * np.maximum(t - p.start_s, 0.0), 0.0)
    a = np.where((t >= p.start_s) & (v > 0.0), -p.decel_mps2, 0.0)
    return v, np.zeros_like(t), a


def constant(t: np.ndarray, p: ProfileParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Straight at constant speed."""
    return np.full_like(t, p.speed_mps), np.zeros_like(t), np.zeros_like(t)


PROFILES: dict[str, Callable[[np.ndarray, ProfileParams], tuple[np.ndarray, np.ndarray, np.ndarray]]] = {
    "circle": circle,
    "circle_speed_change": circle_speed_change,
    "s_curve": s_curve,
    "sinusoid": sinusoid,
    "weave": weave,
    "braking": braking,
    "constant": constant,
}
