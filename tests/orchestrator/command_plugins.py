"""Test plug-ins that command robots as external sources (in process or hosted by ``coopsim host``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.federate import Federate, FederateMeta, SetupContext
from core.ports import command_port
from core.robots import RobotSpec
from core.timebase import NS_PER_S, seconds_to_ns


def speed_profile(t_s: float, base: float, step: float, at_s: float) -> float:
    """The commanded speed: ``base`` until ``at_s``, then ``base + step``."""
    return base + (step if t_s >= at_s else 0.0)


class SpeedCommander(Federate):
    """Commands every robot the scenario gives it: speed ``base_mps`` (+ ``step_mps`` from ``step_at_s``), straight
    ahead, every ``period_s``; silent from ``silent_from_s`` until ``silent_until_s`` (to try the timeout rule).
    ``mode: accel`` sends only an acceleration of ``accel_mps2`` and a steering angle of zero."""

    def __init__(self, name: str, period_s: float = 0.05, base_mps: float = 1.0, step_mps: float = 0.5,
                 step_at_s: float = 2.0, silent_from_s: float | None = None, silent_until_s: float | None = None,
                 mode: str = "speed", accel_mps2: float = 0.5) -> None:
        super().__init__(name)
        self.period_ns = seconds_to_ns(period_s)
        self.base, self.step_mps, self.at_s = base_mps, step_mps, step_at_s
        self.silent_from_ns = None if silent_from_s is None else seconds_to_ns(silent_from_s)
        self.silent_until_ns = None if silent_until_s is None else seconds_to_ns(silent_until_s)
        self.mode, self.accel = mode, accel_mps2
        self._mine: list[int] = []

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(outputs=(command_port(self.name),), period_ns=self.period_ns)

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        self._mine += [r.id for r in robots if r.driven_by(self.name)]

    def despawn(self, robot_ids: Sequence[int]) -> None:
        self._mine = [r for r in self._mine if r not in set(robot_ids)]

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        silent = self.silent_from_ns is not None and t_ns >= self.silent_from_ns and (
            self.silent_until_ns is None or t_ns < self.silent_until_ns)
        if silent:
            ids: list[int] = []
        else:
            ids = self._mine
        n = len(ids)
        speed = np.full(n, speed_profile(t_ns / NS_PER_S, self.base, self.step_mps, self.at_s))
        nan = np.full(n, np.nan)
        if self.mode == "accel":  # acceleration towards the profile's speed: only accel and steering given
            table = {"robot": np.asarray(ids, np.int64), "speed": nan, "accel": np.full(n, self.accel),
                     "steer": np.zeros(n), "yaw_rate": nan.copy()}
        else:
            table = {"robot": np.asarray(ids, np.int64), "speed": speed, "accel": nan, "steer": nan.copy(),
                     "yaw_rate": np.zeros(n)}
        return {command_port(self.name).name: table}
