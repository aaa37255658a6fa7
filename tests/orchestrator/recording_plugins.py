"""Federates and a metric used as plug-ins by the recording and metrics tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.federate import Federate, FederateMeta, Input, SetupContext
from core.ports import STATE, FieldSpec, fields_of, port
from core.robots import RobotSpec, rows_of
from core.timebase import seconds_to_ns
from orchestrator.metrics import FollowerView, follower_metric

ODOMETER = port("odometer", {"distance_m": "m", "speed_kmh": "km/h"}, doc="distance driven per robot")


class Odometer(Federate):
    """Integrates each robot's true speed (rectangle rule at ``period_s``) and publishes the distance driven."""

    def __init__(self, name: str, period_s: float = 0.05) -> None:
        super().__init__(name)
        self.period_ns = seconds_to_ns(period_s)
        self.ids = np.empty(0, np.int64)
        self.distance = np.empty(0)

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(inputs=(Input("state", fields=fields_of(STATE, ("v",))),), outputs=(ODOMETER,),
                            period_ns=self.period_ns)

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        self.ids = np.concatenate([self.ids, [r.id for r in robots]]).astype(np.int64)
        self.distance = np.concatenate([self.distance, np.zeros(len(robots))])

    def despawn(self, robot_ids: Sequence[int]) -> None:
        keep = np.ones(len(self.ids), bool)
        keep[rows_of(self.ids, robot_ids)] = False
        self.ids, self.distance = self.ids[keep], self.distance[keep]

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        state = inputs["state"]
        v = state["v"][rows_of(state["id"], self.ids)]
        out = {"id": self.ids.copy(), "distance_m": self.distance.copy(), "speed_kmh": v * 3.6}
        self.distance = self.distance + v * self.period_ns / 1e9
        return {"odometer": out}


class KmhReader(Federate):
    """Reads the state's speed believing it is in km/h: the scheduler must refuse it."""

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(inputs=(Input("state", fields=(FieldSpec("v", "float64", "km/h"),)),),
                            period_ns=seconds_to_ns(0.1))

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        return {}


@follower_metric("gap_p10", report=("gap_p10_m",))
def gap_p10(view: FollowerView) -> dict[str, Any]:
    """10th percentile of the bumper gap: a metric plug-in is one function."""
    return {"gap_p10_m": float(np.percentile(view.bumper_gap, 10))}
