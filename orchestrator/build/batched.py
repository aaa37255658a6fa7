"""Many batch points as independent copies in one world: each point's robots, under ids of their own, in a universe
of their own (``core.universes``), keyed by their ids of a run alone (``RobotSpec.stream_id``).

Point ``p``'s robot ``i`` becomes robot ``p * stride + i`` (``stride``: one more than the largest id of any point), its
predecessor and leader likewise, so no two points share an id and the ids of a point keep their order; its random
draws stay those of robot ``i`` of a run of point ``p`` alone (points of one world share their seed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from core.robots import RobotSpec
from orchestrator.scenario.model import Scenario

from .robot_table import expand_robots

MAX_BATCHED_ID = 1 << 31
"""Largest robot id of a batched world: per-id lookup tables (the control federate's) stay small, and every id
fits a station id."""


@dataclass(frozen=True)
class BatchedRobots:
    """The robots of a batched world (point after point, each in its own order), the id ``stride`` and every
    point's robots as a run of it alone has them."""

    robots: list[RobotSpec]
    stride: int
    per_point: list[list[RobotSpec]]


def batched_robots(scenarios: Sequence[Scenario]) -> BatchedRobots:
    """The robots of every point in one world. A ValueError when the ids would not fit ``MAX_BATCHED_ID``."""
    per_point = [expand_robots(scenario) for scenario in scenarios]
    stride = 1 + max((robot.id for robots in per_point for robot in robots), default=0)
    if stride * len(per_point) > MAX_BATCHED_ID:
        raise ValueError(f"{len(per_point)} points with robot ids up to {stride - 1} do not fit one world")
    out: list[RobotSpec] = []
    for point, robots in enumerate(per_point):
        base = point * stride
        for robot in robots:
            out.append(dataclasses.replace(
                robot, id=base + robot.id, name=f"{robot.name}@{point}",
                predecessor=None if robot.predecessor is None else base + robot.predecessor,
                leader=None if robot.leader is None else base + robot.leader,
                universe=point, stream_id=robot.draw_id))
    return BatchedRobots(out, stride, per_point)
