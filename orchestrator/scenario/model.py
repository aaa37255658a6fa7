"""The scenario schema (version 1): what a YAML scenario may say, with types, ranges and defaults.

Every registry-backed field (``controller.type``, ``channel.type``, ``vehicles...model``, ``leader.profile``,
``federates[].type``) takes a built-in name, an installed entry point's name or a ``package.module:Class`` path.
The selected class's own ``Params`` model validates its parameters (``loader.check_plugins``), so adding a law,
channel, vehicle model, profile or federate never touches this file.

Physical sanity is part of the schema, so that a scenario that validates also runs: every number is finite
(``FiniteValues``), steps and periods lie between ``MIN_PERIOD_S`` and the run's length, robots spawn and despawn
within the run, start within ``COORDINATE_LIMIT_M`` of the origin, and the run's estimated memory fits the budget
(``orchestrator.build.resources.resource_problems``). Such a rule that relates fields of different blocks is a
validator of ``Scenario`` that reports each problem at its own field, hence at its line.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from controllers.pipeline import FEDERATE_KEYS, FallbackStageParams
from controllers.pure_pursuit import PurePursuitParams
from core.params import (  # noqa: F401 - re-exported: the scenario's names stay importable from here
    _PERIOD_SCHEMA,
    COORDINATE_LIMIT_M,
    MIN_PERIOD_S,
    FileName,
    FiniteValues,
    Loc,
    Period,
    Strict,
    raise_at,
)
from federates.physics.config import PhysicsConfig

from .attacks_block import AttackEntry, DetectionBlock, attack_problems
from .drivers_block import CommandSource, DriverAssignment, RobotSlot  # noqa: F401
from .federates_block import ExtraFederate
from .maneuvers_block import ManeuverRequest, ManeuverSettings, maneuver_problems
from .platoons_block import PlatoonBlock, plan_robots
from .vehicles_block import (  # noqa: F401 - re-exported: the scenario's names stay importable from here
    WAYPOINTS,
    Driver,
    Fleet,
    Initial,
    Platoon,
    Vehicle,
    VehicleEntry,
    VehiclesBlock,
    _did_you_mean,
    profile_params_model,
    vehicle_model_fields,
)

BLOCK_KEYS = FEDERATE_KEYS
"""Keys of the controller block that configure the control pipeline, not the law."""


FallbackBlock = FallbackStageParams
"""Graceful degradation: CACC -> ACC on the robot's own range sensor when predecessor data is stale."""


class ControllerBlock(FiniteValues):
    """The followers' control law; keys besides ``BLOCK_KEYS`` are the law's parameters."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    type: str = Field("ela_cacc", description="control law: a built-in, an entry point of 'coopsim.controllers' or "
                      "a 'package.module:Class' path")
    period_s: Period = Field(0.02, json_schema_extra=_PERIOD_SCHEMA,
                             description="[s] control period (zero-order hold between steps): a multiple of step_s, "
                             "at least 1 us and at most duration_s")
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


class ChannelBlock(FiniteValues):
    """The V2X channel model; keys besides ``type`` are the model's parameters."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    type: str = Field("ideal", description="channel model: ideal | itsg5 | cv2x, an entry point of "
                      "'coopsim.channels' or a 'package.module:Class' path")

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
    trace_period_s: Period | None = Field(None, json_schema_extra=_PERIOD_SCHEMA,
                                          description="[s] sampling of the trace (default: every step): a multiple "
                                          "of step_s, at most duration_s")
    plots: bool = True
    report: bool = True
    fail_on: list[Literal["collision", "silent_station", "unstable", "unmet_request"]] = Field(
        default_factory=list, description="outcomes that make 'coopsim run' exit with code 3 (as --strict does for "
        "all of them): a collision, a station that sent no CAM at all, a law past its stability bound, a request a "
        "federate delayed or refused (a SUMO lane change)")
    mcap: bool = Field(False, description="write run.mcap (poses, odometry, ranges, V2X messages, scene) for "
                       "Foxglove or Lichtblick")

    @field_validator("mcap")
    @classmethod
    def _mcap_installed(cls, value: bool) -> bool:
        from .extras import MISSING_MESSAGE, mcap_available

        if value and not mcap_available():  # said now, not as a failure after the whole run
            raise ValueError(MISSING_MESSAGE)
        return value


