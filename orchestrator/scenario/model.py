"""The scenario schema (version 1): what a YAML scenario may say, with types, ranges and defaults.

Every registry-backed field (``controller.type``, ``channel.type``, ``vehicles...model``, ``leader.profile``,
``federates[].type``) takes a built-in name, an installed entry point's name or a ``package.module:Class`` path.
The selected class's own ``Params`` model validates its parameters (``loader._check_plugins``), so adding a law,
channel, vehicle model, profile or federate never touches this file.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationInfo, field_validator, model_validator

from controllers.pipeline import FEDERATE_KEYS, FallbackStageParams
from controllers.pure_pursuit import PurePursuitParams, WaypointDriverParams
from federates.physics.config import PhysicsConfig


class Strict(BaseModel):
    """Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class Initial(Strict):
    """Initial pose of the rear-axle reference point in the local ENU frame and speed. A field left out keeps its
    default placement (leaders at the origin or first waypoint, followers at their desired gap behind)."""

    x: float | None = Field(None, description="[m] east")
    y: float | None = Field(None, description="[m] north")
    yaw: float | None = Field(None, description="[rad] counter-clockwise from east")
    v: float | None = Field(None, ge=0, description="[m/s]")


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
        from federates.physics.presets import PRESETS

        if value not in PRESETS:
            raise ValueError(f"unknown vehicle preset '{value}'{_did_you_mean(value, PRESETS)}; allowed: "
                             f"{', '.join(sorted(PRESETS))}")
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
        from federates.physics.presets import parameter_problems

        # the model's own parameters are checked by its Params model, at their lines (loader._check_plugins)
        own = set(vehicle_model_fields(info.data.get("model")))
        problems = parameter_problems({k: v for k, v in value.items() if k not in own})
        if problems:
            raise ValueError("; ".join(problems))
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

    name: str | None = Field(None, description="robot name (default: <name_prefix><index>)")
    id: int | None = Field(None, ge=1, le=4294967295, strict=True, description="station id (default: index + 1)")
    vehicle: Vehicle | None = None
    controller: dict[str, Any] | None = Field(None, description="overrides of the controller block")
    initial: Initial | None = None
    spawn_at_s: float = Field(0.0, ge=0, description="[s] when the robot appears")
    despawn_at_s: float | None = Field(None, gt=0, description="[s] when it disappears (never by default)")


class Fleet(Strict):
    """``count`` robots built from one template, with optional per-robot overrides keyed by robot name."""

    count: int = Field(ge=1, le=100_000, strict=True)  # strict: `count: true` is not one robot
    name_prefix: str = "robot"
    template: Vehicle = Field(default_factory=Vehicle)
    overrides: dict[str, VehicleEntry] = Field(default_factory=dict)


def _vehicles_kind(value: Any) -> str:
    return "list" if isinstance(value, list) else "fleet"


