"""Platoon maneuvers as a scenario writes them: a timed list of requests, and the timing every vehicle's state
machine uses::

    maneuvers:
      - {at_s: 10, type: join, robot: joiner, platoon: p1, position: 3}   # without position: at the tail
      - {at_s: 30, type: leave, robot: p1_4}
      - {at_s: 40, type: split, platoon: p1, position: 4}
      - {at_s: 60, type: merge, platoon: p2, into: p1}
    maneuver_settings: {reply_timeout_s: 3.0, ...}

``maneuver_problems`` replays the requests in time order on the platoons' memberships (a join adds its robot at its
position, a leave makes the leaver a platoon of one named after it, a split makes a platoon ``<platoon>_<position>``
unless ``name`` says otherwise, a merge appends the rear platoon), so a position out of range or a robot that is
not where the request says is an error at the request's line.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from core.params import FileName, Loc, Strict

Scenario = Any
"""A validated ``model.Scenario`` (not imported: the model imports this module)."""


class ManeuverRequest(Strict):
    """One maneuver, requested at ``at_s``."""

    at_s: float = Field(ge=0, le=1e6, description="[s] when the request is made")
    type: Literal["join", "leave", "split", "merge"] = Field(description="join | leave | split | merge")
    robot: str | None = Field(None, description="join: the joiner (a platoon of one); leave: the leaver")
    platoon: str | None = Field(None, description="join: the platoon joined; split: the platoon split; merge: the "
                                "rear platoon, which merges")
    position: int | None = Field(None, ge=1, le=254, strict=True, description="join: the joiner's position "
                                 "(default: the tail); split: the first robot of the new platoon")
    into: str | None = Field(None, description="merge: the front platoon")
    lane_offset_m: float | None = Field(None, ge=-1000, le=1000, description="[m] leave: the lane the leaver moves "
                                        "to, left of its platoon's path (default: two vehicle widths to the right "
                                        "of its lane)")
    name: FileName | None = Field(None, description="split: the new platoon's name (default <platoon>_<position>)")

    @model_validator(mode="after")
    def _fields_of_type(self) -> ManeuverRequest:
        needed = {"join": ("robot", "platoon"), "leave": ("robot",), "split": ("platoon", "position"),
                  "merge": ("platoon", "into")}[self.type]
        allowed = set(needed) | {"join": {"position"}, "leave": {"lane_offset_m"}, "split": {"name"},
                                 "merge": set()}[self.type]
        missing = [key for key in needed if getattr(self, key) is None]
        if missing:
            raise ValueError(f"a {self.type} needs {' and '.join(repr(k) for k in missing)}")
        extra = sorted(k for k in ("robot", "platoon", "position", "into", "lane_offset_m", "name")
                       if getattr(self, k) is not None and k not in allowed)
        if extra:
            raise ValueError(f"a {self.type} takes no {', '.join(repr(k) for k in extra)}")
        return self


class ManeuverSettings(Strict):
    """Timing, gaps and limits of the maneuvers (every vehicle's state machine uses the same)."""

    reply_timeout_s: float = Field(3.0, gt=0, le=1000, description="[s] waiting for a reply (accept, a partner's "
                                   "next step) before the maneuver is aborted")
    move_timeout_s: float = Field(40.0, gt=0, le=1000, description="[s] a joiner or merging leader reaching its "
                                  "slot, or a gap opening, before the maneuver is aborted")
    gap_open_s: float = Field(6.0, gt=0, le=1000, description="[s] a gap opens (or closes) over this time, as a "
                              "fifth-order ramp of the extra distance")
    gap_rate_mps: float = Field(3.0, gt=0, le=100, description="[m/s] a gap changing by more than this times "
                                "gap_open_s takes longer: change / gap_rate_mps (the mean relative speed)")
    lane_change_s: float = Field(4.0, gt=0, le=1000, description="[s] a lane change: the lateral offset moves "
                                 "along a fifth-order ramp over this time")
    hold_s: float = Field(1.0, gt=0, le=1000, description="[s] a final state (joined, left, aborted) is sent this "
                          "long before the robot is idle again, so partners hear it")
    split_time_gap_s: float = Field(1.0, ge=0, le=10, description="[s] a new leader after a split keeps this much "
                                    "more time gap to the platoon ahead")
    approach_gain: float = Field(0.3, gt=0, le=10, description="[1/s] joiner/merger: wanted speed difference per "
                                 "metre of slot error")
    speed_gain: float = Field(1.0, gt=0, le=10, description="[1/s] joiner/merger: acceleration per m/s of speed "
                              "error")
    max_accel_mps2: float = Field(1.5, gt=0, le=20, description="[m/s^2] joiner/merger acceleration limit")
    max_decel_mps2: float = Field(3.0, gt=0, le=20, description="[m/s^2] joiner/merger deceleration limit")
    lookahead_time_s: float = Field(1.0, gt=0, le=10, description="[s] pure pursuit onto the lane: look-ahead per "
                                    "m/s")
    min_lookahead_m: float = Field(0.5, gt=0, le=100, description="[m] pure pursuit onto the lane: shortest "
                                   "look-ahead")


def platoon_names(scenario: Scenario) -> list[str]:
    """The platoons' names in index order (``p<index>`` where a platoon has none, and in the fleet form)."""
    if scenario.platoons:
        return [block.name or f"p{k}" for k, block in enumerate(scenario.platoons)]
    from .platoons_block import plan_robots

    count = max((plan.platoon for plan in plan_robots(scenario)), default=0) + 1
    return [f"p{k}" for k in range(count)]


def maneuver_problems(scenario: Scenario) -> list[tuple[Loc, str, Any]]:
    """Requests that cannot run, each at its field: after the run's end, before a robot appears, naming a robot or
    platoon that is not there at that time, a position out of range."""
    if not scenario.maneuvers:
        return []
    from .platoons_block import plan_robots

    plans = plan_robots(scenario)
    names = platoon_names(scenario)
    members: dict[str, list[str]] = {name: [] for name in names}
    spawn: dict[str, float] = {}
    for plan in plans:
        members[names[plan.platoon]].append(plan.name)
        spawn[plan.name] = plan.entry.spawn_at_s
    problems: list[tuple[Loc, str, Any]] = []
    order = sorted(range(len(scenario.maneuvers)), key=lambda i: (scenario.maneuvers[i].at_s, i))
    for i in order:
        request = scenario.maneuvers[i]
        loc: Loc = ("maneuvers", i)
        if request.at_s >= scenario.duration_s:
            problems.append(((*loc, "at_s"), f"must be before the end of the run (duration_s = "
                                             f"{scenario.duration_s:g} s), got {request.at_s:g}", request.at_s))
            continue
        problem = _replay(request, members, spawn)
        if problem is not None:
            problems.append(((*loc, problem[0]), problem[1], getattr(request, problem[0])))
    return problems


def _platoon_of(members: dict[str, list[str]], robot: str) -> str | None:
    return next((name for name, robots in members.items() if robot in robots), None)


def _replay(request: ManeuverRequest, members: dict[str, list[str]], spawn: dict[str, float]
            ) -> tuple[str, str] | None:
    """Applies ``request`` to ``members``; (field, message) when it cannot run."""
    known = ", ".join(sorted(members))
    for key in ("platoon", "into"):
        value = getattr(request, key)
        if value is not None and value not in members:
            return key, f"no platoon named '{value}' at t = {request.at_s:g} s (platoons then: {known})"
    if request.robot is not None:
        home = _platoon_of(members, request.robot)
        if home is None:
            return "robot", f"no robot named '{request.robot}' in any platoon at t = {request.at_s:g} s"
        if spawn.get(request.robot, 0.0) > request.at_s:
            return "at_s", f"robot '{request.robot}' appears only at t = {spawn[request.robot]:g} s"
    if request.type == "join":
        assert request.robot is not None and request.platoon is not None
        home = _platoon_of(members, request.robot)
        assert home is not None
        if home == request.platoon:
            return "robot", f"robot '{request.robot}' is already in platoon '{request.platoon}'"
        if len(members[home]) != 1:
            return "robot", (f"robot '{request.robot}' drives in platoon '{home}' with {len(members[home]) - 1} "
                             "others; a joiner drives alone (a platoon of one, or a robot that left)")
        size = len(members[request.platoon])
        position = size if request.position is None else request.position
        if position > size:
            return "position", (f"platoon '{request.platoon}' has {size} robots at t = {request.at_s:g} s: a "
                                f"joiner's position is 1 .. {size} ({size}: the tail)")
        del members[home]
        members[request.platoon].insert(position, request.robot)
    elif request.type == "leave":
        assert request.robot is not None
        home = _platoon_of(members, request.robot)
        assert home is not None
        if members[home].index(request.robot) == 0:
            return "robot", f"robot '{request.robot}' leads platoon '{home}': a leader leaves by a split at 1"
        if request.robot in members:
            return "robot", f"a platoon is named '{request.robot}': the leaver's own platoon cannot take its name"
        members[home].remove(request.robot)
        members[request.robot] = [request.robot]
    elif request.type == "split":
        assert request.platoon is not None and request.position is not None
        robots = members[request.platoon]
        if request.position >= len(robots):
            return "position", (f"platoon '{request.platoon}' has {len(robots)} robots at t = {request.at_s:g} s: "
                                f"a split position is 1 .. {len(robots) - 1}")
        new = request.name or f"{request.platoon}_{request.position}"
        if new in members:
            return "name", f"a platoon named '{new}' exists already"
        members[new] = robots[request.position:]
        del robots[request.position:]
    else:
        assert request.platoon is not None and request.into is not None
        if request.platoon == request.into:
            return "into", "a platoon cannot merge into itself"
        members[request.into] += members.pop(request.platoon)
    return None
