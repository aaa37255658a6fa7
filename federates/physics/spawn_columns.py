"""Per-robot columns of a spawn, read at C speed: spawning 10,000 robots should not cost a Python loop per robot
and per field.

``map`` with ``operator.attrgetter`` / ``methodcaller`` gives the same values as the equivalent comprehensions
(the same attribute reads, ``dict.get`` calls and ``float`` conversions) without the interpreter's per-item loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat
from operator import attrgetter, is_, methodcaller
from typing import Any

import numpy as np

from core.robots import RobotSpec, shared_rows


def spec_column(robots: Sequence[RobotSpec], attr: str) -> list[Any]:
    """``[getattr(robot, attr) for robot in robots]``."""
    return list(map(attrgetter(attr), robots))


def config_column(configs: Sequence[Mapping[str, Any]], key: str, default: Any = None) -> list[Any]:
    """``[config.get(key, default) for config in configs]``."""
    return list(map(methodcaller("get", key, default), configs))


def float_column(dicts: Sequence[Mapping[str, Any]], key: str, default: float) -> np.ndarray:
    """``np.array([float(d.get(key, default)) for d in dicts])`` (float64, also when empty)."""
    return np.array(list(map(float, map(methodcaller("get", key, default), dicts))), dtype=np.float64)


def shared_blocks(values: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
    """``core.robots.shared_rows``, with the usual fleet (one template: the same object for every
    robot) recognised in one C-level pass."""
    if values and all(map(is_, values, repeat(values[0]))):
        return [values[0]], np.zeros(len(values), np.int64)
    return shared_rows(values)


def optional_ids(values: Sequence[int | None]) -> np.ndarray:
    """``np.array([-1 if v is None else v for v in values], np.int64)``."""
    out = np.full(len(values), -1, np.int64)
    given = np.fromiter(map(is_, values, repeat(None)), bool, count=len(values))
    np.logical_not(given, out=given)
    if given.any():
        out[given] = np.array(np.array(values, dtype=object)[given].tolist(), np.int64)
    return out
