"""The vehicle-model interface: vectorised dynamics over the robots that use one model.

A model owns per-robot parameter and state arrays in the physics federate's row order for its group. State
exposed to the rest of the system (``STATE_FIELDS``: pose of the rear-axle reference point, speed, acceleration,
yaw rate, steering angle) is read through ``state``; internal states (lateral velocity, actuator lags ...) stay
inside. Commands arrive as ``speed``, ``accel``, ``steer``, ``yaw_rate`` arrays; ``input_mode`` says which pair the
model uses.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import numpy as np

InputMode = Literal["speed_steer", "accel_steer", "speed_yaw_rate", "accel_yaw_rate"]


class VehicleModel(ABC):
    """Base class of vehicle models."""

    input_mode: ClassVar[InputMode] = "speed_steer"

    def __init__(self, dt: float) -> None:
        self.dt = dt

    @abstractmethod
    def add(self, params: Sequence[Mapping[str, Any]], initial: Mapping[str, np.ndarray]) -> None:
        """Append robots: one parameter mapping each (preset merged with overrides; read-only, shared by robots of
        one template: ``core.robots.param_column`` reads one parameter of all of them at once) and
        their initial ``x, y, yaw, v`` arrays."""

    @abstractmethod
    def remove(self, rows: np.ndarray) -> None:
        """Delete the robots at these rows of this model's group."""

    @abstractmethod
    def step(self, commands: Mapping[str, np.ndarray]) -> None:
        """Advance every robot by ``dt`` under the given commands (rows aligned with the group)."""

    @property
    @abstractmethod
    def state(self) -> dict[str, np.ndarray]:
        """Current ``x, y, yaw, v, a, yaw_rate, steer`` arrays (may be views; copy to keep)."""
