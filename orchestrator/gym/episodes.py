"""A scenario with an agent's robots, built once, and fresh copies of it per episode (the fast reset).

The world is built once (``build_world``: the scenario's robots, federates and scheduler, nothing set up or run). An
episode starts from a copy of that pristine world: the copy is set up with the episode's seed (so every keyed stream
and every per-robot constant drawn at spawn follows the new seed) and run to its first decision. Set-up copies are
kept per seed, so a reset with a seed seen before copies the set-up world directly. Nothing is parsed, resolved or
compiled again: the robots' specs, the scenario and the compiled kernels are shared by every copy, and only the
federates' and the scheduler's state (their arrays) is new.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.federate import FederateError
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
        self._set_up: OrderedDict[int, tuple[Scheduler, dict[str, Any]]] = OrderedDict()

    def _copy(self, parts: tuple[Scheduler, dict[str, Any]]) -> tuple[Scheduler, dict[str, Any]]:
        return copy.deepcopy(parts, dict(self._shared))

    def start(self, seed: int) -> Live:
        """A new episode with ``seed``, run to its first decision (t = 0, after every federate's step there)."""
        parts = self._set_up.get(seed)
        if parts is None:
            parts = self._copy(self._pristine)
            parts[0].seed = seed
            parts[0].setup()
            self._set_up[seed] = parts
            if len(self._set_up) > SEEDS_KEPT:
                self._set_up.popitem(last=False)
        else:
            self._set_up.move_to_end(seed)
        scheduler, federates = self._copy(parts)
        live = Live(scheduler, federates, federates[AGENT])
        try:
            scheduler.advance(0)
        except FederateError:
            finish(live)
            raise
        return live


def finish(live: Live) -> None:
    """Finalizes an episode's federates (they hold no files or threads in an environment, but may in general)."""
    for federate in live.federates.values():
        federate.finalize()


def robot_rows(robots: Sequence[RobotSpec], ids: np.ndarray) -> list[RobotSpec]:
    """The specs of ``ids``, in that order."""
    by_id = {r.id: r for r in robots}
    return [by_id[int(i)] for i in ids]
