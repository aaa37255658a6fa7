"""A vehicle model plug-in: a unicycle whose speed follows the command through a first-order lag.

    v' = (v_cmd - v) / tau,   yaw' = w_cmd,   x' = v cos(yaw),   y' = v sin(yaw)

Commands are ``speed`` and ``yaw_rate`` (``input_mode`` "speed_yaw_rate" would be the matching name; the model
takes the default mode, so it needs no ``input_mode`` parameter). Its own parameter ``tau_s`` is declared in
``Params``: the scenario's ``vehicles...params`` validate it at its line, next to the preset's parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from federates.physics.models.base import VehicleModel

_STATE = ("x", "y", "yaw", "v", "a", "yaw_rate", "steer")


class LagParams(BaseModel):
    """The model's own parameters (in ``vehicles...params``)."""

    model_config = ConfigDict(extra="forbid")

    tau_s: float = Field(0.3, gt=0, description="time constant of the speed response [s]")


class LagUnicycle(VehicleModel):
    """Unicycle with a first-order speed lag, exact for constant commands over a step."""

    Params = LagParams

    def __init__(self, dt: float) -> None:
        super().__init__(dt)
        self._s = {name: np.empty(0) for name in _STATE}
        self._tau = np.empty(0)

    def add(self, params: Sequence[Mapping[str, Any]], initial: Mapping[str, np.ndarray]) -> None:
        """Append robots; ``tau_s`` from each robot's parameters (the default when not given)."""
        n = len(params)
        tau = [LagParams(**{k: p[k] for k in LagParams.model_fields if k in p}).tau_s for p in params]
        self._tau = np.concatenate([self._tau, tau])
        new = {"x": initial["x"], "y": initial["y"], "yaw": initial["yaw"], "v": initial["v"]}
        for name in _STATE:
            column = np.asarray(new.get(name, np.zeros(n)), dtype=np.float64)
            self._s[name] = np.concatenate([self._s[name], column])

    def remove(self, rows: np.ndarray) -> None:
        """Delete the robots at ``rows``."""
        keep = np.ones(len(self._tau), bool)
        keep[rows] = False
        self._tau = self._tau[keep]
        self._s = {name: value[keep] for name, value in self._s.items()}

    def step(self, commands: Mapping[str, np.ndarray]) -> None:
        """One step of ``dt`` under ``speed`` [m/s] and ``yaw_rate`` [rad/s]."""
        s, dt = self._s, self.dt
        v0 = s["v"]
        target = np.maximum(np.asarray(commands["speed"], np.float64), 0.0)
        v1 = target + (v0 - target) * np.exp(-dt / self._tau)
        w = np.asarray(commands["yaw_rate"], np.float64)
        yaw_mid = s["yaw"] + 0.5 * w * dt
        s["x"] = s["x"] + 0.5 * (v0 + v1) * dt * np.cos(yaw_mid)
        s["y"] = s["y"] + 0.5 * (v0 + v1) * dt * np.sin(yaw_mid)
        s["yaw"] = np.arctan2(np.sin(s["yaw"] + w * dt), np.cos(s["yaw"] + w * dt))
        s["a"] = (v1 - v0) / dt
        s["v"] = v1
        s["yaw_rate"] = w.copy()

    @property
    def state(self) -> dict[str, np.ndarray]:
        """``x, y, yaw, v, a, yaw_rate, steer`` (steer is always 0: no steering geometry)."""
        return self._s
