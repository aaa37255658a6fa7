"""The robot table: every robot of a validated scenario resolved once into a ``RobotSpec`` with typed blocks.

Robots of one template share their block objects (vehicle, dimensions, controller, drive), so the federates do
per-block work once per template. The caches below are keyed by the identity of the scenario objects a block is
made from, which ``plan_robots`` keeps alive for the whole expansion.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from controllers import CONTROLLERS, LEADER_PROFILES
from controllers.profiles import profile_inputs
from core.registry import is_stand_in
from core.robot_blocks import CommandSourceSpec, ControllerSpec, DriveSpec, InitialState, VehicleBlock
from core.robots import RobotSpec
from core.timebase import seconds_to_ns
from orchestrator.scenario.drivers_block import CommandSource, resolve_drivers
from orchestrator.scenario.model import (
    BLOCK_KEYS,
    WAYPOINTS,
    ControllerBlock,
    Driver,
    Scenario,
    merge_controller,
    robot_slots,
)
from orchestrator.scenario.platoons_block import RobotPlan, plan_robots, unknown_override_problems

from .placement import Track, behind, shift_left

DEFAULT_STANDSTILL_GAP_M = 2.0
"""Bumper-to-bumper gap at standstill [m] of the default placement, for a law without a desired gap."""

DEFAULT_TIME_GAP_S = 1.0
"""Time gap [s] of the default placement, for a law without a desired gap."""


def expand_robots(scenario: Scenario) -> list[RobotSpec]:
    """One spec per robot, in vehicle order: names, ids, platoon roles, typed blocks and initial state."""
    plans = plan_robots(scenario)
    sources = _command_sources(scenario)
    blocks = _Blocks(scenario)
    names = _Identities()
    placer = _Placer(blocks)
    specs: list[RobotSpec] = []
    leader_id = 0
    for index, plan in enumerate(plans):
        robot_id = names.claim(plan, index)
        if plan.position == 0:
            leader_id = robot_id
        controller = blocks.controller(plan)
        vehicle = blocks.vehicle(plan)
        initial = placer.place(plan, controller, vehicle)
        specs.append(RobotSpec(
            id=robot_id, name=plan.name, spawn_ns=seconds_to_ns(plan.entry.spawn_at_s),
            despawn_ns=None if plan.entry.despawn_at_s is None else seconds_to_ns(plan.entry.despawn_at_s),
            platoon=plan.platoon, position_in_platoon=plan.position,
            predecessor=None if plan.position == 0 else specs[-1].id, leader=None if plan.position == 0 else leader_id,
            vehicle=vehicle, dims=vehicle.dims, initial=initial,
            **_driving(plan, sources.get(plan.name), controller, blocks)))
    return specs


def _command_sources(scenario: Scenario) -> dict[str, CommandSource]:
    """The outside command source of each robot that has one; a bad assignment or override is an error."""
    sources, problems = resolve_drivers(robot_slots(scenario), scenario.drivers, [f.name for f in scenario.federates])
    if problems:
        raise ValueError(problems[0][1])
    problems = unknown_override_problems(scenario)
    if problems:
        raise ValueError(f"{'.'.join(map(str, problems[0][0]))}: {problems[0][1]}")
    return sources


def _driving(plan: RobotPlan, source: CommandSource | None, controller: ControllerSpec,
             blocks: _Blocks) -> dict[str, Any]:
    """Who drives the robot: an outside source, else its platoon's drive (a leader) or its control law."""
    if source is not None:
        return {"command_source": CommandSourceSpec.from_plain({**source.model_dump(mode="json"),
                                                                "port": source.port_name})}
    if plan.position == 0:
        return {"driver": blocks.drive(plan)}
    return {"controller": controller}


