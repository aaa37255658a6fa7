"""Load, override (``--set``) and validate a scenario, turning every error into a ``Problem`` with its line."""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from core.scenario_dir import scenario_directory

from .checks import check_plugins, law_params
from .errors import Problem, ScenarioError, format_path
from .locate import problems_of
from .maneuvers_block import ManeuverSettings
from .model import (
    BLOCK_KEYS,
    ControllerBlock,
    Driver,
    Scenario,
    VehicleEntry,
    merge_controller,
    profile_params_model,
    raise_at,
)
from .yamlmarks import Loc, YamlInputError, decode_text, load_value, load_with_lines

MAX_SCENARIO_BYTES = 32 * 2**20
"""Largest scenario file read: a list of 100,000 robots, each with its own pose and vehicle, takes about 20 MiB;
validating 32 MiB takes some tens of seconds."""


def load_scenario(path: str | Path, overrides: Iterable[str] = ()) -> Scenario:
    """Read and validate a scenario file; ``overrides`` are ``path=value`` strings (value parsed as YAML)."""
    path = Path(path)
    return parse_scenario(read_scenario_text(path), str(path), overrides)


def read_scenario_text(path: str | Path, source: str | None = None) -> str:
    """A scenario file's text: strict UTF-8 (a BOM is accepted). An unreadable, binary or non-UTF-8 file, or one
    larger than ``MAX_SCENARIO_BYTES``, raises ScenarioError (naming the byte offset of a bad byte)."""
    path = Path(path)
    source = source or str(path)
    try:
        with path.open("rb") as file:  # read one byte past the bound: a pipe or device has no size to ask
            data = file.read(MAX_SCENARIO_BYTES + 1)
    except OSError as exc:
        raise ScenarioError(source, [Problem("", f"cannot read file: {exc.strerror or exc}")]) from None
    if len(data) > MAX_SCENARIO_BYTES:
        raise ScenarioError(source, [Problem("", f"the file is larger than {MAX_SCENARIO_BYTES // 2**20} MiB, the "
                                                 "most a scenario may be (a fleet block describes thousands of robots "
                                                 "in a few lines: vehicles: {count: N, overrides: ...})", 1)])
    try:
        return decode_text(data)
    except YamlInputError as exc:
        raise ScenarioError(source, [_yaml_problem(exc)]) from None


def parse_scenario(text: str, source: str = "<scenario>", overrides: Iterable[str] = ()) -> Scenario:
    """Validate scenario text (see ``load_scenario``); relative file names in it are the source file's neighbours."""
    with scenario_directory(None if source.startswith("<") else Path(source).parent):
        return _parse_scenario(text, source, overrides)


def _parse_scenario(text: str, source: str, overrides: Iterable[str]) -> Scenario:
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
        raise ScenarioError(source, problems_of(exc, lines, set_locs, data)) from None
    problems = check_plugins(scenario, lines, set_locs)
    if problems:
        raise ScenarioError(source, problems)
    resolved = with_defaults(scenario)
    resolved._source = SourceMap(source, lines, set_locs, data)
    return resolved


@dataclass(frozen=True)
class SourceMap:
    """Where a validated scenario came from: its file (or ``<...>``), the line of each field, the fields set by
    ``--set`` and the raw data, so that a later step (the plan) reports its problems at their lines too."""

    source: str
    lines: dict[Loc, int]
    set_locs: set[Loc]
    data: Any


def located_error(scenario: Scenario, problems: list[tuple[Loc, str, Any]]) -> ScenarioError:
    """A ScenarioError for ``(loc, message, input)`` problems found after validation, each at its line when
    ``scenario`` was loaded from text (a scenario built in code has no lines: the fields are still named)."""
    where: SourceMap = scenario._source or SourceMap("<scenario>", {}, set(), scenario.model_dump(mode="json"))
    try:
        raise_at("Scenario", problems)
    except ValidationError as exc:
        return ScenarioError(where.source, problems_of(exc, where.lines, where.set_locs, where.data))
    raise AssertionError("raise_at always raises")  # pragma: no cover


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
    """The scenario with the law's, the channel's and the leader profile's parameter defaults written out in the
    scenario's own blocks (robots' and platoons' overrides stay as written: ``fully_resolved`` expands them)."""
    from comms_models import COMMS_MODELS

    from .model import ChannelBlock

    base = scenario.controller.model_dump()
    if base.get("lateral") is None:  # a look-ahead that suits the vehicles' scale (scale_defaults.py)
        from .scale_defaults import default_lateral

        base["lateral"] = default_lateral(scenario.model_dump(mode="json"))
    controller = ControllerBlock(**_resolved_law(base))
    channel = scenario.channel
    params_model = getattr(COMMS_MODELS.get(channel.type), "Params", None)
    if params_model is not None:
        given = {k: v for k, v in channel.model_dump().items() if k != "type"}
        if "origin_lat_deg" in params_model.model_fields:  # the geodetic frame is the scenario's
            given.update(origin_lat_deg=scenario.origin.lat_deg, origin_lon_deg=scenario.origin.lon_deg)
        params = params_model(**given)
        channel = ChannelBlock(type=channel.type, **params.model_dump(mode="json"))
    return scenario.model_copy(update={"controller": controller, "channel": channel,
                                       "leader": _resolved_drive(scenario.leader)})


