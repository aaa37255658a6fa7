"""From a validated scenario to robots and a ready scheduler (the only place that knows all federate kinds)."""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from controllers import CONTROLLERS
from controllers.profiles import profile_inputs
from federates import FEDERATE_KINDS
from federates.physics.federate import vehicle_params

from .core.robots import RobotSpec
from .core.timebase import seconds_to_ns
from .scenario.model import (
    BLOCK_KEYS,
    COORDINATE_LIMIT_M,
    WAYPOINTS,
    ControllerBlock,
    Loc,
    Scenario,
    Vehicle,
    VehicleEntry,
    merge_controller,
)
from .scheduler import Scheduler


@dataclass
class World:
    """A scenario turned into runnable parts."""

    scenario: Scenario
    robots: list[RobotSpec]
    scheduler: Scheduler
    federates: dict[str, Any]


def expand_robots(scenario: Scenario) -> list[RobotSpec]:
    """One spec per robot: names, ids, platoon roles, merged vehicle/controller config and initial pose."""
    entries = _entries(scenario)
    n = len(entries)
    size = scenario.platoon.size or n
    base_controller = scenario.controller.model_dump()
    specs: list[RobotSpec] = []
    seen_ids: set[int] = set()
    seen_names: set[str] = set()
    pred_pose: dict[str, float] = {}
    for index, (name, entry, vehicle) in enumerate(entries):
        robot_id = entry.id if entry.id is not None else index + 1
        if robot_id in seen_ids:
            raise ValueError(f"vehicles[{index}].id: station id {robot_id} is used twice")
        if name in seen_names:
            raise ValueError(f"vehicles[{index}].name: robot name '{name}' is used twice")
        seen_ids.add(robot_id)
        seen_names.add(name)
        platoon, position = divmod(index, size)
        is_leader = position == 0
        controller = ControllerBlock(**merge_controller(base_controller, entry.controller)).model_dump()
        vehicle_cfg = vehicle.model_dump()
        params = vehicle_params({"vehicle": vehicle_cfg})
        v0 = _start_speed(scenario)
        initial = entry.initial.model_dump() if entry.initial else {}
        v_init = initial.get("v") if initial.get("v") is not None else v0
        if is_leader:
            pose = _leader_start(scenario, platoon)
        else:
            spacing = _initial_spacing(controller, v_init, params, pred_pose)
            pose = {"x": pred_pose["x"] - spacing, "y": pred_pose["y"], "yaw": pred_pose["yaw"]}
        pose.update({k: float(initial[k]) for k in ("x", "y", "yaw") if initial.get(k) is not None})
        pred_pose = {**pose, "rear_overhang_m": params["rear_overhang_m"]}
        config: dict[str, Any] = {
            "vehicle": vehicle_cfg,
            "initial": {**pose, "v": v_init},
            "dims": {k: params[k] for k in ("length_m", "width_m", "rear_overhang_m", "wheelbase_m")},
        }
        if is_leader:
            config["driver"] = scenario.leader.model_dump(mode="json")
        else:
            config["controller"] = controller
        specs.append(
            RobotSpec(
                id=robot_id,
                name=name,
                spawn_ns=seconds_to_ns(entry.spawn_at_s),
                despawn_ns=None if entry.despawn_at_s is None else seconds_to_ns(entry.despawn_at_s),
                platoon=platoon,
                position_in_platoon=position,
                predecessor=None if is_leader else specs[-1].id,
                leader=None if is_leader else specs[index - position].id,
                config=config,
            )
        )
    return specs


def _start_speed(scenario: Scenario) -> float:
    """Initial speed of every robot: the leader's profile at t = 0 (a waypoint leader starts at rest)."""
    if scenario.leader.profile == WAYPOINTS:
        return 0.0
    return float(profile_inputs(scenario.leader.profile, scenario.leader.params, np.zeros(1))[0][0])


