"""A robot's vehicle as the physics federate reads it from the robot's config: its parameters (the preset with
the scenario's overrides) and the (model, input mode) group it is stepped in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.core.robots import RobotSpec, SharedParams, shared_rows

from .presets import preset

GroupKey = tuple[str, str]  # (vehicle model, input mode)


def vehicle_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """A robot's vehicle parameters: its preset merged with its overrides."""
    vehicle = config.get("vehicle", {})
    params = preset(vehicle.get("preset", "auna_rc_1to10"))
    params.update(vehicle.get("params", {}) or {})
    return params


def group_key(config: Mapping[str, Any]) -> GroupKey:
    """The (model, input mode) a robot is stepped with: ``vehicle.model`` and the ``input_mode`` parameter."""
    vehicle = config.get("vehicle", {})
    mode = (vehicle.get("params", {}) or {}).get("input_mode", "speed_steer")
    return str(vehicle.get("model", "kinematic")), str(mode)


def robot_params(robots: Sequence[RobotSpec]) -> SharedParams:
    """The vehicle parameters of ``robots``, computed once per distinct vehicle block (robots of one template
    share theirs)."""
    blocks, index = shared_rows([robot.config.get("vehicle") for robot in robots])
    return SharedParams([vehicle_params({} if block is None else {"vehicle": block}) for block in blocks], index)


__all__ = ["GroupKey", "group_key", "robot_params", "vehicle_params"]
