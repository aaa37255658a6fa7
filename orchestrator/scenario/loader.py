"""Load, override (``--set``) and validate a scenario, turning every error into a ``Problem`` with its line."""

from __future__ import annotations

import copy
import difflib
import math
import re
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from .errors import Problem, ScenarioError, format_path
from .model import (
    BLOCK_KEYS,
    ControllerBlock,
    Scenario,
    Vehicle,
    VehicleEntry,
    merge_controller,
    profile_params_model,
    raise_at,
    vehicle_model_fields,
)
from .yamlmarks import Loc, YamlInputError, decode_text, line_of, load_value, load_with_lines

_TAGS = {"fleet", "list"}  # discriminator tags pydantic puts into error locations


def load_scenario(path: str | Path, overrides: Iterable[str] = ()) -> Scenario:
    """Read and validate a scenario file; ``overrides`` are ``path=value`` strings (value parsed as YAML)."""
    path = Path(path)
    return parse_scenario(read_scenario_text(path), str(path), overrides)


def read_scenario_text(path: str | Path, source: str | None = None) -> str:
    """A scenario file's text: strict UTF-8 (a BOM is accepted). An unreadable, binary or non-UTF-8 file raises
    ScenarioError naming the byte offset."""
    path = Path(path)
    source = source or str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ScenarioError(source, [Problem("", f"cannot read file: {exc.strerror or exc}")]) from None
    try:
        return decode_text(data)
    except YamlInputError as exc:
        raise ScenarioError(source, [_yaml_problem(exc)]) from None


def parse_scenario(text: str, source: str = "<scenario>", overrides: Iterable[str] = ()) -> Scenario:
    """Validate scenario text (see ``load_scenario``)."""
    try:
        data, lines = load_with_lines(text)
    except YamlInputError as exc:
        raise ScenarioError(source, [_yaml_problem(exc)]) from None
    if not isinstance(data, dict):
        raise ScenarioError(source, [Problem("", "the scenario must be a mapping of fields (version, vehicles ...)",
                                             1)])
    set_locs: set[Loc] = set()
    for item in overrides:
        loc = apply_override(data, item, source)
        set_locs.add(loc)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(source, _problems(exc, lines, set_locs, data)) from None
    problems = _check_plugins(scenario, lines, set_locs)
    if problems:
        raise ScenarioError(source, problems)
    _check_world(scenario, source, lines, set_locs, data)
    return with_defaults(scenario)


def _check_world(scenario: Scenario, source: str, lines: dict[Loc, int], set_locs: set[Loc], data: Any) -> None:
    """What needs the whole world: the run's estimated memory against the budget, and where each robot starts."""
    from ..resources import resource_problems
    from ..world import start_position_problems

    # placing the robots is skipped for a run too large to simulate anyway
    problems = resource_problems(scenario) or start_position_problems(scenario)
    if problems:
        try:
            raise_at("Scenario", problems)
        except ValidationError as exc:
            raise ScenarioError(source, _problems(exc, lines, set_locs, data)) from None


def _yaml_problem(exc: YamlInputError) -> Problem:
    """A refused YAML input as a problem at its line and field path."""
    message = f"not valid YAML: {exc.problem}" if exc.syntax else exc.problem
    return Problem(format_path(exc.loc), message, exc.line)


def override_scenario(scenario: Scenario, overrides: Iterable[str], source: str = "<scenario>") -> Scenario:
    """A validated scenario with ``path=value`` overrides applied (validated again, defaults resolved)."""
    data = scenario.model_dump(mode="json", exclude_none=True)
    text = yaml.safe_dump(data, sort_keys=False)
    return parse_scenario(text, source, list(overrides))


def with_defaults(scenario: Scenario) -> Scenario:
    """The scenario with the law's, the channel's and the leader profile's parameter defaults written out, so that
    the resolved scenario says every value the run used."""
    from comms_models import COMMS_MODELS
    from controllers import CONTROLLERS

    from .model import ChannelBlock, ControllerBlock

    block = scenario.controller.model_dump()
    law = CONTROLLERS.get(block["type"]).Params(**_law_params(block))
    controller = ControllerBlock(**{k: block[k] for k in BLOCK_KEYS}, **law.model_dump(mode="json"))
    channel = scenario.channel
    params_model = getattr(COMMS_MODELS.get(channel.type), "Params", None)
    if params_model is not None:
        given = {k: v for k, v in channel.model_dump().items() if k != "type"}
        if "origin_lat_deg" in params_model.model_fields:  # the geodetic frame is the scenario's
            given.update(origin_lat_deg=scenario.origin.lat_deg, origin_lon_deg=scenario.origin.lon_deg)
        params = params_model(**given)
        channel = ChannelBlock(type=channel.type, **params.model_dump(mode="json"))
    leader = scenario.leader
    leader_params = profile_params_model(leader.profile).model_validate(leader.params).model_dump(mode="json")
    leader = leader.model_copy(update={"params": leader_params})
    return scenario.model_copy(update={"controller": controller, "channel": channel, "leader": leader})


