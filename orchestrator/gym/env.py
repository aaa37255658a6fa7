"""``coopsim/Platoon-v0``: a coopsim scenario as a Gymnasium environment whose agent drives some of its followers.

One step is one decision of the agent's robots, at their control law's period P (the AuNa platoon: 20 ms, two
physics steps). The action is each robot's desired acceleration [m/s^2] (``Box`` within the vehicle's deceleration
and acceleration limits); the robot's own law still steers (``orchestrator.gym.driver``). The observation is
``observation.FEATURES`` per robot, the reward ``reward.reward``. An episode ends with ``terminated`` at the first
collision and with ``truncated`` when the scenario's end leaves no room for another decision.

``reset(seed=s)`` runs the scenario with seed s, exactly as ``coopsim run --seed s`` would with this policy as the
robots' driver; ``reset()`` without a seed starts the first episode with the scenario's seed (copy k of a vector:
the scenario's + k) and each later one with a seed drawn from the environment's generator (``np_random``, seeded by
the first seed given, else by that first seed), so a sequence of episodes is fixed by the first seed.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from core.federate import FederateError
from core.robots import RobotSpec
from federates.physics.collisions import CollisionError
from orchestrator.scenario import Scenario, load_scenario

from .episodes import Episodes, Live, agent_robots, finish
from .observation import FEATURES, observe
from .reward import RewardWeights, reward, spacing_rows, true_spacing_error

QUIET = ("outputs.trace=false", "outputs.plots=false", "outputs.report=false", "outputs.mcap=false")
"""Overrides applied to a scenario loaded by the environment: it records nothing."""


class PlatoonEnv(gym.Env):
    """A scenario (a path or a loaded ``Scenario``) whose robots ``agents`` (names; by default the last follower of
    the first platoon) an agent drives. ``overrides``: ``key=value`` changes as ``coopsim run --set`` takes them;
    ``weights``: the reward's (``reward.RewardWeights``)."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's class attribute

    def __init__(self, scenario: str | Path | Scenario = "scenarios/platoon.yaml", agents: Sequence[str] | None = None,
                 overrides: Sequence[str] = (), weights: RewardWeights | None = None) -> None:
        super().__init__()
        if not isinstance(scenario, Scenario):
            scenario = load_scenario(scenario, [*QUIET, *overrides])
        self.scenario = scenario
        self.weights = weights or RewardWeights()
        robots = agent_robots(scenario, agents)
        self._episodes = Episodes(scenario, robots)
        self.agent_ids = np.array([r.id for r in robots], np.int64)
        self.agent_names = [r.name for r in robots]
        self.period_s = self._episodes.period_ns / 1e9
        self._preds = np.array([r.predecessor for r in robots], np.int64)
        self._axle = np.array([_gap_reference(r) == "axle" for r in robots])
        self._bumper_offset = self._bumper_offsets(robots)
        self._max_range = float(scenario.physics.range_sensor.max_range_m)
        low = np.array([-r.vehicle.params["max_decel_mps2"] for r in robots])
        high = np.array([r.vehicle.params["max_accel_mps2"] for r in robots])
        # float64, like every quantity inside: a policy can give exactly what a built-in law computes
        self.action_space = gym.spaces.Box(low, high, dtype=np.float64)
        size = len(robots) * len(FEATURES)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (size,), dtype=np.float64)
        self._live: Live | None = None
        self._t_ns = 0
        self._accel = np.zeros(len(robots))
        self._collisions = 0
        self._rows_of: tuple[np.ndarray | None, tuple[np.ndarray, np.ndarray]] = (None, (self.agent_ids, self._preds))
        self._episode = 0
        self._first_seed = scenario.seed  # a seedless first reset's (copy k of a vector: the scenario's + k)
        self.seed_used: int | None = None
        """The scenario seed of the current episode."""

    def _bumper_offsets(self, robots: Sequence[RobotSpec]) -> np.ndarray:
        by_id = {r.id: r for r in self._episodes.robots}
        out = np.zeros(len(robots))
        for k, robot in enumerate(robots):
            if not self._axle[k]:
                ahead = by_id[int(self._preds[k])]
                out[k] = ahead.dims.rear_overhang_m + robot.dims.length_m - robot.dims.rear_overhang_m
        return out

    # -- the Gymnasium API ----------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        # the first reset without a seed seeds the generator with the scenario's seed (Gymnasium would take OS
        # entropy), so that a sequence of seedless resets is the same sequence in every process
        super().reset(seed=self._first_seed if seed is None and self._np_random is None else seed)
        if seed is not None:
            run_seed = int(seed)
        elif self._episode == 0:
            run_seed = self._first_seed
        else:
            run_seed = int(self.np_random.integers(0, 2**32 - 1))
        self._episode += 1
        self.close()
        self._live = self._episodes.start(run_seed)
        self.seed_used = run_seed
        self._t_ns = 0
        self._collisions = len(getattr(self._live.federates["physics"], "collisions", ()))
        sensed = self._live.driver.sensed
        assert sensed is not None
        self._accel = np.zeros(len(self.agent_ids))
        return self._observation(), self._info(sensed.desired_gap_m)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        live = self._live
        if live is None:
            raise RuntimeError("call reset() before step()")
        driver = live.driver
        driver.set_action(action)
        accel = driver.action.copy()
        self._t_ns += self._episodes.period_ns
        physics = live.federates["physics"]
        try:
            live.scheduler.advance(self._t_ns)
        except FederateError as exc:
            if not isinstance(exc.cause, CollisionError):  # physics.stop_on_collision: the run stops there
                raise
        collided = len(physics.collisions) > self._collisions
        self._collisions = len(physics.collisions)
        sensed = driver.sensed
        assert sensed is not None
        state = live.scheduler.bus["state"]
        if state["id"] is not self._rows_of[0]:  # the id array is replaced on a roster change, never mutated
            self._rows_of = (state["id"], spacing_rows(state["id"], self.agent_ids, self._preds))
        error = true_spacing_error(state, self._rows_of[1], self._bumper_offset, sensed.desired_gap_m)
        value, jerk = reward(self.weights, error, accel, self._accel, self.period_s, collided)
        self._accel = accel
        truncated = not collided and self._t_ns + self._episodes.period_ns > self._episodes.end_ns
        info = self._info(sensed.desired_gap_m, error, jerk)
        return self._observation(), value, collided, truncated, info

    def close(self) -> None:
        if self._live is not None:
            finish(self._live)
            self._live = None

    # -- helpers ----------------------------------------------------------------------------------------------------
    def _observation(self) -> np.ndarray:
        assert self._live is not None and self._live.driver.sensed is not None
        return observe(self._live.driver.sensed, self._max_range, self._axle)

    def _info(self, desired_gap: np.ndarray, error: np.ndarray | None = None,
              jerk: np.ndarray | None = None) -> dict[str, Any]:
        assert self._live is not None and self._live.driver.sensed is not None
        info: dict[str, Any] = {"t_s": self._t_ns / 1e9, "law_accel": self._live.driver.sensed.law_accel.copy(),
                                "desired_gap_m": desired_gap.copy(), "seed": self.seed_used}
        if error is not None:
            info["spacing_error_m"] = error
            info["jerk_mps3"] = jerk
        return info

    def sibling(self, index: int = 1) -> PlatoonEnv:
        """A copy of this environment sharing its built world and set-up copies (``episodes.Episodes``), with an
        episode and a generator of its own (none until its ``reset``): what a vector of copies is made of. Copy
        ``index`` starts from the scenario's seed + ``index`` when reset without a seed, so seedless copies differ."""
        twin = copy.copy(self)
        twin._first_seed = (self.scenario.seed + index) % 2**32
        twin._live = None
        twin._episode = 0
        twin.seed_used = None
        twin._np_random = None  # Gymnasium's generator: seeded by the twin's first reset
        return twin

    @property
    def live(self) -> Live | None:
        """The current episode's world (its scheduler's bus holds every port's latest value)."""
        return self._live


def _gap_reference(robot: RobotSpec) -> str:
    """How the robot's law measures its gap: "axle" or "bumper" (``Controller.gap_reference``)."""
    from controllers import CONTROLLERS

    assert robot.controller is not None
    return getattr(CONTROLLERS.get(robot.controller.type), "gap_reference", "axle")
