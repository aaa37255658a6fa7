"""From a validated scenario to robots and a ready scheduler (the only place that knows all federate kinds)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from controllers import CONTROLLERS, LEADER_PROFILES
from controllers.profiles import profile_inputs
from core.registry import is_stand_in
from core.robots import RobotSpec
from core.timebase import seconds_to_ns
from federates import FEDERATE_KINDS
from federates.physics.vehicle_config import vehicle_params
from orchestrator.engine.run_control import RunControl
from orchestrator.engine.scheduler import Scheduler, federate_failure
from orchestrator.scenario.drivers_block import resolve_drivers
from orchestrator.scenario.model import (
    BLOCK_KEYS,
    COORDINATE_LIMIT_M,
    WAYPOINTS,
    ControllerBlock,
    Driver,
    Loc,
    Scenario,
    merge_controller,
    robot_slots,
)
from orchestrator.scenario.platoons_block import RobotPlan, plan_robots, unknown_override_problems

from .maneuver_plan import maneuver_plan
from .placement import Track, behind, shift_left


@dataclass
class World:
    """A scenario turned into runnable parts."""

    scenario: Scenario
    robots: list[RobotSpec]
    scheduler: Scheduler
    federates: dict[str, Any]


def expand_robots(scenario: Scenario) -> list[RobotSpec]:
    """One spec per robot: names, ids, platoon roles, merged vehicle/controller config and initial pose."""
    plans = plan_robots(scenario)
    sources, problems = resolve_drivers(robot_slots(scenario), scenario.drivers, [f.name for f in scenario.federates])
    if problems:
        raise ValueError(problems[0][1])
    problems = unknown_override_problems(scenario)
    if problems:
        raise ValueError(f"{'.'.join(map(str, problems[0][0]))}: {problems[0][1]}")
    base_controller = scenario.controller.model_dump()
    specs: list[RobotSpec] = []
    seen_ids: set[int] = set()
    seen_names: set[str] = set()
    pred: dict[str, Any] = {}
    # Robots of one template share their blocks (one dict each), so the federates do per-block work once; the
    # caches are keyed by the identity of objects that ``plans`` keeps alive for the whole loop.
    vehicles: dict[int, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}
    controllers: dict[tuple[int, int], dict[str, Any]] = {}
    start_speeds: dict[int, float] = {}
    tracks: dict[tuple[int, float], Track | None] = {}
    drives: dict[tuple[int, float | None], dict[str, Any]] = {}
    spacings: dict[tuple[int, int, float, float], float] = {}
    leader_index = 0
    for index, plan in enumerate(plans):
        entry, name = plan.entry, plan.name
        robot_id = entry.id if entry.id is not None else index + 1
        if robot_id in seen_ids:
            raise ValueError(f"{_where(plan.loc)}.id: station id {robot_id} is used twice")
        if name in seen_names:
            raise ValueError(f"{_where(plan.loc)}.name: robot name '{name}' is used twice")
        seen_ids.add(robot_id)
        seen_names.add(name)
        is_leader = plan.position == 0
        if is_leader:
            leader_index = index
        controller_key = (id(plan.controller), id(entry.controller))
        if controller_key not in controllers:
            platoon_controller = merge_controller(base_controller, plan.controller)
            controllers[controller_key] = ControllerBlock(
                **merge_controller(platoon_controller, entry.controller)).model_dump()
        controller = controllers[controller_key]
        if id(plan.vehicle) not in vehicles:
            vehicle_cfg = plan.vehicle.model_dump()
            params = vehicle_params({"vehicle": vehicle_cfg})
            dims = {k: params[k] for k in ("length_m", "width_m", "rear_overhang_m", "wheelbase_m")}
            vehicles[id(plan.vehicle)] = vehicle_cfg, params, dims
        vehicle_cfg, params, dims = vehicles[id(plan.vehicle)]
        track_key = (id(plan.leader), plan.lane_offset_m)
        if track_key not in tracks:
            tracks[track_key] = _track(plan)
        track = tracks[track_key]
        initial = entry.initial.model_dump() if entry.initial else {}
        if initial.get("v") is not None:
            v_init = initial["v"]
        else:
            if id(plan.leader) not in start_speeds:
                start_speeds[id(plan.leader)] = _start_speed(plan.leader)
            v_init = start_speeds[id(plan.leader)]
        if is_leader:
            pose, along = _leader_start(plan, track)
        else:
            spacing_key = (id(controller), id(params), float(v_init), float(pred["rear_overhang_m"]))
            if spacing_key not in spacings:
                spacings[spacing_key] = _initial_spacing(controller, v_init, params, pred)
            spacing = spacings[spacing_key]
            along = None if pred["along"] is None else pred["along"] - spacing
            pose = track.pose_at(along) if track is not None and along is not None else behind(pred, spacing)
        pose.update({k: float(initial[k]) for k in ("x", "y", "yaw") if initial.get(k) is not None})
        pred = {**pose, "rear_overhang_m": params["rear_overhang_m"],
                "along": along if all(initial.get(k) is None for k in ("x", "y", "yaw")) else None}
        config: dict[str, Any] = {
            "vehicle": vehicle_cfg,
            "initial": {**pose, "v": v_init},
            "dims": dims,
        }
        source = sources.get(name)
        if source is not None:
            config["command_source"] = {**source.model_dump(mode="json"), "port": source.port_name}
        elif is_leader:
            drive_key = (id(plan.leader), None if track is None else plan.lane_offset_m)
            if drive_key not in drives:  # leaders of one drive (on one lane, for a path) share the block
                drives[drive_key] = _drive(plan, track)
            config["driver"] = drives[drive_key]
        else:
            config["controller"] = controller
        specs.append(
            RobotSpec(
                id=robot_id,
                name=name,
                spawn_ns=seconds_to_ns(entry.spawn_at_s),
                despawn_ns=None if entry.despawn_at_s is None else seconds_to_ns(entry.despawn_at_s),
                platoon=plan.platoon,
                position_in_platoon=plan.position,
                predecessor=None if is_leader else specs[-1].id,
                leader=None if is_leader else specs[leader_index].id,
                config=config,
            )
        )
    return specs


def _where(loc: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def _start_speed(leader: Driver) -> float:
    """Initial speed of every robot of a platoon: its leader's profile at t = 0 (a waypoint leader starts at
    rest)."""
    if leader.profile == WAYPOINTS:
        return 0.0
    if is_stand_in(LEADER_PROFILES.get(leader.profile)):
        return 0.0  # a run read back without its profile plug-in: the reader puts the recorded start back
    return float(profile_inputs(leader.profile, leader.params, np.zeros(1))[0][0])


def _track(plan: RobotPlan) -> Track | None:
    """The lane the platoon's leader drives: its path moved sideways by the platoon's lane offset (None for a
    profile leader)."""
    path = plan.leader.path
    if plan.leader.profile != WAYPOINTS or path is None:
        return None
    return Track(np.asarray(path.waypoints, dtype=float), path.closed).shifted(plan.lane_offset_m)


def _drive(plan: RobotPlan, track: Track | None) -> dict[str, Any]:
    """A leader's driver config: its platoon's drive, on the platoon's lane."""
    drive = plan.leader.model_dump(mode="json")
    if track is not None and plan.lane_offset_m != 0.0:
        drive["path"]["waypoints"] = [[float(x), float(y)] for x, y in track.points]
    return drive


