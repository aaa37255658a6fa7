"""Leader input profiles: unicycle inputs (speed v, yaw rate w, acceleration a) as functions of time.

The shapes are those used to evaluate platoon controllers (Bayuwindra et al. 2020 and the AuNa evaluation;
Plexe): AuNa's circle, circle with speed
change and S-curve; Plexe's sinusoid and emergency braking; a lateral weave (the steering counterpart of the
sinusoid) to measure lateral string stability at one frequency. Each function is vectorised over time ``t`` [s].

Profiles are a registry (``controllers.LEADER_PROFILES``, entry-point group ``coopsim.profiles``): a profile is a
``LeaderProfile`` subclass whose ``Params`` model validates the scenario's ``leader.params``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from . import LEADER_PROFILES
from .base import ControllerParams

Inputs = tuple[np.ndarray, np.ndarray, np.ndarray]
"""Speed v [m/s], yaw rate w [rad/s] and acceleration a [m/s^2], one value per time sample."""

Profile = Callable[[np.ndarray, Any], Inputs]


class ShapeParams(ControllerParams):
    """Shape parameters shared by the built-in profiles (each profile uses the ones it names); unknown keys are
    errors."""

    speed_mps: float = Field(1.0, ge=0, description="cruise speed v [m/s] (circle, s_curve; sinusoid/braking mean)")
    yaw_rate_radps: float = Field(0.1, description="turn rate w on the arcs [rad/s]")
    accel_mps2: float = Field(0.25, ge=0, description="peak of the acceleration triangles [m/s^2]")
    amplitude_mps: float = Field(10 / 3.6, ge=0, description="sinusoid amplitude [m/s]")
    frequency_hz: float = Field(0.2, gt=0, description="sinusoid / weave frequency [Hz]")
    start_s: float = Field(5.0, ge=0, description="sinusoid / weave / braking start time [s]")
    decel_mps2: float = Field(8.0, gt=0, description="emergency braking deceleration [m/s^2]")


class ProfileParams(ShapeParams):
    """``leader.params`` as a driver configuration carries them: the built-in shape parameters, plus the keys of a
    plug-in profile's own ``Params`` (kept, not checked: the selected profile validates them, see
    ``profile_params``)."""

    model_config = ConfigDict(extra="allow", frozen=True)


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


class LeaderProfile(ABC):
    """Base class of leader input profiles: unicycle inputs as functions of time, vectorised over ``t``.

    ``Params`` is the pydantic model of the profile's parameters (the scenario's ``leader.params``); an instance
    is built from validated parameters and must be a pure function of time (the control federate evaluates it once
    for the whole run).
    """

    Params: ClassVar[type[BaseModel]] = ShapeParams

    def __init__(self, params: BaseModel) -> None:
        self.params = params

    @abstractmethod
    def inputs(self, t: np.ndarray) -> Inputs:
        """``(v, w, a)`` at the times ``t`` [s]: speed [m/s], yaw rate [rad/s], acceleration [m/s^2]."""


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


class _Shape(LeaderProfile):
    """A built-in profile: one of the shape functions above on ``ShapeParams``."""

    shape: ClassVar[Callable[[np.ndarray, Any], Inputs]]

    def inputs(self, t: np.ndarray) -> Inputs:
        """The shape function at ``t``."""
        return type(self).shape(np.asarray(t, dtype=np.float64), self.params)


def _builtin(name: str, function: Callable[[np.ndarray, Any], Inputs]) -> type[LeaderProfile]:
    return type(name, (_Shape,), {"shape": staticmethod(function), "__doc__": function.__doc__,
                                  "__module__": __name__, "__qualname__": name})


Circle = _builtin("Circle", circle)
CircleSpeedChange = _builtin("CircleSpeedChange", circle_speed_change)
SCurve = _builtin("SCurve", s_curve)
Sinusoid = _builtin("Sinusoid", sinusoid)
Weave = _builtin("Weave", weave)
Braking = _builtin("Braking", braking)
Constant = _builtin("Constant", constant)


def profile_params(name: str, given: BaseModel | Mapping[str, Any] | None = None) -> BaseModel:
    """The parameters of profile ``name`` validated by its own ``Params`` (``given``: a mapping, or a parameter
    model whose explicitly set fields are taken)."""
    if isinstance(given, BaseModel):
        given = given.model_dump(exclude_unset=True)
    return LEADER_PROFILES.get(name).Params.model_validate(dict(given or {}))


def profile_inputs(name: str, params: BaseModel | Mapping[str, Any] | None, t: np.ndarray) -> Inputs:
    """``(v, w, a)`` of profile ``name`` with ``params`` at the times ``t`` [s]."""
    cls = LEADER_PROFILES.get(name)
    return cls(profile_params(name, params)).inputs(np.asarray(t, dtype=np.float64))