VehiclesBlock = Annotated[
    Annotated[Fleet, Tag("fleet")] | Annotated[list[VehicleEntry], Tag("list")],
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
        from orchestrator.core.registry import is_plugin_path

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
        return self


BLOCK_KEYS = FEDERATE_KEYS
"""Keys of the controller block that configure the control pipeline, not the law."""


FallbackBlock = FallbackStageParams
"""Graceful degradation: CACC -> ACC on the robot's own range sensor when predecessor data is stale."""


class ControllerBlock(BaseModel):
    """The followers' control law; keys besides ``BLOCK_KEYS`` are the law's parameters."""

    model_config = ConfigDict(extra="allow")

    type: str = Field("ela_cacc", description="control law: a built-in, an entry point of 'coopsim.controllers' or "
                      "a 'package.module:Class' path")
    period_s: float = Field(0.02, gt=0, description="[s] control period (zero-order hold between steps)")
    predict: Literal["none", "ctrv"] = Field(
        "none",
        description="how received predecessor/leader data is used: as received (none), or predicted to the "
        "control instant with constant turn rate and velocity from its generation time (ctrv)",
    )
    lateral: PurePursuitParams | None = Field(
        None, description="pure pursuit on the predecessor's received path, for laws that do not steer"
    )
    fallback: FallbackBlock | None = Field(None, description="CACC -> ACC degradation (off when absent)")

    @field_validator("type")
    @classmethod
    def _known_law(cls, value: str) -> str:
        from controllers import CONTROLLERS

        CONTROLLERS.resolve(value)
        return value


def merge_controller(base: dict[str, Any], override: dict[str, Any] | None) -> dict[str, Any]:
    """A robot's controller block: the scenario's block with the robot's override on top. An override that names
    another law keeps the federate-level keys (period, prediction, lateral, fallback) but not the old law's
    parameters."""
    if not override:
        return dict(base)
    if override.get("type", base["type"]) != base["type"]:
        return {**{k: base[k] for k in BLOCK_KEYS if k in base and k != "type"}, **override}
    return {**base, **override}


class ChannelBlock(BaseModel):
    """The V2X channel model; keys besides ``type`` are the model's parameters."""

    model_config = ConfigDict(extra="allow")

    type: str = Field("ideal", description="channel model: ideal | itsg5, an entry point of 'coopsim.channels' or a "
                      "'package.module:Class' path")

    @field_validator("type")
    @classmethod
    def _known_channel(cls, value: str) -> str:
        from comms_models import COMMS_MODELS

        COMMS_MODELS.resolve(value)
        return value


class Origin(Strict):
    """WGS84 position of the local frame's origin (for V2X positions)."""

    lat_deg: float = Field(51.4934, gt=-89.9, lt=89.9, description="[deg] (the local frame needs an east direction)")
    lon_deg: float = Field(7.4136, ge=-180, le=180)


class Outputs(Strict):
    """What a run writes into its directory."""

    trace: bool = Field(True, description="write trace/vehicles.parquet (and the channel's traces)")
    trace_period_s: float | None = Field(None, gt=0, description="[s] sampling of the trace (default: every step)")
    plots: bool = True
    report: bool = True


class ExtraFederate(Strict):
    """An additional federate (external simulator): a registered type or a ``package.module:Class`` path."""

    name: str
    type: str
    params: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the federate")
    remote: str | None = Field(
        None, description="host:port of a 'coopsim host' that runs this federate over gRPC (type and params are "
        "resolved there)"
    )
    connect_timeout_s: float = Field(10.0, gt=0, description="how long to wait for the remote host at setup [s]")
    call_timeout_s: float = Field(60.0, gt=0, description="how long to wait for each answer of a remote host [s]")

    @field_validator("remote")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is not None:
            host, _, port = value.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"remote must be 'host:port' with a port in 1-65535, got '{value}'")
        return value

    @field_validator("type")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        from federates import FEDERATE_KINDS

        return FEDERATE_KINDS.check(value)  # imported by _constructible (here) or by the host (remote)

    @model_validator(mode="after")
    def _constructible(self) -> ExtraFederate:
        """The class imports and takes (name, **params): checked before anything runs (by the host, for a remote
        federate, whose code need not exist here)."""
        import inspect

        if self.remote is not None:
            return self

        from federates import FEDERATE_KINDS
        from orchestrator.core.registry import UnknownNameError

        try:
            federate_cls = FEDERATE_KINDS.get(self.type)
        except (UnknownNameError, ImportError) as exc:
            raise ValueError(str(exc)) from None
        if getattr(federate_cls, "Params", None) is not None:
            return self  # a Params model checks the parameters, at their lines (loader._check_plugins)
        try:
            inspect.signature(federate_cls).bind(self.name, **self.params)
        except TypeError as exc:
            accepted = [p for p in inspect.signature(federate_cls).parameters if p != "name"]
            raise ValueError(f"params of '{self.type}': {exc}; it takes: {', '.join(accepted) or 'nothing'}") from None
        return self


class Scenario(Strict):
    """A complete, validated scenario. Checks that relate fields of different blocks (the trace period on the step
    grid, unique federate names) are the loader's, so that each is reported at its own field and line."""

    version: Literal[1] = 1
    name: str = "scenario"
    description: str = ""
    seed: int = Field(0, ge=0, le=2**32 - 1, strict=True)
    duration_s: float = Field(gt=0, le=1e6, description="[s] simulated time")
    step_s: float = Field(0.01, gt=0, le=1.0, description="[s] physics step")
    origin: Origin = Field(default_factory=Origin)
    vehicles: VehiclesBlock
    platoon: Platoon = Field(default_factory=Platoon)
    leader: Driver = Field(default_factory=Driver)
    controller: ControllerBlock = Field(default_factory=ControllerBlock)
    channel: ChannelBlock = Field(default_factory=ChannelBlock)
    physics: PhysicsConfig = Field(default_factory=PhysicsConfig)
    outputs: Outputs = Field(default_factory=Outputs)
    federates: list[ExtraFederate] = Field(default_factory=list)


def _did_you_mean(value: str, choices: Any) -> str:
    import difflib

    close = difflib.get_close_matches(value, list(choices), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""