def _leader_start(plan: RobotPlan, track: Track | None) -> tuple[dict[str, float], float | None]:
    """A leader's start pose and arc length on its track: the platoon's ``start``, else ``start_along_m`` along its
    track (the first waypoint, heading along the first segment), else the origin heading east; on its lane."""
    if plan.start is not None:
        return shift_left(plan.start.model_dump(), plan.lane_offset_m), None
    if track is not None:
        return track.pose_at(plan.start_along_m), plan.start_along_m
    return shift_left({"x": 0.0, "y": 0.0, "yaw": 0.0}, plan.lane_offset_m), None


DEFAULT_STANDSTILL_GAP_M = 2.0
"""Bumper-to-bumper gap at standstill [m] of the default placement, for a law without a desired gap."""

DEFAULT_TIME_GAP_S = 1.0
"""Time gap [s] of the default placement, for a law without a desired gap."""


def _initial_spacing(controller: dict[str, Any], v: float, params: dict[str, Any], pred: dict[str, float]) -> float:
    """Rear-axle distance that makes the follower's spacing error zero at the start. A law that keeps no gap
    (``cruise``: NaN) or none that is finite at this speed starts at the default spacing instead:
    ``DEFAULT_STANDSTILL_GAP_M + DEFAULT_TIME_GAP_S * v`` bumper to bumper, whatever the vehicles' size."""
    law_cls = CONTROLLERS.get(controller["type"])
    if is_stand_in(law_cls):  # a run read back without its law plug-in: the reader puts the recorded poses back
        gap = math.nan
    else:
        law = law_cls(law_cls.Params(**{k: v for k, v in controller.items() if k not in BLOCK_KEYS}))
        gap = float(law.desired_gap(np.array([v]))[0])
    bumper = getattr(law_cls, "gap_reference", "axle") == "bumper"
    if not math.isfinite(gap):
        gap, bumper = DEFAULT_STANDSTILL_GAP_M + DEFAULT_TIME_GAP_S * v, True
    if bumper:
        gap += pred["rear_overhang_m"] + params["length_m"] - params["rear_overhang_m"]
    return gap


