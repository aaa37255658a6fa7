"""Platoons as researchers write them: each with its own members, leader drive, lane and controller.

Two forms describe the robots of a scenario. The fleet form (``vehicles:`` with ``platoon.size``) cuts one list of
robots into platoons of equal size that share the ``leader:`` drive and the ``controller:`` block. The platoons
form (``platoons:``) gives each platoon its own::

    platoons:
      - name: a                       # robots a_0, a_1, ... (or list them: members: [{name: ...}, ...])
        count: 6
        template: {preset: auna_rc_1to10}
        leader: {profile: waypoints, path: {waypoints: [[0, 0], [20, 0], [20, 10]], closed: true}}
        controller: {type: path_cacc}  # on top of the scenario's controller block
        lane_offset_m: 0.0            # the platoon's lane: left of its leader's path (REP-103: y left)
        start_along_m: 0.0            # where on its path the leader starts

``plan_robots`` turns either form into one ``RobotPlan`` per robot, which is all the world needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from core.params import COORDINATE_LIMIT_M, FileName, Loc, Strict

from .vehicles_block import Driver, Vehicle, VehicleEntry

Scenario = Any
"""A validated ``model.Scenario`` (not imported: the model imports this module)."""


class StartPose(Strict):
    """Where a platoon's leader starts: its rear-axle point and heading in the local ENU frame."""

    x: float = Field(0.0, ge=-COORDINATE_LIMIT_M, le=COORDINATE_LIMIT_M, description="[m] east")
    y: float = Field(0.0, ge=-COORDINATE_LIMIT_M, le=COORDINATE_LIMIT_M, description="[m] north")
    yaw: float = Field(0.0, description="[rad] counter-clockwise from east")


class PlatoonBlock(Strict):
    """One platoon of the ``platoons:`` form."""

    name: FileName | None = Field(None, min_length=1, max_length=48,
                             description="the platoon's name (default: p<index>); robots are <name>_<k>")
    members: list[VehicleEntry] | None = Field(None, description="the robots, leader first (or count + template)")
    count: int | None = Field(None, ge=1, le=100_000, strict=True, description="robots built from template")
    template: Vehicle = Field(default_factory=Vehicle, description="vehicle of every robot (count form)")
    overrides: dict[str, VehicleEntry] = Field(default_factory=dict, description="per-robot changes (count form), "
                                               "keyed by robot name")
    leader: Driver | None = Field(None, description="the leader's drive (default: the scenario's leader block)")
    controller: dict[str, Any] | None = Field(None, description="changes to the scenario's controller block for "
                                              "this platoon's followers")
    lane_offset_m: float = Field(0.0, ge=-1000, le=1000, description="[m] the platoon's lane, left of its leader's "
                                 "path or start heading (a track is shifted sideways by this much)")
    start: StartPose | None = Field(None, description="the leader's start pose (default: the path's start, or the "
                                    "origin heading east)")
    start_along_m: float = Field(0.0, ge=0, description="[m] how far along its path the leader starts")

    @model_validator(mode="after")
    def _one_form(self) -> PlatoonBlock:
        if (self.members is None) == (self.count is None):
            raise ValueError("give exactly one of 'members' (a list of robots) and 'count' (with 'template')")
        if self.members is not None and self.overrides:
            raise ValueError("'overrides' go with 'count'; with 'members', write each member's values in its entry")
        return self

    def robot_names(self, index: int) -> list[str]:
        """The names of the members, leader first."""
        prefix = f"{self.name or f'p{index}'}_"
        if self.members is not None:
            return [m.name or f"{prefix}{k}" for k, m in enumerate(self.members)]
        assert self.count is not None
        return [f"{prefix}{k}" for k in range(self.count)]


@dataclass(frozen=True)
class RobotPlan:
    """One robot as the scenario describes it, whichever form: what the world builds it from."""

    name: str
    entry: VehicleEntry
    vehicle: Vehicle
    loc: Loc  # where the file writes this robot (for messages at its line)
    platoon: int
    position: int  # 0: the platoon's leader
    leader: Driver  # its platoon's leader drive
    controller: dict[str, Any] | None  # its platoon's changes to the controller block (None: the scenario's)
    lane_offset_m: float = 0.0
    start: StartPose | None = None
    start_along_m: float = 0.0


def plan_robots(scenario: Scenario) -> list[RobotPlan]:
    """One plan per robot in vehicle order (platoon by platoon, leader first)."""
    if scenario.platoons:
        return [plan for k, block in enumerate(scenario.platoons) for plan in _platoon_plans(k, block, scenario)]
    block = scenario.vehicles
    entries: list[tuple[str, VehicleEntry, Vehicle, Loc]] = []
    if isinstance(block, list):
        entries = [(e.name or f"robot{i}", e, e.vehicle or Vehicle(), ("vehicles", i)) for i, e in enumerate(block)]
    elif block is not None:
        plain = VehicleEntry()  # one shared entry for the robots without overrides (read-only)
        for i in range(block.count):
            key = f"{block.name_prefix}{i}"
            entry = block.overrides.get(key, plain)
            entries.append((entry.name or key, entry, _merged_vehicle(block.template, entry),
                            ("vehicles", "overrides", key) if key in block.overrides else ("vehicles", "count")))
    size = scenario.platoon.size or len(entries) or 1
    return [RobotPlan(name, entry, vehicle, loc, i // size, i % size, scenario.leader, None,
                      lane_offset_m=-(i // size) * scenario.platoon.lateral_spacing_m)
            for i, (name, entry, vehicle, loc) in enumerate(entries)]


def _platoon_plans(k: int, block: PlatoonBlock, scenario: Scenario) -> list[RobotPlan]:
    names = block.robot_names(k)
    leader = block.leader or scenario.leader
    plans = []
    plain = VehicleEntry()  # one shared entry for the robots without overrides (read-only)
    for position, name in enumerate(names):
        if block.members is not None:
            entry = block.members[position]
            vehicle = entry.vehicle or Vehicle()
            loc: Loc = ("platoons", k, "members", position)
        else:
            entry = block.overrides.get(name, plain)
            vehicle = _merged_vehicle(block.template, entry)
            loc = ("platoons", k, "overrides", name) if name in block.overrides else ("platoons", k, "count")
        plans.append(RobotPlan(name, entry, vehicle, loc, k, position, leader, block.controller,
                               block.lane_offset_m, block.start, block.start_along_m))
    return plans


def _merged_vehicle(template: Vehicle, entry: VehicleEntry) -> Vehicle:
    """A fleet member's vehicle: the template with the entry's changes on top."""
    if entry.vehicle is None:
        return template
    base = template.model_dump()
    changed = entry.vehicle.model_dump(exclude_unset=True)
    return Vehicle(**{**base, **changed, "params": {**base["params"], **changed.get("params", {})}})


def unknown_override_problems(scenario: Scenario) -> list[tuple[Loc, str]]:
    """Overrides of the platoons form that name no robot of their platoon."""
    problems = []
    for k, block in enumerate(scenario.platoons):
        if block.count is None:
            continue
        names = block.robot_names(k)
        for key in sorted(set(block.overrides) - set(names)):
            problems.append((("platoons", k, "overrides", key), f"no robot named '{key}' in platoon "
                                                                  f"{block.name or k} (robots are {names[0]} .. "
                                                                  f"{names[-1]})"))
    return problems