def _leader_start(scenario: Scenario, platoon: int) -> dict[str, float]:
    """Leaders start at the origin heading east (profiles) or on the first waypoint heading along the first
    segment (paths); platoons side by side, ``lateral_spacing_m`` apart to the right of the heading."""
    x0, y0, yaw = 0.0, 0.0, 0.0
    path = scenario.leader.path
    if scenario.leader.profile == WAYPOINTS and path is not None:
        (x0, y0), (x1, y1) = path.waypoints[0], path.waypoints[1]
        yaw = float(np.arctan2(y1 - y0, x1 - x0))
    offset = platoon * scenario.platoon.lateral_spacing_m
    return {"x": x0 + offset * np.sin(yaw), "y": y0 - offset * np.cos(yaw), "yaw": yaw}


def _entries(scenario: Scenario) -> list[tuple[str, VehicleEntry, Vehicle]]:
    block = scenario.vehicles
    if isinstance(block, list):
        return [(e.name or f"robot{i}", e, e.vehicle or Vehicle()) for i, e in enumerate(block)]
    out = []
    template = block.template.model_dump()
    for i in range(block.count):
        name = f"{block.name_prefix}{i}"
        entry = block.overrides.get(name, VehicleEntry())
        vehicle = block.template
        if entry.vehicle is not None:
            changed = entry.vehicle.model_dump(exclude_unset=True)
            merged = {**template, **changed, "params": {**template["params"], **changed.get("params", {})}}
            vehicle = Vehicle(**merged)
        out.append((entry.name or name, entry, vehicle))
    unknown = set(block.overrides) - {f"{block.name_prefix}{i}" for i in range(block.count)}
    if unknown:
        raise ValueError(f"vehicles.overrides: no robot named {sorted(unknown)} "
                         f"(robots are {block.name_prefix}0 .. {block.name_prefix}{block.count - 1})")
    return out


DEFAULT_STANDSTILL_GAP_M = 2.0
"""Bumper-to-bumper gap at standstill [m] of the default placement, for a law without a desired gap."""

DEFAULT_TIME_GAP_S = 1.0
"""Time gap [s] of the default placement, for a law without a desired gap."""


def _initial_spacing(controller: dict[str, Any], v: float, params: dict[str, Any], pred: dict[str, float]) -> float:
    """Rear-axle distance that makes the follower's spacing error zero at the start. A law that keeps no gap
    (``cruise``: NaN) or none that is finite at this speed starts at the default spacing instead:
    ``DEFAULT_STANDSTILL_GAP_M + DEFAULT_TIME_GAP_S * v`` bumper to bumper, whatever the vehicles' size."""
    law_cls = CONTROLLERS.get(controller["type"])
    law = law_cls(law_cls.Params(**{k: v for k, v in controller.items() if k not in BLOCK_KEYS}))
    gap = float(law.desired_gap(np.array([v]))[0])
    bumper = getattr(law_cls, "gap_reference", "axle") == "bumper"
    if not math.isfinite(gap):
        gap, bumper = DEFAULT_STANDSTILL_GAP_M + DEFAULT_TIME_GAP_S * v, True
    if bumper:
        gap += pred["rear_overhang_m"] + params["length_m"] - params["rear_overhang_m"]
    return gap


# -- physical sanity before the run ------------------------------------------------------------------------------
@dataclass(frozen=True)
class MemoryBudget:
    """How much memory a run may need: ``gb`` (None: the machine's available memory), or no limit (``force``)."""

    gb: float | None = None
    force: bool = False


MEMORY_BUDGET: ContextVar[MemoryBudget | None] = ContextVar("coopsim_memory_budget", default=None)
"""The budget scenario validation holds runs to (None: the default ``MemoryBudget()``); ``coopsim run
--memory-budget-gb`` and ``--force`` set it."""

