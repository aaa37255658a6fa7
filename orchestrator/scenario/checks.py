"""Checks after the schema: each selected law, channel model, leader profile, vehicle model and federate validates
its own parameters with its ``Params`` model (built-in or plug-in alike), and rules across blocks (the trace period
on the step grid, unique names and ids) are reported at the field that breaks them, with its line."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from .errors import MAX_LISTED, UNLISTED, Problem, format_path
from .locate import from_set, problem_at
from .model import (
    BLOCK_KEYS,
    ControllerBlock,
    Scenario,
    Vehicle,
    VehicleEntry,
    merge_controller,
    profile_params_model,
    robot_slots,
    vehicle_model_fields,
)
from .yamlmarks import Loc, line_of


def check_plugins(scenario: Scenario, lines: dict[Loc, int], set_locs: set[Loc]) -> list[Problem]:
    """Each selected law, channel model, leader profile, vehicle model and federate validates its own parameters
    with its ``Params`` model, built-in or plug-in alike, every problem at its line."""
    check = _ParamsCheck(lines, set_locs)
    return [*_check_scenario(scenario, check), *_check_roster(scenario, check), *_check_laws(scenario, check),
            *_check_channel(scenario, check), *_check_leader(scenario, check), *_check_vehicles(scenario, check),
            *_check_federates(scenario, check), *_check_drivers(scenario, check)]


def _check_drivers(scenario: Scenario, check: _ParamsCheck) -> list[Problem]:
    """Each robot has at most one external command source, and each source names a federate of the scenario."""
    from .drivers_block import resolve_drivers

    _, problems = resolve_drivers(robot_slots(scenario), scenario.drivers, [f.name for f in scenario.federates])
    return [check.at(loc, message) for loc, message in problems]


def _on_step_grid(period: float, step_s: float) -> bool:
    """Whether ``period`` is a (finite) whole number of steps."""
    steps = period / step_s
    return math.isfinite(steps) and abs(steps - round(steps)) <= 1e-6


def _check_scenario(scenario: Scenario, check: _ParamsCheck) -> list[Problem]:
    """Rules across blocks, each reported at the field that breaks it: the trace period on the step grid and
    federate names that are unique and not those of the built-in federates."""
    problems: list[Problem] = []
    period = scenario.outputs.trace_period_s
    if period is not None and not _on_step_grid(period, scenario.step_s):
        problems.append(check.at(("outputs", "trace_period_s"), f"must be a multiple of step_s "
                                 f"({scenario.step_s:g} s), got {period:g}"))
    owners = {name: "a built-in federate (physics, v2x and control are)" for name in ("physics", "v2x", "control")}
    for i, extra in enumerate(scenario.federates):
        if extra.name in owners:
            problems.append(check.at(("federates", i, "name"), f"the name '{extra.name}' is taken by "
                                     f"{owners[extra.name]}; federate names are unique"))
        owners.setdefault(extra.name, f"federates[{i}]")
    return problems


class _ParamsCheck:
    """``_validate_params`` bound to the scenario's line table and ``--set`` paths."""

    def __init__(self, lines: dict[Loc, int], set_locs: set[Loc]) -> None:
        self.lines = lines
        self.set_locs = set_locs

    def __call__(self, model: type[BaseModel], params: dict[str, Any], prefix: Loc) -> list[Problem]:
        return _validate_params(model, params, prefix, self.lines, self.set_locs)

    def at(self, loc: Loc, message: str) -> Problem:
        """A problem at ``loc`` with its line."""
        if from_set(loc, self.set_locs):
            return Problem(format_path(loc), message + " (from --set)")
        return Problem(format_path(loc), message, line_of(self.lines, loc))