def start_position_problems(scenario: Scenario) -> list[tuple[Loc, str, Any]]:
    """Start poses that cannot run: a robot placed more than ``COORDINATE_LIMIT_M`` from the origin by its default
    placement (its platoon's spacings add up, platoons sit side by side; an explicit ``initial`` position has its
    own bound), and two bodies that overlap when they appear (robots spawning at the same time)."""
    try:
        robots = expand_robots(scenario)
    except (ValueError, TypeError):
        # a broken roster, or law or profile parameters not checked yet: the loader reports them at their lines
        return []
    plans = plan_robots(scenario)
    for plan, robot in zip(plans, robots, strict=True):
        loc = plan.loc
        x, y = robot.config["initial"]["x"], robot.config["initial"]["y"]
        if max(abs(x), abs(y)) > COORDINATE_LIMIT_M:
            return [(loc, f"robot '{robot.name}' would start at (x, y) = ({x:.6g}, {y:.6g}) m, more than "
                          f"{COORDINATE_LIMIT_M / 1e3:g} km from the origin (the range of the local frame); use "
                          f"fewer robots per platoon, smaller gaps or platoon.lateral_spacing_m, or place it with "
                          f"'initial'", robot.name)]
    return _overlap_problems(robots, plans)


def _overlap_problems(robots: list[RobotSpec], plans: list[RobotPlan]) -> list[tuple[Loc, str, Any]]:
    """Robots that appear at the same time with overlapping bodies (the physics federate's contact test), unless
    the file places both explicitly (``initial`` x or y): then the overlap is meant, e.g. to test contacts."""
    from federates.physics.collisions import ContactMonitor

    by_spawn: dict[int, list[int]] = {}
    for k, robot in enumerate(robots):
        by_spawn.setdefault(robot.spawn_ns, []).append(k)
    placed = [bool(plan.entry.initial and (plan.entry.initial.x is not None or plan.entry.initial.y is not None))
              for plan in plans]
    for spawn_ns, rows in sorted(by_spawn.items()):
        if len(rows) < 2:
            continue
        dims = [robots[k].config["dims"] for k in rows]
        monitor = ContactMonitor()
        monitor.add(np.array([d["length_m"] for d in dims]), np.array([d["width_m"] for d in dims]),
                    np.array([d["rear_overhang_m"] for d in dims]), np.zeros(len(rows)))
        pose = {key: np.array([robots[k].config["initial"][key] for k in rows]) for key in ("x", "y", "yaw")}
        ids = np.array([robots[k].id for k in rows], np.int64)
        pairs = monitor.new_contacts(spawn_ns, pose["x"], pose["y"], pose["yaw"], np.zeros(len(rows)), ids)
        by_id = {robots[k].id: k for k in rows}
        pairs = [(by_id[a], by_id[b]) for a, b in pairs if not (placed[by_id[a]] and placed[by_id[b]])]
        if pairs:
            first, second = pairs[0]
            return [(plans[second].loc, f"robots '{robots[first].name}' and '{robots[second].name}' would overlap when "
                                   f"they appear (t = {spawn_ns / 1e9:g} s): place them apart with 'initial', "
                                   f"'start' or 'lane_offset_m'", robots[second].name)]
    return []


def _built_in(scenario: Scenario, kind: str, **params: Any) -> Any:
    """The built-in federate ``kind`` (named like its kind), in this process, or hosted by the ``coopsim host``
    at ``execution.remote.<kind>`` (its parameters sent as plain data, built there the same way)."""
    address = scenario.execution.remote.get(kind)
    if address is None:
        return FEDERATE_KINDS.get(kind)(kind, **params)
    from federates.remote.hosted_builtins import HOSTED

    return HOSTED[kind](kind, address, kind, {k: _plain(v) for k, v in params.items()})