# Peak memory of a traced run is reached in post-processing, which reads the traces back: measured on the AuNa
# platoon (4 to 2,000 robots, ideal and ITS-G5) at 350-450 bytes per vehicle-trace row of 25 float columns and
# less per V2X row, over ~350 MB for the interpreter and libraries. The factors below are those rounded up, so
# that the estimate errs on the large side.
_BASE_BYTES = 400e6
_BYTES_PER_ROBOT = 50e3  # the robot's state, station and controller rows, with allocator overhead
_BYTES_PER_CELL = 8 * 2.5  # a float64 trace value, ~2.5 copies at the peak
_V2X_COLUMNS = 8
_DISK_BYTES_PER_VEHICLE_ROW = 25.0  # Parquet, compressed
_DISK_BYTES_PER_V2X_ROW = 10.0
_PCAP_BYTES_PER_FRAME = 400.0


@dataclass(frozen=True)
class ResourceEstimate:
    """What a run will need, roughly (an upper estimate with every robot present for the whole run)."""

    robots: int
    steps: int
    trace_samples: int
    trace_columns: int
    v2x_rows: int
    memory_bytes: float
    disk_bytes: float

    def describe(self) -> str:
        """'about 12.3 GB of memory and 400 MB of disk (4,001 trace samples x 100 robots x 25 columns, ...)'."""
        v2x = f", plus {self.v2x_rows:,} V2X trace rows" if self.v2x_rows else ""
        return (f"about {_size(self.memory_bytes)} of memory and {_size(self.disk_bytes)} of disk "
                f"({self.trace_samples:,} trace samples x {self.robots:,} robots x {self.trace_columns} columns"
                f"{v2x}; {self.steps:,} steps)")


def _size(n_bytes: float) -> str:
    return f"{n_bytes / 1e9:.1f} GB" if n_bytes >= 1e9 else f"{n_bytes / 1e6:.0f} MB"


def estimate_resources(scenario: Scenario) -> ResourceEstimate:
    """Memory and disk of a run from its size: steps x robots x trace columns, and the V2X trace rows (ideal: a
    sent and a received row per robot and step; ITS-G5: a sent row and one per reader of each CAM)."""
    from .recorder import COLUMNS

    block = scenario.vehicles
    robots = len(block) if isinstance(block, list) else block.count
    duration, step = scenario.duration_s, scenario.step_s
    steps = int(duration / step) + 1
    traced = scenario.outputs.trace
    samples = int(duration / (scenario.outputs.trace_period_s or step)) + 1 if traced else 0
    columns = len(COLUMNS) + 3  # the recorded ports' columns, time, robot and platoon
    v2x_rows, pcap_frames = 0, 0
    channel = scenario.channel.model_dump()
    if traced and channel["type"] == "ideal":
        v2x_rows = 2 * robots * steps
    elif traced and channel["type"] == "itsg5":
        from comms_models.itsg5.params import ItsG5Params

        try:
            params = ItsG5Params.model_validate({k: v for k, v in channel.items() if k != "type"})
        except ValueError:  # the loader reports it at its line; estimate with the defaults meanwhile
            params = ItsG5Params()
        generation = params.generation
        rate = generation.fixed_rate_hz if generation.mode == "fixed_rate" else 1.0 / generation.t_gen_cam_min_s
        readers = robots - 1 if params.trace == "all" else 2  # 'interest': predecessor's and leader's
        cams = int(robots * duration * rate)
        v2x_rows = cams * (1 + max(readers, 0))
        pcap_frames = min(cams, params.pcap_max_frames) if params.pcap else 0
    rows = samples * robots
    memory = _BASE_BYTES + robots * _BYTES_PER_ROBOT + (rows * columns + v2x_rows * _V2X_COLUMNS) * _BYTES_PER_CELL
    disk = (rows * _DISK_BYTES_PER_VEHICLE_ROW + v2x_rows * _DISK_BYTES_PER_V2X_ROW
            + pcap_frames * _PCAP_BYTES_PER_FRAME)
    return ResourceEstimate(robots, steps, samples, columns if traced else 0, v2x_rows, memory, disk)


