"""A federate plug-in: measures every follower's gap to its predecessor from the ground truth and publishes it
on a typed port ``gap_monitor``; keeps the smallest gap per robot for a summary.

It runs in process (``federates: [{name: gaps, type: 'coopsim_examples.federate:GapMonitor'}]``) or in a
``coopsim host`` (add ``remote: host:port``); the code is the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.federate import Federate, FederateMeta, Input, SetupContext
from core.ports import STATE, fields_of, port
from core.robots import RobotSpec

GAP_MONITOR = port("gap_monitor", {"gap_m": "m", "predecessor": ("int64", "robot id")},
                   doc="distance between each follower's rear axle and its predecessor's (NaN for leaders)")


class GapMonitor(Federate):
    """Every ``period_s``: the rear-axle distance of each robot to its predecessor."""

    def __init__(self, name: str, period_s: float = 0.1) -> None:
        super().__init__(name)
        if period_s <= 0:
            raise ValueError(f"period_s must be positive, got {period_s}")
        self.period_ns = round(period_s * 1e9)
        self.predecessor: dict[int, int] = {}
        self.min_gap_m: dict[int, float] = {}

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(inputs=(Input("state", fields=fields_of(STATE, ("x", "y"))),), outputs=(GAP_MONITOR,),
                            period_ns=self.period_ns)

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        for robot in robots:
            self.predecessor[robot.id] = -1 if robot.predecessor is None else robot.predecessor

    def despawn(self, robot_ids: Sequence[int]) -> None:
        for rid in robot_ids:
            self.predecessor.pop(int(rid), None)

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        state = inputs["state"]
        ids = np.asarray(state["id"], np.int64)
        row_of = {int(rid): row for row, rid in enumerate(ids)}
        pred = np.array([self.predecessor.get(int(rid), -1) for rid in ids], np.int64)
        rows = np.array([row_of.get(int(p), -1) for p in pred], np.int64)
        have = rows >= 0
        gap = np.full(len(ids), np.nan)
        gap[have] = np.hypot(state["x"][rows[have]] - state["x"][have], state["y"][rows[have]] - state["y"][have])
        for rid, value in zip(ids[have].tolist(), gap[have].tolist(), strict=True):
            self.min_gap_m[rid] = min(self.min_gap_m.get(rid, np.inf), value)
        return {"gap_monitor": {"id": ids, "gap_m": gap, "predecessor": pred}}