class _Identities:
    """Robot ids and names, each used once."""

    def __init__(self) -> None:
        self.ids: set[int] = set()
        self.names: set[str] = set()

    def claim(self, plan: RobotPlan, index: int) -> int:
        """The robot's id (its own, else its index + 1); an id or name used twice is an error at its line."""
        robot_id = plan.entry.id if plan.entry.id is not None else index + 1
        if robot_id in self.ids:
            raise ValueError(f"{_where(plan.loc)}.id: station id {robot_id} is used twice")
        if plan.name in self.names:
            raise ValueError(f"{_where(plan.loc)}.name: robot name '{plan.name}' is used twice")
        self.ids.add(robot_id)
        self.names.add(plan.name)
        return robot_id


class _Blocks:
    """The typed blocks of a scenario's robots, each made once per distinct source in the scenario."""

    def __init__(self, scenario: Scenario) -> None:
        self.base_controller = scenario.controller.model_dump()
        self._controllers: dict[tuple[int, int], ControllerSpec] = {}
        self._vehicles: dict[int, VehicleBlock] = {}
        self._tracks: dict[tuple[int, float], Track | None] = {}
        self._drives: dict[tuple[int, float | None], DriveSpec] = {}
        self._start_speeds: dict[int, float] = {}

    def controller(self, plan: RobotPlan) -> ControllerSpec:
        """The scenario's controller block with the platoon's and the robot's changes on top."""
        key = (id(plan.controller), id(plan.entry.controller))
        if key not in self._controllers:
            platoon = merge_controller(self.base_controller, plan.controller)
            block = ControllerBlock(**merge_controller(platoon, plan.entry.controller)).model_dump()
            self._controllers[key] = ControllerSpec.from_plain(block)
        return self._controllers[key]

    def vehicle(self, plan: RobotPlan) -> VehicleBlock:
        """The robot's vehicle: its preset merged with its overrides (once per template)."""
        if id(plan.vehicle) not in self._vehicles:
            self._vehicles[id(plan.vehicle)] = VehicleBlock.from_plain(plan.vehicle.model_dump())
        return self._vehicles[id(plan.vehicle)]

    def track(self, plan: RobotPlan) -> Track | None:
        """The lane of the robot's platoon (None for a profile leader)."""
        key = (id(plan.leader), plan.lane_offset_m)
        if key not in self._tracks:
            self._tracks[key] = _track(plan)
        return self._tracks[key]

    def drive(self, plan: RobotPlan) -> DriveSpec:
        """A leader's drive; leaders of one drive (on one lane, for a path) share the block."""
        track = self.track(plan)
        key = (id(plan.leader), None if track is None else plan.lane_offset_m)
        if key not in self._drives:
            self._drives[key] = DriveSpec.from_plain(_drive(plan, track))
        return self._drives[key]

    def start_speed(self, plan: RobotPlan) -> float:
        """The start speed of the robot's platoon (its leader profile's at t = 0)."""
        if id(plan.leader) not in self._start_speeds:
            self._start_speeds[id(plan.leader)] = _start_speed(plan.leader)
        return self._start_speeds[id(plan.leader)]


class _Placer:
    """Start states along each platoon: the leader at its start, each follower at its law's gap behind the robot
    before it (or where the file places it)."""

    def __init__(self, blocks: _Blocks) -> None:
        self.blocks = blocks
        self.pred: dict[str, Any] = {}  # the robot placed last: its pose, rear overhang and arc length on its track
        self._spacings: dict[tuple[int, int, float, float], float] = {}

    def place(self, plan: RobotPlan, controller: ControllerSpec, vehicle: VehicleBlock) -> InitialState:
        """The robot's start state (and it becomes the predecessor of the next)."""
        initial = plan.entry.initial.model_dump() if plan.entry.initial else {}
        v_init = initial["v"] if initial.get("v") is not None else self.blocks.start_speed(plan)
        track = self.blocks.track(plan)
        if plan.position == 0:
            pose, along = _leader_start(plan, track)
        else:
            spacing = self._spacing(controller, vehicle, v_init)
            along = None if self.pred["along"] is None else self.pred["along"] - spacing
            pose = track.pose_at(along) if track is not None and along is not None else behind(self.pred, spacing)
        pose.update({k: float(initial[k]) for k in ("x", "y", "yaw") if initial.get(k) is not None})
        placed = any(initial.get(k) is not None for k in ("x", "y", "yaw"))
        self.pred = {**pose, "rear_overhang_m": vehicle.params["rear_overhang_m"], "along": None if placed else along}
        return InitialState(float(pose["x"]), float(pose["y"]), float(pose["yaw"]), float(v_init))

    def _spacing(self, controller: ControllerSpec, vehicle: VehicleBlock, v: float) -> float:
        key = (id(controller), id(vehicle), float(v), float(self.pred["rear_overhang_m"]))
        if key not in self._spacings:
            self._spacings[key] = _initial_spacing(controller.settings, v, vehicle.params, self.pred)
        return self._spacings[key]