def _check_roster(scenario: Scenario, check: _ParamsCheck) -> list[Problem]:
    """Robot names and station ids used once, and fleet overrides that name a robot of the fleet, each reported at
    the entry that breaks it (building the robots checks the same, without lines)."""
    block = scenario.vehicles
    problems: list[Problem] = []
    robots: list[_Robot] = []
    if block is None:  # the platoons form
        from .platoons_block import plan_robots, unknown_override_problems

        problems += [check.at(loc, message) for loc, message in unknown_override_problems(scenario)]
        robots = [_Robot(plan.name, plan.entry.id if plan.entry.id is not None else i + 1,
                         (*plan.loc, "name") if plan.entry.name else None,
                         (*plan.loc, "id") if plan.entry.id is not None else None)
                  for i, plan in enumerate(plan_robots(scenario))]
    elif isinstance(block, list):
        robots = [_Robot.of(entry, f"robot{i}", i, ("vehicles", i)) for i, entry in enumerate(block)]
    else:
        default_names = [f"{block.name_prefix}{i}" for i in range(block.count)]
        for key in sorted(set(block.overrides) - set(default_names)):
            problems.append(check.at(("vehicles", "overrides", key), f"no robot named '{key}' in the fleet (robots "
                                     f"are {default_names[0]} .. {default_names[-1]})"))
        if any(e.name or e.id is not None for e in block.overrides.values()):  # else the defaults are unique
            robots = [_Robot.of(block.overrides.get(name), name, i, ("vehicles", "overrides", name))
                      for i, name in enumerate(default_names)]
    for what in ("name", "id"):
        first: dict[object, _Robot] = {}
        for robot in robots:
            other = first.setdefault(getattr(robot, what), robot)
            if other is not robot:  # a clash involves a value the file sets: defaults are unique
                loc = getattr(robot, f"{what}_loc") or getattr(other, f"{what}_loc") or ("vehicles",)
                label = "robot name" if what == "name" else "station id"
                problems.append(check.at(loc, f"{label} {getattr(robot, what)!r} is used twice"))
    return problems


@dataclass(frozen=True)
class _Robot:
    """A robot's name and station id, and where the file sets them (None: the default)."""

    name: str
    id: int
    name_loc: Loc | None
    id_loc: Loc | None

    @classmethod
    def of(cls, entry: VehicleEntry | None, default_name: str, index: int, prefix: Loc) -> _Robot:
        name = entry.name if entry is not None and entry.name else None
        robot_id = entry.id if entry is not None else None
        return cls(name or default_name, robot_id if robot_id is not None else index + 1,
                   (*prefix, "name") if name else None, (*prefix, "id") if robot_id is not None else None)


def _check_laws(scenario: Scenario, check: _ParamsCheck) -> list[Problem]:
    from controllers import CONTROLLERS

    problems: list[Problem] = []
    base = scenario.controller.model_dump()
    blocks: list[tuple[Loc, dict[str, Any], dict[str, Any]]] = [(("controller",), base, base)]
    if isinstance(scenario.vehicles, list):
        blocks += [(("vehicles", i, "controller"), merge_controller(base, e.controller), e.controller)
                   for i, e in enumerate(scenario.vehicles) if e.controller]
    elif scenario.vehicles is not None:
        blocks += [(("vehicles", "overrides", name, "controller"), merge_controller(base, e.controller), e.controller)
                   for name, e in scenario.vehicles.overrides.items() if e.controller]
    for k, platoon in enumerate(scenario.platoons):
        own_base = merge_controller(base, platoon.controller)
        if platoon.controller:
            blocks.append((("platoons", k, "controller"), own_base, platoon.controller))
        entries = [(("platoons", k, "members", i), e) for i, e in enumerate(platoon.members or [])]
        entries += [(("platoons", k, "overrides", name), e) for name, e in platoon.overrides.items()]
        blocks += [((*loc, "controller"), merge_controller(own_base, e.controller), e.controller)
                   for loc, e in entries if e.controller]
    for prefix, merged, own in blocks:
        # the federate-level keys (type, period, prediction, lateral, fallback), then the law's parameters
        found = check(ControllerBlock, merged, prefix)
        if not found:
            period = merged.get("period_s", 0.0)
            if not _on_step_grid(period, scenario.step_s):
                found.append(check.at((*prefix, "period_s"), f"must be a multiple of step_s ({scenario.step_s:g} s), "
                                      f"got {period:g}"))
            law = CONTROLLERS.get(merged["type"]).Params
            found += check(law, law_params(merged), prefix)
        # problems with keys the robot inherited are reported once, at the scenario's controller block
        if prefix == ("controller",):
            problems += found
        else:
            head = format_path(prefix) + "."
            problems += [p for p in found if re.split(r"[.\[]", p.path.removeprefix(head))[0] in own]
    return problems


