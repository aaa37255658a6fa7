"""From a validated scenario to robots and a ready scheduler (the only place that knows all federate kinds)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.robots import RobotSpec
from core.timebase import seconds_to_ns
from federates import FEDERATE_KINDS
from orchestrator.engine.failures import federate_failure
from orchestrator.engine.run_control import RunControl
from orchestrator.engine.scheduler import Scheduler
from orchestrator.scenario.attacks_block import misbehaviour_config, reaction_config
from orchestrator.scenario.model import COORDINATE_LIMIT_M, Loc, Scenario
from orchestrator.scenario.platoons_block import RobotPlan, plan_robots

from .maneuver_plan import maneuver_plan
from .robot_table import (  # noqa: F401 - re-exported: the world's names stay importable from here
    DEFAULT_STANDSTILL_GAP_M,
    DEFAULT_TIME_GAP_S,
    expand_robots,
)


@dataclass
class World:
    """A scenario turned into runnable parts."""

    scenario: Scenario
    robots: list[RobotSpec]
    scheduler: Scheduler
    federates: dict[str, Any]


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
        x, y = robot.initial.x, robot.initial.y
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
        dims = [robots[k].dims for k in rows]
        monitor = ContactMonitor()
        monitor.add(np.array([d.length_m for d in dims]), np.array([d.width_m for d in dims]),
                    np.array([d.rear_overhang_m for d in dims]), np.zeros(len(rows)))
        pose = {key: np.array([getattr(robots[k].initial, key) for k in rows]) for key in ("x", "y", "yaw")}
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

    return HOSTED.get(kind)(kind, address, kind, {k: _plain(v) for k, v in params.items()})


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
                run_control: RunControl | None = None, given: Mapping[str, Any] | None = None,
                robots: list[RobotSpec] | None = None) -> World:
    """Robots, federates and a scheduler with the robots' spawns and despawns queued. ``run_control``: the run's
    interrupts and watchdog (``run_control``), when there is one. ``given``: federates the caller built, taking the
    place of the ``federates:`` entries of the same names, in process and trusted like the built-ins (the
    Gymnasium environment's policy driver, ``orchestrator.gym``). ``robots``: the robots to build instead of the
    scenario's (many batch points in one world, ``orchestrator.build.batched``)."""
    given = given or {}
    seed = scenario.seed if seed is None else seed
    robots = expand_robots(scenario) if robots is None else robots
    scheduler = Scheduler(end_ns=seconds_to_ns(scenario.duration_s), seed=seed, out_dir=out_dir,
                          control=run_control)
    step_ns = seconds_to_ns(scenario.step_s)
    command_ports = sorted({r.command_source.port for r in robots if r.command_source is not None})
    physics = _built_in(scenario, "physics", step_ns=step_ns, config=scenario.physics, command_ports=command_ports)
    plan = maneuver_plan(scenario, robots)
    v2x_kwargs: dict[str, Any] = {"maneuvers": True} if plan is not None else {}
    misbehaviour = misbehaviour_config(scenario.attacks, scenario.detection, {r.name: r.id for r in robots})
    if misbehaviour is not None:  # only then: a run without them builds the V2X federate as before
        v2x_kwargs["misbehaviour"] = misbehaviour
    v2x = _built_in(scenario, "v2x", step_ns=step_ns, channel=scenario.channel.model_dump(),
                    trace=scenario.outputs.trace, **v2x_kwargs)
    # the control federate steps at the greatest common period of all control laws; each law runs at its own
    periods = {seconds_to_ns(r.controller.period_s) for r in robots if r.controller is not None}
    control_period = math.gcd(seconds_to_ns(scenario.controller.period_s), *periods)
    if plan is not None:  # the platoons' blocks run at their own periods too
        periods |= {seconds_to_ns(block["period_s"]) for block in plan["blocks"].values()}
        control_period = math.gcd(control_period, *periods)
    reactions = reaction_config(scenario.detection)  # open_gap and leave: the control federate reacts
    control = _built_in(scenario, "control", period_ns=control_period, **({"maneuvers": plan} if plan else {}),
                        **({"reactions": reactions} if reactions else {}))
    federates: dict[str, Any] = {"physics": physics, "v2x": v2x, "control": control}
    for extra in scenario.federates:
        if extra.name in given:
            federates[extra.name] = given[extra.name]
        elif extra.remote is not None:
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
        scheduler.add(fed, trusted=name in given or (name in ("physics", "v2x", "control")
                                                     and name not in scenario.execution.remote))
    by_spawn: dict[int, list[RobotSpec]] = {}
    for spec in robots:
        by_spawn.setdefault(spec.spawn_ns, []).append(spec)
    for at_ns, specs in by_spawn.items():  # robots appearing together arrive as one batch, in roster order
        scheduler.schedule_spawns(specs, at_ns)
    for spec in robots:
        if spec.despawn_ns is not None:
            scheduler.schedule_despawn(spec.id, spec.despawn_ns)
    return World(scenario, robots, scheduler, federates)
