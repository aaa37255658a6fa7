"""From a pydantic error to a ``Problem`` at its YAML line: the field path, the allowed keys of the model there,
"did you mean", and whether the value came from ``--set`` (which has no line in the file)."""

from __future__ import annotations

import difflib
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from .errors import MAX_LISTED, UNLISTED, Problem, clip, format_path, shown
from .model import (
    Scenario,
)
from .yamlmarks import Loc, line_of

_TAGS = {"fleet", "list"}  # discriminator tags pydantic puts into error locations


def problems_of(exc: ValidationError, lines: dict[Loc, int], set_locs: set[Loc], data: Any) -> list[Problem]:
    """Every error of a scenario's validation as a ``Problem`` at its line."""
    problems = []
    for err in exc.errors(include_url=False):
        if len(problems) >= MAX_LISTED:  # counted, never shown: not worth a suggestion and a line each
            problems.append(UNLISTED)
            continue
        loc = tuple(p for p in err["loc"] if p not in _TAGS)
        problems.append(problem_at(err, loc, lines, set_locs, Scenario))
    return problems


def from_set(loc: Loc, set_locs: set[Loc]) -> bool:
    """Whether ``loc`` is a ``--set`` path or inside a value that ``--set`` gave (it has no line in the file)."""
    return any(loc[: len(given)] == given for given in set_locs)


def problem_at(err: dict[str, Any], loc: Loc, lines: dict[Loc, int], set_locs: set[Loc], root: type) -> Problem:
    """One pydantic error at ``loc`` (within the ``root`` model) as a ``Problem``: its line, or "(from --set)"."""
    kind = err["type"]
    message = str(err["msg"]).removeprefix("Value error, ")
    if kind == "extra_forbidden":
        allowed = _allowed_fields(root, loc[:-1])
        unknown = str(loc[-1])
        hint = ""
        close = difflib.get_close_matches(unknown, allowed, n=1) if len(unknown) <= 100 else []
        if close:
            hint = f" (did you mean '{close[0]}'?)"
        message = f"unknown field '{clip(unknown)}'{hint}; allowed: {', '.join(allowed)}"
    elif kind == "missing":
        message = "required field is missing"
    elif "input" in err and kind not in ("value_error", "union_tag_invalid"):
        message = f"{message}, got {shown(err['input'])}"
    line = None if from_set(loc, set_locs) else line_of(lines, loc)
    if from_set(loc, set_locs):
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


