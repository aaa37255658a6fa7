"""The command line's argument types: each parses one number and checks its range, with a message argparse shows
next to the option (exit 2)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

N = TypeVar("N", int, float)


def _number(text: str, convert: Callable[[str], N], expected: str, ok: Callable[[N], bool], out_of_range: str) -> N:
    """``convert(text)`` when it parses and ``ok`` holds; otherwise an ``ArgumentTypeError``: "``expected``, got
    'text'" for what does not parse, ``out_of_range`` (formatted with ``text`` and ``value``) for the rest."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{expected}, got {text!r}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(out_of_range.format(text=text, value=value))
    return value


def seed(text: str) -> int:
    """A seed as the scenario allows it: an integer in 0 .. 2^32-1."""
    return _number(text, int, "expected an integer", lambda v: 0 <= v <= 2**32 - 1,
                   f"must be in 0 .. {2**32 - 1}, got {{value}}")


def non_negative(text: str) -> int:
    """An integer >= 0 (0: one per core)."""
    return _number(text, int, "expected an integer", lambda v: v >= 0, "must be 0 (one per core) or more, got {value}")


def positive_factor(text: str) -> float:
    """A real-time factor: a finite number > 0 (at most 1000)."""
    return _number(text, float, "must be a number", lambda v: 0 < v <= 1000, "must be in (0, 1000], got {text}")


def step_timeout(text: str) -> float:
    """The watchdog's limit: a number of seconds in (0, 86400]."""
    return _number(text, float, "expected a number of seconds", lambda v: 0 < v <= 86_400,
                   "must be in (0, 86400] seconds, got {text}")


def port(text: str) -> int:
    """A TCP port: 0 (any free one) .. 65535."""
    return _number(text, int, "expected a port number", lambda v: 0 <= v <= 65535,
                   "must be in 0 .. 65535 (0: any free port), got {value}")


def positive_gb(text: str) -> float:
    """A memory budget in GB: a finite number > 0."""
    return _number(text, float, "expected a number of GB", lambda v: 0 < v < float("inf"),
                   "must be a positive number of GB, got {text}")
