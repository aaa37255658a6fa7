"""A scenario with an agent's robots, built once, and fresh copies of it per episode (the fast reset).

The world is built once (``build_world``: the scenario's robots, federates and scheduler, nothing set up or run). The
first episode with a seed starts from a copy of that pristine world: the copy is set up with the seed (so every keyed
stream and every per-robot constant drawn at spawn follows it) and run to its first decision, then kept. Every episode
with that seed is a copy of the kept one (a few hundred arrays and small objects), so a reset costs one copy. Nothing
is parsed, resolved or compiled again: the robots' specs, the scenario, the port contracts, the configurations and the
compiled kernels are shared by every copy (``immutables``); only the federates' and the scheduler's state is new.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel

from core.robot_blocks import ControllerSpec
from core.robots import RobotSpec
from core.timebase import seconds_to_ns
from orchestrator.build.world import build_world, expand_robots
from orchestrator.engine.scheduler import Scheduler
from orchestrator.scenario import Scenario
from orchestrator.scenario.drivers_block import DriverAssignment
from orchestrator.scenario.federates_block import ExtraFederate

from .driver import PolicyDriver

AGENT = "agent"
"""The name of the policy driver federate (its commands travel on ``commands_agent``)."""

SEEDS_KEPT = 8
"""Set-up worlds kept, one per seed most recently used."""


@dataclass
class Live:
    """One episode's world: its scheduler, federates by name and the policy driver among them."""

    scheduler: Scheduler
    federates: dict[str, Any]
    driver: PolicyDriver


def agent_robots(scenario: Scenario, names: Sequence[str] | None) -> list[RobotSpec]:
    """The robots the agent drives (``names``; by default the last robot of the first platoon), checked: followers
    with a control law, present from t = 0 to the end, one control period among them."""
    robots = expand_robots(scenario)
    if scenario.maneuvers:
        raise ValueError("the Gymnasium environment does not support scenarios with maneuvers")
    if not names:
        first = [r for r in robots if r.platoon == robots[0].platoon]
        names = [first[-1].name]
    by_name = {r.name: r for r in robots}
    chosen = []
    for name in names:
        robot = by_name.get(name)
        if robot is None:
            raise ValueError(f"no robot named '{name}' (robots: {', '.join(by_name)})")
        if robot.controller is None or robot.external:
            raise ValueError(f"robot '{name}' is not a follower with a control law: the agent drives followers")
        if robot.spawn_ns != 0 or robot.despawn_ns is not None:
            raise ValueError(f"robot '{name}' does not live from t = 0 to the end; the agent's robots must")
        chosen.append(robot)
    if len({_period_ns(scenario, r) for r in chosen}) > 1:
        raise ValueError("the agent's robots have different control periods; give robots of one period")
    return chosen


def _period_ns(scenario: Scenario, robot: RobotSpec) -> int:
    assert robot.controller is not None
    period = robot.controller.period_s
    return seconds_to_ns(scenario.controller.period_s if period is None else period)


class Episodes:
    """The pristine world of ``scenario`` with ``agents`` driven by the policy driver, and its per-episode copies."""

    def __init__(self, scenario: Scenario, agents: Sequence[RobotSpec]) -> None:
        self.period_ns = _period_ns(scenario, agents[0])
        laws: dict[int, ControllerSpec] = {r.id: r.controller for r in agents}  # type: ignore[misc]
        driver_type = f"{PolicyDriver.__module__}:{PolicyDriver.__name__}"
        self.scenario = scenario.model_copy(update={
            "federates": [*scenario.federates, ExtraFederate(name=AGENT, type=driver_type)],
            "drivers": [*scenario.drivers, DriverAssignment(federate=AGENT, robots=[r.name for r in agents],
                                                            on_timeout="fail")],
        })
        if any(f.name != AGENT for f in self.scenario.federates):
            raise ValueError("the Gymnasium environment runs the built-in federates only (the scenario has "
                             f"'federates:' {[f.name for f in scenario.federates]})")
        driver = PolicyDriver(AGENT, laws, self.period_ns)
        world = build_world(self.scenario, seed=scenario.seed, given={AGENT: driver})
        self.robots = world.robots
        self.end_ns = world.scheduler.end_ns
        self._pristine = (world.scheduler, world.federates)
        # shared by every copy: read-only specs and the scenario (copying them would cost more than the rest)
        self._shared: dict[int, Any] = {id(obj): obj for obj in (*world.robots, self.scenario, scenario)}
        for robot in world.robots:
            for block in (robot.vehicle, robot.dims, robot.initial, robot.controller, robot.driver,
                          robot.command_source):
                if block is not None:
                    self._shared[id(block)] = block
        # per seed kept: the set-up world and what its copies share with it (dropped with it when evicted)
        self._set_up: OrderedDict[int, tuple[tuple[Scheduler, dict[str, Any]], dict[int, Any]]] = OrderedDict()

    def start(self, seed: int) -> Live:
        """A new episode with ``seed``, run to its first decision (t = 0, after every federate's step there)."""
        kept = self._set_up.get(seed)
        if kept is None:  # set up a copy of the pristine world with this seed and run its first instant, once
            parts = copy.deepcopy(self._pristine, dict(self._shared))
            parts[0].seed = seed
            parts[0].advance(0)
            kept = self._set_up[seed] = (parts, {**self._shared, **immutables(parts)})
            if len(self._set_up) > SEEDS_KEPT:
                self._set_up.popitem(last=False)
        else:
            self._set_up.move_to_end(seed)
        parts, shared = kept
        scheduler, federates = copy.deepcopy(parts, dict(shared))
        return Live(scheduler, federates, federates[AGENT])


SHARED_MODULES = ("asn1tools.",)
"""Libraries whose objects a world holds but never changes: the compiled ASN.1 specification of the CAM codec (its
copy was 200 ms of a 210 ms reset over ITS-G5)."""


def immutables(root: Any) -> dict[int, Any]:
    """The objects reachable from ``root`` that never change once made, by id: frozen dataclasses (port contracts,
    robot blocks, inputs), validated pydantic models (configurations) and objects of ``SHARED_MODULES``. Copies of a
    world share them."""
    found: dict[int, Any] = {}
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, str | bytes | int | float | bool | np.ndarray | type) or obj is None:
            continue
        seen.add(id(obj))
        params = getattr(type(obj), "__dataclass_params__", None)
        if (params is not None and params.frozen) or isinstance(obj, BaseModel) \
                or type(obj).__module__.startswith(SHARED_MODULES):
            found[id(obj)] = obj
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            stack.extend(obj)
        elif hasattr(obj, "__dict__") and not callable(obj):
            stack.extend(vars(obj).values())
        elif hasattr(obj, "__slots__"):
            stack.extend(getattr(obj, name) for name in obj.__slots__ if hasattr(obj, name))
    return found


def finish(live: Live) -> None:
    """Finalizes an episode's federates (they hold no files or threads in an environment, but may in general)."""
    for federate in live.federates.values():
        federate.finalize()


def robot_rows(robots: Sequence[RobotSpec], ids: np.ndarray) -> list[RobotSpec]:
    """The specs of ``ids``, in that order."""
    by_id = {r.id: r for r in robots}
    return [by_id[int(i)] for i in ids]