def fully_resolved(scenario: Scenario) -> Scenario:
    """``scenario`` (already ``with_defaults``) with every robot's and platoon's controller override and every
    platoon's leader drive written out in full, so that ``scenario.resolved.yaml`` says every value the run used
    (``coopsim run OUT/scenario.resolved.yaml`` reproduces the run)."""
    base = scenario.controller.model_dump()
    update: dict[str, Any] = {}
    block = scenario.vehicles
    if isinstance(block, list):
        update["vehicles"] = [_resolved_entry(entry, base) for entry in block]
    elif block is not None:
        update["vehicles"] = block.model_copy(update={"overrides": {
            name: _resolved_entry(entry, base) for name, entry in block.overrides.items()}})
    if scenario.platoons:
        platoons = []
        for platoon in scenario.platoons:
            own = merge_controller(base, platoon.controller)
            platoons.append(platoon.model_copy(update={
                "controller": _resolved_law(own) if platoon.controller else None,
                "leader": None if platoon.leader is None else _resolved_drive(platoon.leader),
                "members": None if platoon.members is None else [_resolved_entry(e, own) for e in platoon.members],
                "overrides": {name: _resolved_entry(e, own) for name, e in platoon.overrides.items()},
            }))
        update["platoons"] = platoons
    if scenario.maneuvers and scenario.maneuver_settings is None:  # the timing the run used, written out
        update["maneuver_settings"] = ManeuverSettings()
    return scenario.model_copy(update=update)


def _resolved_law(block: dict[str, Any]) -> dict[str, Any]:
    """A controller block with its law's parameter defaults written out."""
    from controllers import CONTROLLERS

    law = CONTROLLERS.get(block["type"]).Params(**law_params(block))
    kept = {k: block[k] for k in BLOCK_KEYS if k in block}
    return {**_without_non_finite(kept, kept), **_without_non_finite(law.model_dump(mode="json"), law.model_dump())}


def _without_non_finite(written: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """``written`` without the entries whose value is infinite or NaN in ``values`` (JSON mode writes them as null).
    Only a default can be non-finite here (an override's free-form values refuse them), and a key left out takes
    that same default when the file is read back, so the resolved scenario still reproduces the run."""
    out = {}
    for key, value in written.items():
        given = values.get(key)
        if isinstance(given, float) and not math.isfinite(given):
            continue
        out[key] = _without_non_finite(value, given) if isinstance(value, dict) and isinstance(given, dict) else value
    return out


def _resolved_entry(entry: VehicleEntry, base: dict[str, Any]) -> VehicleEntry:
    """A robot's entry with its controller override written out in full (its block, defaults included)."""
    if not entry.controller:
        return entry
    merged = ControllerBlock(**merge_controller(base, entry.controller)).model_dump()
    return entry.model_copy(update={"controller": _resolved_law(merged)})


def _resolved_drive(leader: Driver) -> Driver:
    params = profile_params_model(leader.profile).model_validate(leader.params).model_dump(mode="json")
    return leader.model_copy(update={"params": params})


# -- --set ------------------------------------------------------------------------------------------------------
_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


_PATH = re.compile(r"[^.\[\]]+(?:\[\d+\])*(?:\.[^.\[\]]+(?:\[\d+\])*)*")
"""A whole ``--set`` path: names joined by single dots, each with optional ``[index]`` suffixes."""


def parse_path(text: str) -> Loc:
    """'vehicles[2].controller.time_gap_s' -> ('vehicles', 2, 'controller', 'time_gap_s'). A path with an empty
    name ('vehicles..count', '.seed', 'a.'), stray brackets or a non-numeric index raises ValueError."""
    if not _PATH.fullmatch(text):
        raise ValueError(f"'{text[:80]}' is not a field path: names joined by single dots, each optionally followed "
                         "by [index] (e.g. vehicles.count, vehicles[2].controller.k1)")
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
    if not key.strip():
        raise ScenarioError(source, [Problem("--set", "--set needs a field path before '='")])
    try:
        loc = parse_path(key.strip())
    except ValueError as exc:
        raise ScenarioError(source, [Problem(key.strip()[:80], f"--set: {exc}")]) from None
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
    own keys (period, prediction, lateral, fallback) stay. Likewise ``attacks[k].type`` and ``detection.type`` keep
    only the ``params`` the new attack or detector takes (``_keep_known_params``)."""
    if len(loc) >= 2 and loc[-1] == "type" and isinstance(node, dict) and (
            loc[-2] == "detection" or (len(loc) >= 3 and loc[-3] == "attacks" and isinstance(loc[-2], int))):
        _keep_known_params(node, value, "detection" if loc[-2] == "detection" else "attack")
        return
    if len(loc) < 2 or loc[-1] != "type" or loc[-2] not in _DEFAULT_TYPES or not isinstance(node, dict):
        return
    if node.get("type", _DEFAULT_TYPES[str(loc[-2])]) == value:
        return
    keep = set(BLOCK_KEYS) if loc[-2] == "controller" else set()
    for name in [k for k in node if k not in keep and k != "type"]:
        del node[name]


def _keep_known_params(node: dict[str, Any], value: Any, kind: str) -> None:
    """An attack or detector switched to type ``value`` keeps the parameters its ``Params`` declares and drops the
    others (``--param attacks[0].type=desired_accel_constant,dos`` sweeps both, and a jammer switched to another
    jammer keeps its power and place); an unknown type keeps them all, for validation to report."""
    params = node.get("params")
    if not isinstance(params, dict) or not params:
        return
    from comms_models.attacks import ATTACKS
    from comms_models.misbehaviour import DETECTORS
    from core.registry import UnknownNameError

    try:
        cls = (ATTACKS if kind == "attack" else DETECTORS).get(str(value))
    except (UnknownNameError, ImportError, TypeError):
        return
    known = set(getattr(cls.Params, "model_fields", {}))
    node["params"] = {k: v for k, v in params.items() if k in known}