def _check_channel(scenario: Scenario, check: _ParamsCheck) -> list[Problem]:
    from comms_models import COMMS_MODELS

    problems: list[Problem] = []
    channel_cls = COMMS_MODELS.get(scenario.channel.type)
    for key in ("origin_lat_deg", "origin_lon_deg"):
        given = (scenario.channel.model_extra or {}).get(key)
        own = {"origin_lat_deg": scenario.origin.lat_deg, "origin_lon_deg": scenario.origin.lon_deg}[key]
        if given is not None and given != own:
            problems.append(check.at(("channel", key), "the channel uses the scenario's origin: set origin.lat_deg / "
                                     "origin.lon_deg instead"))
    params_model = getattr(channel_cls, "Params", None)
    if params_model is not None:
        params = {k: v for k, v in scenario.channel.model_dump().items() if k != "type"}
        problems += check(params_model, params, ("channel",))
    elif scenario.channel.model_extra:
        extra = sorted(scenario.channel.model_extra)
        problems.append(check.at(("channel", extra[0]), f"the '{scenario.channel.type}' channel takes no parameters"))
    return problems


def _check_leader(scenario: Scenario, check: _ParamsCheck) -> list[Problem]:
    leaders = [(("leader",), scenario.leader)]
    leaders += [(("platoons", k, "leader"), p.leader) for k, p in enumerate(scenario.platoons) if p.leader is not None]
    return [problem for loc, leader in leaders
            for problem in check(profile_params_model(leader.profile), leader.params, (*loc, "params"))]


def _check_vehicles(scenario: Scenario, check: _ParamsCheck) -> list[Problem]:
    """A vehicle model's own parameters (those its ``Params`` declares) in every vehicle block; an override that
    names no model uses the template's."""
    block = scenario.vehicles
    vehicles: list[tuple[Loc, Vehicle, str]] = []
    for k, platoon in enumerate(scenario.platoons):
        vehicles.append((("platoons", k, "template"), platoon.template, platoon.template.model))
        vehicles += [(("platoons", k, "members", i, "vehicle"), e.vehicle, e.vehicle.model)
                     for i, e in enumerate(platoon.members or []) if e.vehicle is not None]
        vehicles += [(("platoons", k, "overrides", name, "vehicle"), e.vehicle,
                      e.vehicle.model if "model" in e.vehicle.model_fields_set else platoon.template.model)
                     for name, e in platoon.overrides.items() if e.vehicle is not None]
    if block is None:
        pass
    elif isinstance(block, list):
        vehicles = [(("vehicles", i, "vehicle"), e.vehicle, e.vehicle.model)
                    for i, e in enumerate(block) if e.vehicle is not None]
    else:
        vehicles = [(("vehicles", "template"), block.template, block.template.model)]
        vehicles += [(("vehicles", "overrides", name, "vehicle"), e.vehicle,
                      e.vehicle.model if "model" in e.vehicle.model_fields_set else block.template.model)
                     for name, e in block.overrides.items() if e.vehicle is not None]
    from federates.physics.models import VEHICLE_MODELS

    problems: list[Problem] = []
    for prefix, vehicle, model in vehicles:
        own = vehicle_model_fields(model)
        if own:
            params_model = VEHICLE_MODELS.get(model).Params
            given = {k: v for k, v in vehicle.params.items() if k in own}
            problems += check(params_model, given, (*prefix, "params"))
    return problems


def _check_federates(scenario: Scenario, check: _ParamsCheck) -> list[Problem]:
    """Extra federates with a ``Params`` model (in process; a remote one is checked by its host)."""
    from federates import FEDERATE_KINDS

    problems: list[Problem] = []
    for i, extra in enumerate(scenario.federates):
        if extra.remote is None:
            params_model = getattr(FEDERATE_KINDS.get(extra.type), "Params", None)
            if params_model is not None:
                problems += check(params_model, extra.params, ("federates", i, "params"))
    return problems


def law_params(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k not in BLOCK_KEYS}


def _validate_params(
    model: type[BaseModel], params: dict[str, Any], prefix: Loc, lines: dict[Loc, int], set_locs: set[Loc]
) -> list[Problem]:
    try:
        model.model_validate(params)
    except ValidationError as exc:
        out = []
        for err in exc.errors(include_url=False):
            if len(out) >= MAX_LISTED:  # counted, never shown
                out.append(UNLISTED)
                continue
            loc = (*prefix, *err["loc"])
            problem = problem_at(err, tuple(err["loc"]), {}, set(), model)
            line = None if from_set(loc, set_locs) else line_of(lines, loc)
            suffix = " (from --set)" if from_set(loc, set_locs) else ""
            out.append(Problem(format_path(loc), problem.message + suffix, line))
        return out
    return []
