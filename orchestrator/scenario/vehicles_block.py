"""The robots' blocks of a scenario: vehicles (a list or a fleet), the platoon grouping and the leaders' drive."""

from __future__ import annotations

import difflib
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from controllers.pure_pursuit import WaypointDriverParams
from core.params import COORDINATE_LIMIT_M, FileName, Strict, raise_at

from .drivers_block import CommandSource

MAX_NAME_LENGTH = 64
"""Names label every table row, legend and file name of a run: a bound keeps them readable (and cheap)."""
MAX_INITIAL_SPEED_MPS = 150.0
"""Faster than any road vehicle: a start speed beyond it is a typo (1e20 overflows every metric downstream)."""


class Initial(Strict):
    """Initial pose of the rear-axle reference point in the local ENU frame and speed. A field left out keeps its
    default placement (leaders at the origin or first waypoint, followers at their desired gap behind)."""

    x: float | None = Field(None, ge=-COORDINATE_LIMIT_M, le=COORDINATE_LIMIT_M,
                            description="[m] east, within 100 km of the origin")
    y: float | None = Field(None, ge=-COORDINATE_LIMIT_M, le=COORDINATE_LIMIT_M,
                            description="[m] north, within 100 km of the origin")
    yaw: float | None = Field(None, description="[rad] counter-clockwise from east")
    v: float | None = Field(None, ge=0, le=MAX_INITIAL_SPEED_MPS, description="[m/s], at most 150 (540 km/h)")


