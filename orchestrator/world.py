"""From a validated scenario to robots and a ready scheduler (the only place that knows all federate kinds)."""

from __future__ import annotations

import math
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
from .scenario.drivers_block import resolve_drivers
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
    robot_slots,
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
    sources, problems = resolve_drivers(robot_slots(scenario), scenario.drivers, [f.name for f in scenario.federates])
    if problems:
        raise ValueError(problems[0][1])
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
        source = sources.get(name)
        if source is not None:
            config["command_source"] = {**source.model_dump(mode="json"), "port": source.port_name}
        elif is_leader:
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
    command_ports = sorted({r.config["command_source"]["port"] for r in robots if "command_source" in r.config})
    physics = FEDERATE_KINDS.get("physics")("physics", step_ns, scenario.physics, command_ports=command_ports)
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
