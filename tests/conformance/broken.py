"""Deliberately broken plug-ins: each breaks one contract of ``checks.py`` (``test_the_suite_bites.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numba import njit

from comms_models.ideal import IdealChannel
from controllers.cruise import Cruise
from controllers.profiles import SCurve
from federates.physics.models.kinematic import KinematicBicycle
from federates.physics.models.tyres import TyreModel
from federates.physics.presets import preset


class NanAtStandstill(Cruise):
    """Divides by the own speed: NaN at v = 0 (silently, as a compiled kernel would)."""

    def compute(self, ego, pred, leader, sensors, dt):
        with np.errstate(divide="ignore", invalid="ignore"):
            return {"accel": (1.0 - ego["v"]) / ego["v"] * ego["v"]}


class OneValueForAllRows(Cruise):
    """Returns a scalar instead of one value per row."""

    def compute(self, ego, pred, leader, sensors, dt):
        return {"accel": np.float64(0.0)}


class CoupledRows(Cruise):
    """Adds the group's mean speed to every row's command."""

    def compute(self, ego, pred, leader, sensors, dt):
        accel = super().compute(ego, pred, leader, sensors, dt)["accel"]
        return {"accel": accel + 0.1 * np.mean(ego["v"])}


class FloatIds(IdealChannel):
    """Delivers the receiver ids as float64."""

    def step(self, t_ns: int, estimate: Mapping[str, np.ndarray], interest: Any) -> dict[str, np.ndarray]:
        out = super().step(t_ns, estimate, interest)
        return {**out, "receiver": out["receiver"].astype(np.float64)}


class Unseeded(IdealChannel):
    """Drops messages at random without using the seed."""

    def step(self, t_ns: int, estimate: Mapping[str, np.ndarray], interest: Any) -> dict[str, np.ndarray]:
        out = super().step(t_ns, estimate, interest)
        keep = np.random.default_rng().random(len(out["receiver"])) < 0.5
        return {key: value[keep] for key, value in out.items()}


class NanYawRate(KinematicBicycle):
    """Reports a NaN yaw rate for the second robot."""

    @property
    def state(self) -> dict[str, np.ndarray]:
        state = dict(super().state)
        state["yaw_rate"] = state["yaw_rate"].copy()
        state["yaw_rate"][1:2] = np.nan
        return state


class Stateful(SCurve):
    """Its speed depends on how often it was asked: not a function of time."""

    calls = 0

    def inputs(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        Stateful.calls += 1
        v, w, a = super().inputs(t)
        return v + Stateful.calls, w, a


@njit
def _wrong_way(alpha, fz, c_alpha, mu):  # pragma: no cover - compiled
    return c_alpha * alpha, c_alpha


class WrongWayTyre(TyreModel):
    """Pushes along the slip instead of against it."""

    lateral = _wrong_way


NEGATIVE_MASS = {**preset("passenger_car"), "mass_kg": -1500.0}
"""A vehicle preset with a mass below zero."""
