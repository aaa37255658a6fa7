"""A robot's vehicle as the physics federate reads it from the robot's config: its parameters (the preset with
the scenario's overrides) and the (model, input mode) group it is stepped in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.robots import RobotSpec, SharedParams

from .presets import preset
from .spawn_columns import config_column, shared_blocks, spec_column

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


def params_of_blocks(blocks: Sequence[Mapping[str, Any] | None], index: np.ndarray) -> SharedParams:
    """The vehicle parameters of distinct vehicle blocks (``shared_rows``), one merge per block."""
    return SharedParams([vehicle_params({} if block is None else {"vehicle": block}) for block in blocks], index)


def robot_params(robots: Sequence[RobotSpec], configs: Sequence[Mapping[str, Any]] | None = None) -> SharedParams:
    """The vehicle parameters of ``robots``, computed once per distinct vehicle block (robots of one template
    share theirs); ``configs``: the robots' configs when the caller has them already."""
    configs = spec_column(robots, "config") if configs is None else configs
    return params_of_blocks(*shared_blocks(config_column(configs, "vehicle")))


_NO_DIMS: Mapping[str, float] = {}  # a robot whose body is its vehicle's (read-only, shared)


def body_sizes(robots: Sequence[RobotSpec], params: SharedParams, keys: Sequence[str],
               configs: Sequence[Mapping[str, Any]] | None = None) -> list[np.ndarray]:
    """Each body size in ``keys`` [m] per robot: the robot's own ``dims`` where given, else its vehicle's (once per
    distinct dims block)."""
    configs = spec_column(robots, "config") if configs is None else configs
    dims, dims_of = shared_blocks(config_column(configs, "dims", _NO_DIMS))
    sizes = []
    for key in keys:
        given = np.array([float(d.get(key, np.nan)) for d in dims])[dims_of]
        sizes.append(np.where(np.isnan(given), params.column(key), given))
    return sizes


__all__ = ["GroupKey", "body_sizes", "group_key", "params_of_blocks", "robot_params", "vehicle_params"]