# -- --set ------------------------------------------------------------------------------------------------------
_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parse_path(text: str) -> Loc:
    """'vehicles[2].controller.time_gap_s' -> ('vehicles', 2, 'controller', 'time_gap_s')."""
    parts: list[object] = []
    for name, index in _PART.findall(text):
        parts.append(int(index) if index else name)
    return tuple(parts)


def _at(data: Any, loc: Loc) -> Any:
    """The raw value at ``loc`` (None when the path does not exist yet)."""
    node = data
    for part in loc:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def apply_override(data: dict[str, Any], item: str, source: str) -> Loc:
    """Apply one ``path=value`` to the raw scenario data, creating mappings on the way."""
    if "=" not in item:
        raise ScenarioError(source, [Problem(item, "--set expects path=value, e.g. controller.time_gap_s=0.5")])
    key, _, raw = item.partition("=")
    loc = parse_path(key.strip())
    if not loc:
        raise ScenarioError(source, [Problem(key, "--set needs a field path")])
    try:
        value = load_value(raw) if raw.strip() else None
    except YamlInputError as exc:
        where = f", line {exc.line} of the value" if exc.line and exc.line > 1 else ""
        what = "is not valid YAML" if exc.syntax else "is refused"
        raise ScenarioError(source, [Problem(format_path(loc), f"the --set value {what}: {exc.problem}{where} "
                                                               "(from --set)")]) from None
    node: Any = data
    for depth, part in enumerate(loc):
        if isinstance(part, int) and not isinstance(_at(data, loc[:depth]), list):
            where = format_path(loc[:depth])
            fleet = loc[:depth] == ("vehicles",)
            hint = " (a fleet: address one robot as vehicles.overrides.<name>...)" if fleet else ""
            raise ScenarioError(source, [Problem(where, f"--set: '{where}' is not a list, so [{part}] does not apply"
                                                        f"{hint}")])
    for depth, part in enumerate(loc[:-1]):
        nxt = loc[depth + 1]
        try:
            container = [] if isinstance(nxt, int) else {}
            node = node[part] if isinstance(node, list) else node.setdefault(part, container)
        except (IndexError, TypeError, AttributeError):
            raise ScenarioError(
                source, [Problem(format_path(loc[: depth + 1]), f"--set: no such element for '{key}'")]
            ) from None
    _forget_old_parameters(node, loc, value)
    try:
        node[loc[-1]] = copy.deepcopy(value)
    except (IndexError, TypeError):
        raise ScenarioError(source, [Problem(format_path(loc), f"--set: cannot set '{key}'")]) from None
    return loc


_DEFAULT_TYPES = {"controller": "ela_cacc", "channel": "ideal"}


def _forget_old_parameters(node: Any, loc: Loc, value: Any) -> None:
    """``--set controller.type=X`` (or ``channel.type=X``, at any level) switching to another law or model drops
    the old one's parameters, as a per-robot override naming another law does (``merge_controller``); the block's
    own keys (period, prediction, lateral, fallback) stay."""
    if len(loc) < 2 or loc[-1] != "type" or loc[-2] not in _DEFAULT_TYPES or not isinstance(node, dict):
        return
    if node.get("type", _DEFAULT_TYPES[str(loc[-2])]) == value:
        return
    keep = set(BLOCK_KEYS) if loc[-2] == "controller" else set()
    for name in [k for k in node if k not in keep and k != "type"]:
        del node[name]


# -- errors -----------------------------------------------------------------------------------------------------
def _problems(exc: ValidationError, lines: dict[Loc, int], set_locs: set[Loc], data: Any) -> list[Problem]:
    problems = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if p not in _TAGS)
        problems.append(_problem(err, loc, lines, set_locs, Scenario))
    return problems


def _from_set(loc: Loc, set_locs: set[Loc]) -> bool:
    """Whether ``loc`` is a ``--set`` path or inside a value that ``--set`` gave (it has no line in the file)."""
    return any(loc[: len(given)] == given for given in set_locs)


def _problem(err: dict[str, Any], loc: Loc, lines: dict[Loc, int], set_locs: set[Loc], root: type) -> Problem:
    kind = err["type"]
    message = str(err["msg"]).removeprefix("Value error, ")
    if kind == "extra_forbidden":
        allowed = _allowed_fields(root, loc[:-1])
        unknown = str(loc[-1])
        hint = ""
        close = difflib.get_close_matches(unknown, allowed, n=1)
        if close:
            hint = f" (did you mean '{close[0]}'?)"
        message = f"unknown field '{unknown}'{hint}; allowed: {', '.join(allowed)}"
    elif kind == "missing":
        message = "required field is missing"
    elif "input" in err and kind not in ("value_error", "union_tag_invalid"):
        message = f"{message}, got {err['input']!r}"
    line = None if _from_set(loc, set_locs) else line_of(lines, loc)
    if _from_set(loc, set_locs):
        message += " (from --set)"
    return Problem(format_path(loc), message, line)