class Execution(Strict):
    """How the run is paced, and where the built-in federates run."""

    realtime: float | None = Field(None, gt=0, le=1000, description="pace simulation time to the wall clock at this "
                                   "factor (1.0: real time); unpaced (as fast as possible) when absent")
    late_warning_s: float = Field(0.05, gt=0, description="[s] lateness behind the wall clock that warns that the "
                                  "run cannot keep up")
    step_timeout_s: float | None = Field(
        300.0, gt=0, le=86_400, allow_inf_nan=False, description="[s] the watchdog: longest one federate's step may "
        "take (wall time) before the run stops as that federate's failure at that time (default 300 s: far beyond "
        "any healthy step, short enough that a hung plug-in does not hold a batch); null: no watchdog; "
        "'coopsim run --step-timeout S' sets it")
    remote: dict[Literal["physics", "v2x", "control"], str] = Field(
        default_factory=dict, description="host:port (gRPC) or framed://host:port (framed TCP) of a 'coopsim host' "
        "that runs this built-in federate instead of this process (one container per federate); the traces are the "
        "same")

    @field_validator("remote")
    @classmethod
    def _host_ports(cls, value: dict[str, str]) -> dict[str, str]:
        from federates.remote.framing import split_address

        for name, address in value.items():
            try:  # host:port (gRPC) or framed://host:port; another scheme is refused, naming the ones there are
                split_address(address)
            except ValueError as exc:
                raise ValueError(f"remote.{name} {exc}") from None
        return value