def _plain(value: Any) -> Any:
    """A parameter as the wire carries it: models dumped, mapping keys as strings (the maneuver plan's platoon
    ids: the control federate reads them back with ``int``), tuples as lists."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _construct(name: str, cls: Any, params: dict[str, Any], where: dict[str, Any], control: Any) -> Any:
    """A plug-in federate built from its parameters; whatever its constructor raises besides the ``ValueError`` of
    bad parameters (which is bad input), ``sys.exit`` included, is its failure at t = 0 (``control``: the run's
    ``RunControl``, which tells the user's interrupt from the plug-in's)."""
    try:
        return cls(name, **params, **where)
    except ValueError:
        raise
    except BaseException as exc:
        failure = federate_failure(name, 0, exc, control)
        if failure is exc:
            raise  # the user's second Ctrl-C
        raise failure from exc


def build_world(scenario: Scenario, out_dir: Path | None = None, seed: int | None = None,
                run_control: RunControl | None = None) -> World:
    """Robots, federates and a scheduler with the robots' spawns and despawns queued. ``run_control``: the run's
    interrupts and watchdog (``run_control``), when there is one."""
    seed = scenario.seed if seed is None else seed
    robots = expand_robots(scenario)
    scheduler = Scheduler(end_ns=seconds_to_ns(scenario.duration_s), seed=seed, out_dir=out_dir,
                          control=run_control)
    step_ns = seconds_to_ns(scenario.step_s)
    command_ports = sorted({r.config["command_source"]["port"] for r in robots if "command_source" in r.config})
    physics = _built_in(scenario, "physics", step_ns=step_ns, config=scenario.physics, command_ports=command_ports)
    plan = maneuver_plan(scenario, robots)
    v2x_kwargs = {"maneuvers": True} if plan is not None else {}
    v2x = _built_in(scenario, "v2x", step_ns=step_ns, channel=scenario.channel.model_dump(),
                    trace=scenario.outputs.trace, **v2x_kwargs)
    # the control federate steps at the greatest common period of all control laws; each law runs at its own
    periods = {seconds_to_ns(r.config["controller"]["period_s"]) for r in robots if "controller" in r.config}
    control_period = math.gcd(seconds_to_ns(scenario.controller.period_s), *periods)
    if plan is not None:  # the platoons' blocks run at their own periods too
        periods |= {seconds_to_ns(block["period_s"]) for block in plan["blocks"].values()}
        control_period = math.gcd(control_period, *periods)
    control = _built_in(scenario, "control", period_ns=control_period, **({"maneuvers": plan} if plan else {}))
    federates: dict[str, Any] = {"physics": physics, "v2x": v2x, "control": control}
    for extra in scenario.federates:
        if extra.remote is not None:
            from federates.remote.client import RemoteFederate

            federates[extra.name] = RemoteFederate(extra.name, extra.remote, extra.type, extra.params,
                                                   connect_timeout_s=extra.connect_timeout_s,
                                                   call_timeout_s=extra.call_timeout_s)
        else:
            cls = FEDERATE_KINDS.get(extra.type)
            # a kind that reads files named in the scenario (SUMO) resolves them against the scenario's directory
            # and places what they describe at the scenario's origin
            where = {"scenario_dir": extra.scenario_dir, "scenario_origin": (scenario.origin.lat_deg,
                     scenario.origin.lon_deg)} if getattr(cls, "reads_scenario_files", False) else {}
            federates[extra.name] = _construct(extra.name, cls, extra.params, where, run_control)
    for name, fed in federates.items():
        # built-ins: ports checked per roster change; a hosted one's answers are checked every step
        scheduler.add(fed, trusted=name in ("physics", "v2x", "control") and name not in scenario.execution.remote)
    by_spawn: dict[int, list[RobotSpec]] = {}
    for spec in robots:
        by_spawn.setdefault(spec.spawn_ns, []).append(spec)
    for at_ns, specs in by_spawn.items():  # robots appearing together arrive as one batch, in roster order
        scheduler.schedule_spawns(specs, at_ns)
    for spec in robots:
        if spec.despawn_ns is not None:
            scheduler.schedule_despawn(spec.id, spec.despawn_ns)
    return World(scenario, robots, scheduler, federates)