def _allowed_fields(root: type, loc: Loc) -> list[str]:
    """Field names of the model found by following ``loc`` from ``root`` (empty when it cannot be followed)."""
    current: Any = root
    for part in loc:
        current = _child_type(current, part)
        if current is None:
            return []
    model = _as_model(current)
    return sorted(model.model_fields) if model else []


def _as_model(tp: Any) -> type[BaseModel] | None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in typing.get_args(tp):
        found = _as_model(arg)
        if found is not None:
            return found
    return None


def _child_type(tp: Any, part: object) -> Any:
    if isinstance(part, int):
        for arg in _flatten(tp):
            if typing.get_origin(arg) is list:
                return typing.get_args(arg)[0]
        return None
    for arg in _flatten(tp):
        if typing.get_origin(arg) is dict:
            return typing.get_args(arg)[1]
        if isinstance(arg, type) and issubclass(arg, BaseModel) and part in arg.model_fields:
            return arg.model_fields[part].annotation
    return None


def _flatten(tp: Any) -> list[Any]:
    """Unwrap Annotated/Union/Optional into their member types."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _flatten(typing.get_args(tp)[0])
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        out = []
        for arg in typing.get_args(tp):
            out.extend(_flatten(arg))
        return out
    return [tp]


# -- the registry-backed blocks' own parameters ------------------------------------------------------------------
def _check_plugins(scenario: Scenario, lines: dict[Loc, int], set_locs: set[Loc]) -> list[Problem]:
    """Each selected law, channel model, leader profile, vehicle model and federate validates its own parameters
    with its ``Params`` model, built-in or plug-in alike, every problem at its line."""
    check = _ParamsCheck(lines, set_locs)
    return [*_check_scenario(scenario, check), *_check_roster(scenario, check), *_check_laws(scenario, check),
            *_check_channel(scenario, check), *_check_leader(scenario, check), *_check_vehicles(scenario, check),
            *_check_federates(scenario, check)]


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
        if _from_set(loc, self.set_locs):
            return Problem(format_path(loc), message + " (from --set)")
        return Problem(format_path(loc), message, line_of(self.lines, loc))


def _check_roster(scenario: Scenario, check: _ParamsCheck) -> list[Problem]:
    """Robot names and station ids used once, and fleet overrides that name a robot of the fleet, each reported at
    the entry that breaks it (building the robots checks the same, without lines)."""
    block = scenario.vehicles
    problems: list[Problem] = []
    robots: list[_Robot] = []
    if isinstance(block, list):
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
    else:
        blocks += [(("vehicles", "overrides", name, "controller"), merge_controller(base, e.controller), e.controller)
                   for name, e in scenario.vehicles.overrides.items() if e.controller]
    for prefix, merged, own in blocks:
        # the federate-level keys (type, period, prediction, lateral, fallback), then the law's parameters
        found = check(ControllerBlock, merged, prefix)
        if not found:
            period = merged.get("period_s", 0.0)
            if not _on_step_grid(period, scenario.step_s):
                found.append(check.at((*prefix, "period_s"), f"must be a multiple of step_s ({scenario.step_s:g} s), "
                                      f"got {period:g}"))
            law = CONTROLLERS.get(merged["type"]).Params
            found += check(law, _law_params(merged), prefix)
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
    return check(profile_params_model(scenario.leader.profile), scenario.leader.params, ("leader", "params"))


def _check_vehicles(scenario: Scenario, check: _ParamsCheck) -> list[Problem]:
    """A vehicle model's own parameters (those its ``Params`` declares) in every vehicle block; an override that
    names no model uses the template's."""
    block = scenario.vehicles
    if isinstance(block, list):
        vehicles: list[tuple[Loc, Vehicle, str]] = [(("vehicles", i, "vehicle"), e.vehicle, e.vehicle.model)
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


def _law_params(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k not in BLOCK_KEYS}


def _validate_params(
    model: type[BaseModel], params: dict[str, Any], prefix: Loc, lines: dict[Loc, int], set_locs: set[Loc]
) -> list[Problem]:
    try:
        model.model_validate(params)
    except ValidationError as exc:
        out = []
        for err in exc.errors(include_url=False):
            loc = (*prefix, *err["loc"])
            problem = _problem(err, tuple(err["loc"]), {}, set(), model)
            line = None if _from_set(loc, set_locs) else line_of(lines, loc)
            suffix = " (from --set)" if _from_set(loc, set_locs) else ""
            out.append(Problem(format_path(loc), problem.message + suffix, line))
        return out
    return []
