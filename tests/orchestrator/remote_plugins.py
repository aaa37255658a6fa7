"""A test plug-in that asks for robots at run time (in process or hosted by ``coopsim host``): it spawns a guest
beside the platoon, drives it and despawns it again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from core.federate import Federate, FederateMeta, SetupContext
from core.ports import command_port
from core.robots import RobotSpec
from core.timebase import seconds_to_ns

GUEST_ID = 900


class Dispatcher(Federate):
    """Drives the robots the scenario gives it at ``speed_mps``; at ``spawn_at_s`` asks for a guest robot (a copy
    of the first robot it drives, ``offset_y_m`` to its side, standing) that it drives at ``guest_speed_mps``, and
    asks for the guest to go at ``despawn_at_s``."""

    def __init__(self, name: str, period_s: float = 0.05, speed_mps: float = 1.0, guest_speed_mps: float = 2.0,
                 spawn_at_s: float = 1.0, despawn_at_s: float = 3.0, offset_y_m: float = 8.0) -> None:
        super().__init__(name)
        self.period_ns = seconds_to_ns(period_s)
        self.speed, self.guest_speed = speed_mps, guest_speed_mps
        self.spawn_ns, self.despawn_ns = seconds_to_ns(spawn_at_s), seconds_to_ns(despawn_at_s)
        self.offset_y = offset_y_m
        self._mine: list[RobotSpec] = []
        self._ctx: SetupContext | None = None
        self._asked: set[str] = set()

    def setup(self, ctx: SetupContext) -> FederateMeta:
        self._ctx = ctx
        return FederateMeta(outputs=(command_port(self.name),), period_ns=self.period_ns)

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        self._mine += [r for r in robots if r.driven_by(self.name)]

    def despawn(self, robot_ids: Sequence[int]) -> None:
        self._mine = [r for r in self._mine if r.id not in set(robot_ids)]

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        assert self._ctx is not None
        if t_ns >= self.spawn_ns and "spawn" not in self._asked and self._mine:
            self._asked.add("spawn")
            model = self._mine[0]
            initial = replace(model.initial, y=model.initial.y + self.offset_y, v=0.0)
            self._ctx.request_spawn(RobotSpec(id=GUEST_ID, name="guest", spawn_ns=t_ns, platoon=-1,
                                              vehicle=model.vehicle, dims=model.dims, initial=initial,
                                              command_source=model.command_source), t_ns)
        if t_ns >= self.despawn_ns and "despawn" not in self._asked:
            self._asked.add("despawn")
            self._ctx.request_despawn(GUEST_ID, t_ns)
        ids = np.array([r.id for r in self._mine], np.int64)
        speed = np.where(ids == GUEST_ID, self.guest_speed, self.speed)
        nan = np.full(len(ids), np.nan)
        return {command_port(self.name).name: {"robot": ids, "speed": speed, "accel": nan, "steer": nan.copy(),
                                               "yaw_rate": np.zeros(len(ids))}}
