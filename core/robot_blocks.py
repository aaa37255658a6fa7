"""A robot's resolved configuration as typed, frozen blocks: what every federate and every report reads.

The world resolves each robot once (``orchestrator.build.world``): its vehicle (the preset merged with the
scenario's overrides), its body's dimensions, its start state, and who drives it: a leader's drive, a follower's
controller, or an outside command source. Robots built from one template share their block objects, so a federate
does per-block work once per distinct block (``core.robots.shared_rows``), not once per robot.

Blocks cross process boundaries as plain data (``robot_config`` / ``robot_from_fields``): the remote protocol
carries the same ``config`` mapping it always has (``vehicle``, ``initial``, ``dims`` and one of ``controller``,
``driver``, ``command_source``, plus ``posed_by``), and a robot a plug-in asks for is resolved here like the
world's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .vehicle_presets import preset

DEFAULT_PRESET = "auna_rc_1to10"
DEFAULT_MODEL = "kinematic"
DEFAULT_INPUT_MODE = "speed_steer"


@dataclass(frozen=True)
class Dims:
    """A robot body's size [m]: the rear axle is the reference point, the bumper ``rear_overhang_m`` behind it."""

    length_m: float
    width_m: float
    rear_overhang_m: float
    wheelbase_m: float

    @classmethod
    def of(cls, given: Mapping[str, Any], fallback: Dims | Mapping[str, Any]) -> Dims:
        """The sizes in ``given``, each missing one taken from ``fallback`` (the vehicle's)."""
        base = fallback.plain() if isinstance(fallback, Dims) else fallback
        return cls(**{f.name: float(given.get(f.name, base[f.name])) for f in fields(cls)})

    def plain(self) -> dict[str, float]:
        """As plain data."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class VehicleBlock:
    """A robot's vehicle: its preset and model as the scenario names them, the scenario's overrides, and (derived
    once, here) ``params``, the preset merged with the overrides, which the vehicle models step with (read-only:
    robots of one template share it). Parameters stay a mapping by name because each vehicle model, a plug-in's
    too, declares its own."""

    preset: str = DEFAULT_PRESET
    model: str = DEFAULT_MODEL
    overrides: Mapping[str, Any] = field(default_factory=dict)
    params: Mapping[str, Any] = field(init=False, compare=False, repr=False)
    dims: Dims = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        params = preset(self.preset)
        params.update(self.overrides)
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "dims", Dims.of({}, params))

    @property
    def input_mode(self) -> str:
        """The input mode the model is stepped in (``input_mode`` override; presets leave it at the default)."""
        return str(self.overrides.get("input_mode", DEFAULT_INPUT_MODE))

    @classmethod
    def from_plain(cls, block: Mapping[str, Any] | None) -> VehicleBlock:
        """A vehicle block from its scenario form ``{preset, model, params}`` (missing keys: the defaults)."""
        block = block or {}
        return cls(str(block.get("preset", DEFAULT_PRESET)), str(block.get("model", DEFAULT_MODEL)),
                   dict(block.get("params") or {}))

    def plain(self) -> dict[str, Any]:
        """The scenario form: ``{preset, model, params}`` with the overrides as ``params``."""
        return {"preset": self.preset, "model": self.model, "params": dict(self.overrides)}


@dataclass(frozen=True)
class InitialState:
    """Start pose of the rear-axle point in the local ENU frame [m, rad] and start speed [m/s]."""

    x: float = 0.0
    y: float = 0.0
    yaw: float = 0.0
    v: float = 0.0

    @classmethod
    def from_plain(cls, given: Mapping[str, Any] | None) -> InitialState:
        """From a mapping; a missing value is 0."""
        given = given or {}
        return cls(**{f.name: float(given.get(f.name, 0.0)) for f in fields(cls)})

    def plain(self) -> dict[str, float]:
        """As plain data."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class ControllerSpec:
    """A follower's control block: its law, its period (None: the control federate's own) and ``settings``, the
    whole validated block (law parameters and pipeline keys) the control pipeline is built from. The law's
    parameters are the law's own ``Params`` (a plug-in's too), so they stay a mapping by name."""

    type: str
    period_s: float | None
    settings: Mapping[str, Any]

    @classmethod
    def from_plain(cls, block: Mapping[str, Any]) -> ControllerSpec:
        """From a controller block (kept as ``settings``)."""
        period = block.get("period_s")
        return cls(str(block.get("type", "")), None if period is None else float(period), block)

    def plain(self) -> dict[str, Any]:
        """The block as given."""
        return dict(self.settings)


@dataclass(frozen=True)
class DriveSpec:
    """A platoon leader's drive: an input ``profile`` with its ``params``, or profile ``waypoints`` following
    ``path`` (the pure-pursuit driver's parameters, waypoints on the platoon's lane)."""

    profile: str = "constant"
    params: Mapping[str, Any] = field(default_factory=dict)
    path: Mapping[str, Any] | None = None

    @classmethod
    def from_plain(cls, block: Mapping[str, Any]) -> DriveSpec:
        """From a driver block ``{profile, params, path}``."""
        return cls(str(block.get("profile", "constant")), block.get("params") or {}, block.get("path"))

    def plain(self) -> dict[str, Any]:
        """The driver block."""
        return {"profile": self.profile, "params": self.params, "path": self.path}


@dataclass(frozen=True)
class CommandSourceSpec:
    """An outside source of a robot's commands: the federate and the port it publishes them on, and what the
    physics federate does when it falls silent for ``command_timeout_s`` (``brake``, ``hold`` or ``fail``)."""

    federate: str
    port: str | None = None
    command_timeout_s: float = 0.5
    on_timeout: str = "brake"

    @classmethod
    def from_plain(cls, block: Mapping[str, Any]) -> CommandSourceSpec:
        """From a command-source block (missing keys: the defaults)."""
        return cls(str(block["federate"]), block.get("port"), float(block.get("command_timeout_s", 0.5)),
                   str(block.get("on_timeout", "brake")))

    def plain(self) -> dict[str, Any]:
        """As plain data."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


DEFAULT_VEHICLE = VehicleBlock()
"""The vehicle of a robot that names none (shared, read-only)."""

AT_ORIGIN = InitialState()
"""The start state of a robot that names none."""

VEHICLE_DIMS = Dims(math.nan, math.nan, math.nan, math.nan)
"""Stands for "the vehicle's own dimensions" where a robot is made (``RobotSpec`` puts the vehicle's in)."""
