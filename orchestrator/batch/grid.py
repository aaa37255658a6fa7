"""Points of a batch: ``--param path=v1,v2`` values, their Cartesian product, directory names, and every point's
scenario built the way ``coopsim run`` builds one (YAML text plus ``--set`` overrides through ``parse_scenario``, so
defaults such as the channel's geodetic origin are resolved once, in one place)."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..build.plan import check_plan
from ..scenario import Problem, Scenario, ScenarioError, parse_scenario
from ..scenario.yamlmarks import load_value

Params = list[tuple[str, list[Any]]]


@dataclass(frozen=True)
class Point:
    """One point of a batch: its directory name, the values it stands for (``{path or axis: value}``) and the
    ``--set`` overrides that make its scenario from the base."""

    name: str
    params: dict[str, Any]
    overrides: list[str] = field(default_factory=list)


# -- --param ----------------------------------------------------------------------------------------------------
def split_values(text: str) -> list[str]:
    """Split ``v1,v2,...`` on the commas outside brackets, braces and quotes, so that YAML values such as
    ``[1, 2]`` or ``{at_s: 1}`` stay whole."""
    parts: list[str] = []
    depth, quote, start = 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def parse_param(text: str, source: str = "--param") -> tuple[str, list[Any]]:
    """``path=v1,v2,...`` -> (path, values), each value parsed as YAML like ``--set`` does."""
    path, eq, raw = text.partition("=")
    path = path.strip()
    if not eq or not path:
        raise ScenarioError(source, [Problem(text, "--param expects path=v1,v2,..., "
                                                   "e.g. controller.time_gap_s=0.4,0.8,1.2")])
    values = []
    for item in split_values(raw):
        if not item:
            raise ScenarioError(source, [Problem(path, f"--param: empty value in '{raw}'")])
        try:
            values.append(load_value(item))
        except yaml.YAMLError as exc:
            raise ScenarioError(source, [Problem(path, f"--param: value '{item}' is not valid YAML: "
                                                       f"{getattr(exc, 'problem', exc)}")]) from None
    return path, values


def check_params(params: Params, source: str) -> None:
    """Reject a path swept twice, a path without values and repeated values, all problems at once."""
    problems = []
    seen: set[str] = set()
    for path, values in params:
        if path in seen:
            problems.append(Problem(path, "--param: the same path is swept twice"))
        seen.add(path)
        if not values:
            problems.append(Problem(path, "--param: no values"))
        dumped = [yaml_value(v) for v in values]
        repeated = sorted({d for d in dumped if dumped.count(d) > 1})
        if repeated:
            problems.append(Problem(path, f"--param: repeated value(s) {', '.join(repeated)}"))
    if problems:
        raise ScenarioError(source, problems)


def grid(params: Params) -> list[dict[str, Any]]:
    """Every combination of the parameter values, the first parameter varying slowest."""
    paths = [p for p, _ in params]
    return [dict(zip(paths, combo, strict=True)) for combo in itertools.product(*(v for _, v in params))]


def yaml_value(value: Any) -> str:
    """A value as one line of YAML that ``--set`` parses back to the same value."""
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 30).strip().removesuffix("...").strip()


UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]+")


def point_names(points: Sequence[Mapping[str, Any]]) -> list[str]:
    """Filesystem-safe, unique directory names such as ``time_gap_s=0.4__type=itsg5``. A parameter is named by its
    last path component unless two swept paths share it."""
    if not points:
        return []
    paths = list(points[0])
    leaves = [str(p).split(".")[-1] for p in paths]
    labels = [leaf if leaves.count(leaf) == 1 else path for leaf, path in zip(leaves, paths, strict=True)]
    names: list[str] = []
    for point in points:
        parts = []
        for label, path in zip(labels, paths, strict=True):
            value = point[path]
            text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)
            parts.append(f"{UNSAFE.sub('_', label)}={UNSAFE.sub('_', text)[:40]}")
        name = "__".join(parts) or "point"
        if len(name) > 120:  # keep paths short; the hash keeps truncated names distinct
            name = name[:110] + "~" + hashlib.sha1(name.encode()).hexdigest()[:8]
        base, k = name, 2
        while name in names:
            name, k = f"{base}~{k}", k + 1
        names.append(name)
    return names


def point_overrides(point: Mapping[str, Any], base_channel: str,
                    variants: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    """The ``--set`` strings of one grid point. Another channel model takes other parameters, so a point that
    changes ``channel.type`` starts that channel from the scenario's ``channel_variants`` block for it (``variants``)
    or else from its own defaults, instead of the base channel's block."""
    overrides = []
    channel = point.get("channel.type")
    if channel is not None and channel != base_channel:
        block = {k: v for k, v in (variants or {}).get(channel, {}).items() if k != "type"}
        overrides.append(f"channel={yaml_value({'type': channel, **block})}")
    overrides += [f"{path}={yaml_value(value)}" for path, value in point.items()]
    return overrides


def grid_points(params: Params, base_channel: str,
                variants: Mapping[str, Mapping[str, Any]] | None = None) -> list[Point]:
    """The points of a parameter grid, named by ``point_names``; ``variants``: the scenario's ``channel_variants``."""
    values = grid(params)
    return [Point(name, p, point_overrides(p, base_channel, variants))
            for p, name in zip(values, point_names(values), strict=True)]


# -- scenarios --------------------------------------------------------------------------------------------------
def scenario_text(scenario: Scenario | str | Path, source: str | None = None) -> tuple[str, str]:
    """The scenario as YAML text and its source name: a file is read, a string with a newline is YAML text, and a
    validated ``Scenario`` is written back to YAML (as ``override_scenario`` does) so that its points are parsed
    again, with their overrides, like any file."""
    if isinstance(scenario, Scenario):
        data = scenario.model_dump(mode="json", exclude_none=True)
        return yaml.safe_dump(data, sort_keys=False), source or "<scenario>"
    if isinstance(scenario, Path) or "\n" not in scenario:
        path = Path(scenario)
        try:
            return path.read_text(encoding="utf-8"), source or str(path)
        except OSError as exc:
            raise ScenarioError(source or str(path), [Problem("", f"cannot read file: {exc.strerror}")]) from None
    return scenario, source or "<scenario>"


def build_scenarios(text: str, source: str, base: Sequence[str], points: Sequence[Point], swept: Sequence[str] = (),
                    label: str = "sweep point") -> list[Scenario]:
    """Every point's scenario from ``parse_scenario(text, source, [*base, *point.overrides])``, planned
    (``check_plan``), or one
    ScenarioError listing every problem once with the points it concerns. Problems under a ``swept`` path are
    marked as coming from ``--param`` rather than ``--set``."""
    scenarios: list[Scenario] = []
    found: dict[tuple[str, str, int | None], list[str]] = {}
    for point in points:
        try:
            scenario = parse_scenario(text, source, [*base, *point.overrides])
            check_plan(scenario)  # each point's memory and start poses, before any point runs
            scenarios.append(scenario)
        except ScenarioError as exc:
            for p in exc.problems:
                found.setdefault((p.path, p.message, p.line), []).append(point.name)
    if found:
        problems = []
        for (path, message, line), where in found.items():
            if swept and path.startswith(tuple(swept)):
                message = message.replace("(from --set)", "(from --param)")
            shown = ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
            problems.append(Problem(path, f"{message} [{label} {shown}]", line))
        raise ScenarioError(source, problems)
    return scenarios


__all__ = ["Params", "Point", "build_scenarios", "check_params", "grid", "grid_points", "parse_param",
           "point_names", "point_overrides", "scenario_text", "split_values", "yaml_value"]
