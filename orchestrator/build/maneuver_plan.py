"""The scenario's ``maneuvers`` as the control federate runs them: robots and platoons as ids, every platoon's lane
(a reference path and an offset) and controller block, and the settings (``federates.control.maneuvering``).

Platoon ids are the platoons' indices; a split's new platoon and a leaver's own platoon get ``len(platoons) + the
request's index``, and keep their origin's reference path and controller block. A platoon's reference path is its
leader's track before the lane offset, or, for a leader on a time profile, the straight line through its start
pose along its heading.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from core.robots import RobotSpec
from core.timebase import seconds_to_ns
from orchestrator.scenario.maneuvers_block import ManeuverSettings, platoon_names
from orchestrator.scenario.model import WAYPOINTS, ControllerBlock, Scenario, merge_controller
from orchestrator.scenario.platoons_block import plan_robots

STRAIGHT_LENGTH_M = 1000.0
"""Length of the segment that stands for a straight reference line (it is extended past both ends)."""


def maneuver_plan(scenario: Scenario, robots: list[RobotSpec]) -> dict[str, Any] | None:
    """The plan (plain data), or None for a scenario without maneuvers (and without the ``leave`` reaction to
    misbehaviour, whose leaves the control federate requests while the run goes: each robot's own platoon after
    it is ``reactive_platoons`` + its id, with its home platoon's block)."""
    leaves = getattr(scenario.detection, "reaction", None) == "leave"
    if not scenario.maneuvers and not leaves:
        return None
    names = platoon_names(scenario)
    plans = plan_robots(scenario)
    base = scenario.controller.model_dump()
    paths: list[tuple[list[list[float]], bool]] = []
    keys: dict[str, int] = {}
    lanes: dict[int, tuple[int, float]] = {}
    blocks: dict[int, dict[str, Any]] = {}
    for plan in plans:
        if plan.position != 0 or plan.platoon in lanes:
            continue
        path = _reference(plan)
        key = json.dumps(path)
        if key not in keys:
            keys[key] = len(paths)
            paths.append(path)
        lanes[plan.platoon] = (keys[key], plan.lane_offset_m)
        blocks[plan.platoon] = ControllerBlock(**merge_controller(base, plan.controller)).model_dump()
    ids = {robot.name: robot.id for robot in robots}
    platoon_id = {name: k for k, name in enumerate(names)}
    requests = []
    order = sorted(range(len(scenario.maneuvers)), key=lambda i: (scenario.maneuvers[i].at_s, i))
    for i in order:
        r = scenario.maneuvers[i]
        new = len(names) + i
        request: dict[str, Any] = {"index": i, "at_ns": seconds_to_ns(r.at_s), "type": r.type,
                                   "robot": ids[r.robot] if r.robot else -1,
                                   "platoon": platoon_id[r.platoon] if r.platoon else -1,
                                   "position": -1 if r.position is None else r.position,
                                   "into": platoon_id[r.into] if r.into else -1,
                                   "lane_offset_m": r.lane_offset_m, "new_platoon": -1}
        if r.type == "split":
            assert r.platoon is not None
            request["new_platoon"] = new
            platoon_id[r.name or f"{r.platoon}_{r.position}"] = new
            lanes[new] = lanes[platoon_id[r.platoon]]
            blocks[new] = blocks[platoon_id[r.platoon]]
        elif r.type == "leave":
            assert r.robot is not None
            home = next(plan.platoon for plan in plans if plan.name == r.robot)
            request["new_platoon"] = new
            platoon_id[r.robot] = new
            blocks[new] = blocks[home]
        requests.append(request)
    settings = scenario.maneuver_settings or ManeuverSettings()
    out = {"requests": requests, "settings": settings.model_dump(), "paths": paths,
           "lanes": {k: list(v) for k, v in lanes.items()}, "blocks": blocks}
    if leaves:
        base = len(names) + len(scenario.maneuvers)
        out["reactive_platoons"] = base
        for plan in plans:
            if plan.position > 0 and plan.platoon in blocks:
                blocks[base + ids[plan.name]] = blocks[plan.platoon]
    return out


def _reference(plan: Any) -> tuple[list[list[float]], bool]:
    """A platoon's reference path: its leader's track (closed or open), or the line of its start pose."""
    leader = plan.leader
    if leader.profile == WAYPOINTS and leader.path is not None:
        return [[float(x), float(y)] for x, y in leader.path.waypoints], bool(leader.path.closed)
    start = plan.start.model_dump() if plan.start is not None else {"x": 0.0, "y": 0.0, "yaw": 0.0}
    heading = np.array([np.cos(start["yaw"]), np.sin(start["yaw"])])
    origin = np.array([start["x"], start["y"]])
    end = origin + STRAIGHT_LENGTH_M * heading
    return [[float(origin[0]), float(origin[1])], [float(end[0]), float(end[1])]], False