class Vehicle(Strict):
    """Body and physics model of a robot."""

    preset: str = Field("auna_rc_1to10", description="vehicle preset (federates/physics/presets.py)")
    model: str = Field("kinematic", description="vehicle model: kinematic | dynamic | unicycle, an entry point of "
                       "'coopsim.vehicle_models' or a 'package.module:Class' path")
    params: dict[str, Any] = Field(default_factory=dict, description="overrides of preset values (and the model's "
                                   "own parameters, for a model with a Params model)")

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, value: str) -> str:
        from core.registry import is_stand_in
        from federates.physics.presets import PRESETS, preset

        if not is_stand_in(PRESETS.resolve(value)):  # unknown names: ValueError listing the allowed ones
            preset(value)  # a plug-in preset must be a mapping (ValueError)
        return value

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str) -> str:
        from federates.physics.models import VEHICLE_MODELS

        VEHICLE_MODELS.resolve(value)
        return value

    @field_validator("params")
    @classmethod
    def _known_params(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        from core.registry import is_stand_in
        from federates.physics.models import VEHICLE_MODELS
        from federates.physics.presets import parameter_problems, parameter_range_problems

        model = info.data.get("model")
        if model is not None and is_stand_in(VEHICLE_MODELS.get(model)):
            return value  # a run read back without its model plug-in: its own parameters cannot be told apart
        # the model's own parameters are checked by its Params model, at their lines (loader.check_plugins)
        own = set(vehicle_model_fields(model))
        mine = {k: v for k, v in value.items() if k not in own}
        problems = parameter_problems(mine)
        if problems:
            raise ValueError("; ".join(problems))
        out_of_range = parameter_range_problems(mine)
        if out_of_range:  # each at its own key and line
            raise_at("Vehicle", [((key,), message, mine[key]) for key, message in out_of_range])
        return value


def vehicle_model_fields(model: str | None) -> list[str]:
    """The parameter names a vehicle model declares in its own ``Params`` (none for the built-in models, whose
    parameters are the presets')."""
    from federates.physics.models import VEHICLE_MODELS

    if model is None:
        return []
    params = getattr(VEHICLE_MODELS.get(model), "Params", None)
    return sorted(params.model_fields) if params is not None else []


class VehicleEntry(Strict):
    """One robot of a vehicle list, or an override of one robot of a fleet."""

    name: FileName | None = Field(None, min_length=1, max_length=MAX_NAME_LENGTH,
                             description="robot name (default: <name_prefix><index>), at most 64 characters")
    id: int | None = Field(None, ge=1, le=4294967295, strict=True, description="station id (default: index + 1)")
    vehicle: Vehicle | None = None
    controller: dict[str, Any] | None = Field(None, description="overrides of the controller block")
    driver: CommandSource | None = Field(None, description="an external source of this robot's commands (default: "
                                         "the built-in leader profile or control law)")
    initial: Initial | None = None
    spawn_at_s: float = Field(0.0, ge=0, description="[s] when the robot appears, before the end of the run")
    despawn_at_s: float | None = Field(None, gt=0, description="[s] when it disappears (never by default): after "
                                       "spawn_at_s and not after the end of the run")


class Fleet(Strict):
    """``count`` robots built from one template, with optional per-robot overrides keyed by robot name."""

    # strict: `count: true` is not one robot. The bound is the format's; whether a fleet fits this machine depends on
    # the run's length and traces, which the resource estimate checks (orchestrator.build.resources.resource_problems)
    count: int = Field(ge=1, le=100_000, strict=True)
    name_prefix: FileName = Field("robot", max_length=MAX_NAME_LENGTH - 6,
                                  description="robot names: <name_prefix><index>")
    template: Vehicle = Field(default_factory=Vehicle)
    overrides: dict[str, VehicleEntry] = Field(default_factory=dict)


def _vehicles_kind(value: Any) -> str:
    return "list" if isinstance(value, list) else "fleet"


VehiclesBlock = Annotated[
    Annotated[Fleet, Tag("fleet")] | Annotated[list[VehicleEntry], Tag("list"), Field(min_length=1)],
    Discriminator(_vehicles_kind),
]


class Platoon(Strict):
    """How robots form platoons: consecutive robots in vehicle order, ``size`` per platoon."""

    size: int | None = Field(None, ge=1, strict=True, description="robots per platoon (default: all in one)")
    lateral_spacing_m: float = Field(5.0, gt=0, description="[m] between platoons placed side by side")


WAYPOINTS = "waypoints"
"""The leader profile that follows ``leader.path`` by pure pursuit instead of an input profile."""


def profile_params_model(profile: str) -> type[BaseModel]:
    """The model validating ``leader.params`` for ``profile`` (the built-in shape parameters for 'waypoints')."""
    from controllers import LEADER_PROFILES
    from controllers.profiles import ShapeParams

    return ShapeParams if profile == WAYPOINTS else LEADER_PROFILES.get(profile).Params


class Driver(Strict):
    """The leaders' driving: a synthetic input profile (controllers.profiles), or ``profile: waypoints`` with a
    ``path`` followed by pure pursuit."""

    profile: str = Field("s_curve", description="leader input profile (a built-in, an entry point of "
                         "'coopsim.profiles' or a 'package.module:Class' path), or 'waypoints'")
    params: dict[str, Any] = Field(default_factory=dict, description="the profile's parameters (its Params model)")
    path: WaypointDriverParams | None = Field(None, description="the track for profile 'waypoints'")

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, value: str) -> str:
        from controllers import LEADER_PROFILES
        from core.registry import is_plugin_path

        if value == WAYPOINTS:
            return value
        if not is_plugin_path(value) and value not in LEADER_PROFILES:
            names = sorted([*LEADER_PROFILES.names(), WAYPOINTS])
            raise ValueError(f"unknown leader profile '{value}'{_did_you_mean(value, names)}; allowed: "
                             f"{', '.join(names)} or a 'package.module:Class' path")
        LEADER_PROFILES.resolve(value)
        return value

    @model_validator(mode="after")
    def _path_for_waypoints(self) -> Driver:
        if self.profile == WAYPOINTS and self.path is None:
            raise ValueError("profile 'waypoints' needs a 'path' with at least two waypoints")
        if self.path is not None:
            far = [(("path", "waypoints", i, j), value) for i, point in enumerate(self.path.waypoints)
                   for j, value in enumerate(point) if abs(value) > COORDINATE_LIMIT_M]
            if far:
                raise_at("Driver", [(loc, f"must be in [-{COORDINATE_LIMIT_M:g}, {COORDINATE_LIMIT_M:g}] m (within "
                                          f"100 km of the origin), got {value:g}", value) for loc, value in far])
        return self


def _did_you_mean(value: str, choices: Any) -> str:

    close = difflib.get_close_matches(value, list(choices), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""