def _where(loc: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def _start_speed(leader: Driver) -> float:
    """Initial speed of every robot of a platoon: its leader's profile at t = 0 (a waypoint leader starts at
    rest)."""
    if leader.profile == WAYPOINTS:
        return 0.0
    if is_stand_in(LEADER_PROFILES.get(leader.profile)):
        return 0.0  # a run read back without its profile plug-in: the reader puts the recorded start back
    return float(profile_inputs(leader.profile, leader.params, np.zeros(1))[0][0])


def _track(plan: RobotPlan) -> Track | None:
    """The lane the platoon's leader drives: its path moved sideways by the platoon's lane offset (None for a
    profile leader)."""
    path = plan.leader.path
    if plan.leader.profile != WAYPOINTS or path is None:
        return None
    return Track(np.asarray(path.waypoints, dtype=float), path.closed).shifted(plan.lane_offset_m)


def _drive(plan: RobotPlan, track: Track | None) -> dict[str, Any]:
    """A leader's driver block: its platoon's drive, on the platoon's lane."""
    drive = plan.leader.model_dump(mode="json")
    if track is not None and plan.lane_offset_m != 0.0:
        drive["path"]["waypoints"] = [[float(x), float(y)] for x, y in track.points]
    return drive


def _leader_start(plan: RobotPlan, track: Track | None) -> tuple[dict[str, float], float | None]:
    """A leader's start pose and arc length on its track: the platoon's ``start``, else ``start_along_m`` along its
    track (the first waypoint, heading along the first segment), else the origin heading east; on its lane."""
    if plan.start is not None:
        return shift_left(plan.start.model_dump(), plan.lane_offset_m), None
    if track is not None:
        return track.pose_at(plan.start_along_m), plan.start_along_m
    return shift_left({"x": 0.0, "y": 0.0, "yaw": 0.0}, plan.lane_offset_m), None


def _initial_spacing(controller: Any, v: float, params: Any, pred: dict[str, float]) -> float:
    """Rear-axle distance that makes the follower's spacing error zero at the start. A law that keeps no gap
    (``cruise``: NaN) or none that is finite at this speed starts at the default spacing instead:
    ``DEFAULT_STANDSTILL_GAP_M + DEFAULT_TIME_GAP_S * v`` bumper to bumper, whatever the vehicles' size."""
    law_cls = CONTROLLERS.get(controller["type"])
    if is_stand_in(law_cls):  # a run read back without its law plug-in: the reader puts the recorded poses back
        gap = math.nan
    else:
        law = law_cls(law_cls.Params(**{k: v for k, v in controller.items() if k not in BLOCK_KEYS}))
        gap = float(law.desired_gap(np.array([v]))[0])
    bumper = getattr(law_cls, "gap_reference", "axle") == "bumper"
    if not math.isfinite(gap):
        gap, bumper = DEFAULT_STANDSTILL_GAP_M + DEFAULT_TIME_GAP_S * v, True
    if bumper:
        gap += pred["rear_overhang_m"] + params["length_m"] - params["rear_overhang_m"]
    return gap
