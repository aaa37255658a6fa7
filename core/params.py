"""What every scenario block shares: finite numbers only, no unknown keys, sane periods, and a way for a validator
to report several problems each at its own field (hence at its YAML line)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

MIN_PERIOD_S = 1e-6
"""Shortest step or period [s]. Time is kept in integer nanoseconds; below a microsecond a step rounds towards
zero and a run needs a million steps or more per simulated second, which never ends in practice."""

COORDINATE_LIMIT_M = 100_000.0
"""Largest |x| and |y| of a position in the local ENU frame [m]: 100 km around ``origin``. The frame is a tangent
plane (flat within ~0.8 km of height at that distance), and float64 positions keep sub-micrometre resolution."""

Loc = tuple[str | int, ...]
ModelT = TypeVar("ModelT", bound=BaseModel)


def _at_least_min_period(value: float) -> float:
    if value < MIN_PERIOD_S:
        raise ValueError(f"must be at least {MIN_PERIOD_S:g} s (1 us), got {value:g}")
    return value


Period = Annotated[float, AfterValidator(_at_least_min_period)]
"""A step or period [s]: at least ``MIN_PERIOD_S`` (its upper bound, the run's length, is ``Scenario``'s)."""
_PERIOD_SCHEMA = {"minimum": MIN_PERIOD_S}


def is_file_name(value: str) -> bool:
    """Whether ``value`` is one plain path component: no separator or control character, not ``.`` or ``..``."""
    return value not in (".", "..") and not any(c in "/\\" or ord(c) < 32 or c == "\x7f" for c in value)


def _path_safe(value: str) -> str:
    if not is_file_name(value):
        raise ValueError(f"{value[:80]!r}: this name becomes a file or folder name, so it may not hold '/', '\\' or "
                         "control characters, nor be '.' or '..'")
    return value


FileName = Annotated[str, AfterValidator(_path_safe)]
"""A name that coopsim writes as one path component (``runs/<scenario name>``, a data set's ``<robot>.jsonl``, a
federate's log): no separators, no control characters, not ``.`` or ``..``, so a scenario never places a file
outside the folder it meant."""


def raise_at(title: str, problems: list[tuple[Loc, str, Any]]) -> None:
    """Raise a ValidationError with one error per ``(loc, message, input)``, each at its own field: from a
    validator, the locations are relative to the validated model, so the loader reports each at its line."""
    raise ValidationError.from_exception_data(title, [
        InitErrorDetails(type=PydanticCustomError("value_error", message), loc=loc, input=value)
        for loc, message, value in problems
    ])


def parse_params(model: type[ModelT], given: dict[str, Any], owner: str) -> ModelT:
    """``model`` from a federate's keyword arguments, or a ValueError ``"<owner>: field: message; ..."`` listing
    every problem. A message of the model's own checks (``raise_at``, validators) already says what was wrong, so
    only pydantic's generic messages repeat the value given."""
    try:
        return model(**given)
    except ValidationError as exc:
        lines = []
        for err in exc.errors(include_url=False):
            if not err["loc"]:
                lines.append(err["msg"])
                continue
            where = ".".join(str(p) for p in err["loc"])
            shown = "" if err["type"] == "value_error" else f" (got {err.get('input')!r})"
            lines.append(f"{where}: {err['msg']}{shown}")
        raise ValueError(f"{owner}: " + "; ".join(lines)) from None


def non_finite(value: Any, loc: Loc = ()) -> Iterator[tuple[Loc, float]]:
    """Every NaN or infinite float in a plain value (dicts, lists, tuples), with its location."""
    if isinstance(value, float):
        if not math.isfinite(value):
            yield loc, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from non_finite(item, (*loc, key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from non_finite(item, (*loc, index))


class FiniteValues(BaseModel):
    """No NaN or infinity anywhere: typed float fields refuse them (``allow_inf_nan``), and free-form values
    (parameter mappings, extra keys) are searched for them, so a plug-in's parameters get the same rule."""

    model_config = ConfigDict(allow_inf_nan=False)

    @model_validator(mode="after")
    def _finite_free_values(self) -> FiniteValues:
        free = {name: value for name, value in self.__dict__.items() if isinstance(value, dict | list | tuple)}
        free.update(self.model_extra or {})
        found = [(loc, value) for name, value in free.items() for loc, value in non_finite(value, (name,))]
        if found:
            raise_at(type(self).__name__, [(loc, f"Input should be a finite number, got {value!r}", value)
                                           for loc, value in found])
        return self


class Strict(FiniteValues):
    """Unknown keys are errors; numbers are finite."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