def available_memory_bytes() -> float | None:
    """``MemAvailable`` of /proc/meminfo (None where there is none)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def resource_problems(scenario: Scenario) -> list[tuple[Loc, str, Any]]:
    """A run whose estimated memory exceeds the budget (``MEMORY_BUDGET``), reported at the fleet's size."""
    budget = MEMORY_BUDGET.get() or MemoryBudget()
    if budget.force:
        return []
    if budget.gb is not None:
        limit, what = budget.gb * 1e9, "--memory-budget-gb"
    else:
        available = available_memory_bytes()
        if available is None:
            return []
        limit, what = available, "the memory available on this machine"
    estimate = estimate_resources(scenario)
    if estimate.memory_bytes <= limit:
        return []
    loc: Loc = ("vehicles",) if isinstance(scenario.vehicles, list) else ("vehicles", "count")
    return [(loc, f"the run would need {estimate.describe()}, more than the budget of {_size(limit)} "
                  f"({what}); use fewer robots, a shorter duration_s, a longer outputs.trace_period_s or "
                  f"outputs.trace: false, or run it with 'coopsim run --force' (or --memory-budget-gb)",
             estimate.robots)]


def start_position_problems(scenario: Scenario) -> list[tuple[Loc, str, Any]]:
    """A robot placed more than ``COORDINATE_LIMIT_M`` from the origin by its default placement (its platoon's
    spacings add up, platoons sit side by side); an explicit ``initial`` position has its own bound."""
    try:
        robots = expand_robots(scenario)
    except (ValueError, TypeError):
        # a broken roster, or law or profile parameters not checked yet: the loader reports them at their lines
        return []
    for index, robot in enumerate(robots):
        x, y = robot.config["initial"]["x"], robot.config["initial"]["y"]
        if max(abs(x), abs(y)) > COORDINATE_LIMIT_M:
            loc: Loc = ("vehicles", index) if isinstance(scenario.vehicles, list) else ("vehicles", "count")
            return [(loc, f"robot '{robot.name}' would start at (x, y) = ({x:.6g}, {y:.6g}) m, more than "
                          f"{COORDINATE_LIMIT_M / 1e3:g} km from the origin (the range of the local frame); use "
                          f"fewer robots per platoon, smaller gaps or platoon.lateral_spacing_m, or place it with "
                          f"'initial'", robot.name)]
    return []


def build_world(scenario: Scenario, out_dir: Path | None = None, seed: int | None = None) -> World:
    """Robots, federates and a scheduler with the robots' spawns and despawns queued."""
    seed = scenario.seed if seed is None else seed
    robots = expand_robots(scenario)
    scheduler = Scheduler(end_ns=seconds_to_ns(scenario.duration_s), seed=seed, out_dir=out_dir)
    step_ns = seconds_to_ns(scenario.step_s)
    physics = FEDERATE_KINDS.get("physics")("physics", step_ns, scenario.physics)
    v2x = FEDERATE_KINDS.get("v2x")("v2x", step_ns, scenario.channel.model_dump(), trace=scenario.outputs.trace)
    # the control federate steps at the greatest common period of all control laws; each law runs at its own
    periods = {seconds_to_ns(r.config["controller"]["period_s"]) for r in robots if "controller" in r.config}
    control_period = math.gcd(seconds_to_ns(scenario.controller.period_s), *periods)
    control = FEDERATE_KINDS.get("control")("control", control_period)
    federates: dict[str, Any] = {"physics": physics, "v2x": v2x, "control": control}
    for extra in scenario.federates:
        if extra.remote is not None:
            from federates.remote.client import RemoteFederate

            federates[extra.name] = RemoteFederate(extra.name, extra.remote, extra.type, extra.params,
                                                   connect_timeout_s=extra.connect_timeout_s,
                                                   call_timeout_s=extra.call_timeout_s)
        else:
            federates[extra.name] = FEDERATE_KINDS.get(extra.type)(extra.name, **extra.params)
    for name, fed in federates.items():
        scheduler.add(fed, trusted=name in ("physics", "v2x", "control"))  # built-ins: ports checked per roster change
    for spec in robots:
        scheduler.schedule_spawn(spec, spec.spawn_ns)
        if spec.despawn_ns is not None:
            scheduler.schedule_despawn(spec.id, spec.despawn_ns)
    return World(scenario, robots, scheduler, federates)