class Scenario(Strict):
    """A complete, validated scenario. Checks that relate fields of different blocks report each problem at its own
    field and line: the trace period on the step grid and unique federate names in the loader, the time bounds
    (steps and periods within the run, spawns and despawns inside it) here. What needs the built world (the
    resource estimate, the start positions) is the plan step's (``orchestrator.build.plan``)."""

    _source: Any = PrivateAttr(default=None)  # the loader's SourceMap: where each field sits in the file

    version: Literal[1] = 1
    name: FileName = Field("scenario", min_length=1, max_length=64, description="the scenario's name (runs/<name>), at "
                      "most 64 characters")
    description: str = ""
    seed: int = Field(0, ge=0, le=2**32 - 1, strict=True)
    duration_s: float = Field(gt=0, le=1e6, description="[s] simulated time")
    step_s: Period = Field(0.01, le=1.0, json_schema_extra=_PERIOD_SCHEMA,
                           description="[s] physics step: 1 us to 1 s, at most duration_s")
    origin: Origin = Field(default_factory=Origin)
    vehicles: VehiclesBlock | None = Field(None, description="the robots (fleet form); or 'platoons'")
    platoons: list[PlatoonBlock] = Field(default_factory=list, description="the robots platoon by platoon, each with "
                                         "its own leader drive, lane and controller (instead of 'vehicles')")
    platoon: Platoon = Field(default_factory=Platoon)
    leader: Driver = Field(default_factory=Driver)
    controller: ControllerBlock = Field(default_factory=ControllerBlock)
    channel: ChannelBlock = Field(default_factory=ChannelBlock)
    channel_variants: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="the channel block (its parameters, without 'type') each channel type "
        "takes when a compare variant or a sweep point switches channel.type to it (default: that model's "
        "defaults); a plain run uses 'channel' only")
    physics: PhysicsConfig = Field(default_factory=PhysicsConfig)
    outputs: Outputs = Field(default_factory=Outputs)
    federates: list[ExtraFederate] = Field(default_factory=list)
    drivers: list[DriverAssignment] = Field(default_factory=list, description="external command sources for sets "
                                            "of robots (by name or platoon)")
    execution: Execution = Field(default_factory=lambda: Execution())
    maneuvers: list[ManeuverRequest] = Field(default_factory=list, description="timed platoon maneuver requests "
                                             "(join, leave, split, merge; docs/platoons.md)")
    maneuver_settings: ManeuverSettings | None = Field(None, description="timing, gaps and limits of the maneuvers "
                                                       "(defaults when absent)")
    attacks: list[AttackEntry] = Field(default_factory=list, description="misbehaving stations: whose messages are "
                                       "forged, how and when (docs/security-research.md)")
    detection: DetectionBlock | None = Field(None, description="the misbehaviour detector of every receiving station "
                                             "and its reaction (off when absent)")

    @field_validator("channel_variants")
    @classmethod
    def _known_variants(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        from comms_models import COMMS_MODELS

        for name, block in value.items():
            COMMS_MODELS.resolve(name)
            if block.get("type", name) != name:
                raise ValueError(f"channel_variants.{name} names another type ({block['type']}); leave 'type' out")
        return value

    @model_validator(mode="after")
    def _physically_sane(self) -> Scenario:
        if (self.vehicles is None) == (not self.platoons):
            raise ValueError("give the robots either as 'vehicles' (with 'platoon.size') or as 'platoons', not both "
                             "and not neither")
        if self.platoons and self.platoon.size is not None:
            raise_at("Scenario", [(("platoon", "size"), "the 'platoons' form sizes each platoon itself; remove "
                                                        "platoon.size", self.platoon.size)])
        problems = [*_period_problems(self), *_lifetime_problems(self), *_platoon_size_problems(self)]
        if not problems:  # the replay needs sane robots
            problems = maneuver_problems(self)
        if not problems and self.attacks:
            problems = attack_problems(self.attacks, [slot.name for slot in robot_slots(self)], self.channel.type)
        if problems:  # the loader then checks what needs the whole world: memory and start positions
            raise_at("Scenario", problems)
        return self


def _entry_locs(scenario: Scenario) -> list[tuple[Loc, VehicleEntry]]:
    """Every vehicle entry the file writes (list items, fleet or platoon overrides, members) with its location."""
    block = scenario.vehicles
    if isinstance(block, list):
        return [(("vehicles", i), entry) for i, entry in enumerate(block)]
    if block is not None:
        return [(("vehicles", "overrides", name), entry) for name, entry in block.overrides.items()]
    found: list[tuple[Loc, VehicleEntry]] = []
    for k, platoon in enumerate(scenario.platoons):
        if platoon.members is not None:
            found += [(("platoons", k, "members", i), entry) for i, entry in enumerate(platoon.members)]
        found += [(("platoons", k, "overrides", name), entry) for name, entry in platoon.overrides.items()]
    return found


def _platoon_size_problems(scenario: Scenario) -> list[tuple[Loc, str, Any]]:
    """In the fleet form, platoons are equal: their size divides the number of robots."""
    size, block = scenario.platoon.size, scenario.vehicles
    if size is None or block is None:
        return []
    count = len(block) if isinstance(block, list) else block.count
    if count > size and count % size:  # a size of at least the fleet is one platoon
        return [(("platoon", "size"), f"{count} robots do not make platoons of {size} (the last would have "
                                      f"{count % size}); use a size that divides {count}, or the 'platoons' form for "
                                      "platoons of different sizes", size)]
    return []


def _period_problems(scenario: Scenario) -> list[tuple[Loc, str, Any]]:
    """Steps and periods no longer than the run. A default period is not held against a short run: only what the
    file sets (and the step, which every run has)."""
    duration = scenario.duration_s
    periods: list[tuple[Loc, Any]] = [(("step_s",), scenario.step_s)]
    if "period_s" in scenario.controller.model_fields_set:
        periods.append((("controller", "period_s"), scenario.controller.period_s))
    # a robot's controller override is validated as a whole by the loader (ControllerBlock: the lower bound with
    # its other keys); only the run's length is known here
    periods += [((*loc, "controller", "period_s"), entry.controller["period_s"])
                for loc, entry in _entry_locs(scenario) if entry.controller
                and isinstance(entry.controller.get("period_s"), int | float)
                and entry.controller["period_s"] >= MIN_PERIOD_S]
    periods.append((("outputs", "trace_period_s"), scenario.outputs.trace_period_s))
    for sensor in ("gnss", "range_sensor"):
        block = getattr(scenario.physics, sensor)
        if "period_s" in block.model_fields_set:
            periods.append((("physics", sensor, "period_s"), block.period_s))
    periods += [(("federates", i, "params", "period_s"), extra.params["period_s"])
                for i, extra in enumerate(scenario.federates) if "period_s" in extra.params]
    problems: list[tuple[Loc, str, Any]] = []
    for loc, value in periods:
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue  # a wrong type is reported by the model that owns the field
        if value < MIN_PERIOD_S:
            problems.append((loc, f"must be at least {MIN_PERIOD_S:g} s (1 us), got {value:g}", value))
        elif value > duration:
            problems.append((loc, f"must not exceed duration_s ({duration:g} s): a step or period longer than the "
                                  f"run never comes round, got {value:g}", value))
    return problems + _lockstep_problems(scenario)


def _lockstep_problems(scenario: Scenario) -> list[tuple[Loc, str, Any]]:
    """A federate kind that steps in lock-step with physics (``period_multiple_of_step``: SUMO) has a period that
    is a whole number of steps."""
    from federates import FEDERATE_KINDS

    problems: list[tuple[Loc, str, Any]] = []
    for i, extra in enumerate(scenario.federates):
        period = extra.params.get("period_s")
        if extra.remote is not None or not isinstance(period, int | float) or isinstance(period, bool):
            continue
        try:
            lockstep = getattr(FEDERATE_KINDS.get(extra.type), "period_multiple_of_step", False)
        except Exception:  # an unknown or broken kind is reported at its type
            continue
        steps = period / scenario.step_s
        if lockstep and (round(steps) < 1 or abs(steps - round(steps)) > 1e-9 * steps):
            problems.append((("federates", i, "params", "period_s"), f"must be a whole number of steps (step_s = "
                             f"{scenario.step_s:g} s), got {period:g}", period))
    return problems


def _lifetime_problems(scenario: Scenario) -> list[tuple[Loc, str, Any]]:
    """Every robot appears before the end of the run and disappears after it appeared and not after the end."""
    duration = scenario.duration_s
    problems: list[tuple[Loc, str, Any]] = []
    for loc, entry in _entry_locs(scenario):
        spawn, despawn = entry.spawn_at_s, entry.despawn_at_s
        if spawn >= duration:
            problems.append(((*loc, "spawn_at_s"), f"must be in [0, duration_s) = [0, {duration:g}) s: a robot "
                                                   f"spawned at or after the end never runs, got {spawn:g}", spawn))
        if despawn is not None and despawn <= spawn:
            problems.append(((*loc, "despawn_at_s"), f"must be after spawn_at_s ({spawn:g} s), got {despawn:g}",
                             despawn))
        elif despawn is not None and despawn > duration:
            problems.append(((*loc, "despawn_at_s"), f"must be in (spawn_at_s, duration_s] = ({spawn:g}, "
                                                     f"{duration:g}] s, got {despawn:g}", despawn))
    return problems


def robot_slots(scenario: Scenario) -> list[RobotSlot]:
    """Every robot's name, platoon index and own driver, in vehicle order, with the location of its entry."""
    return [RobotSlot(plan.name, plan.platoon, plan.entry.driver, plan.loc) for plan in plan_robots(scenario)]
