"""Per-robot columns of a spawn, read at C speed: spawning 10,000 robots should not cost a Python loop per robot
and per field. Every federate that keeps per-robot arrays reads its spawns with these.

``map`` with ``operator.attrgetter`` gives the same values as the equivalent comprehensions (the same attribute
reads and ``float`` conversions) without the interpreter's per-item loop; a block's values are read once per
distinct block object (robots of one template share theirs).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from operator import attrgetter, is_
from typing import Any

import numpy as np

from .robots import RobotSpec, SharedParams, shared_rows


def spec_column(robots: Sequence[RobotSpec], attr: str) -> list[Any]:
    """``[getattr(robot, attr) for robot in robots]``."""
    return list(map(attrgetter(attr), robots))


def block_column(blocks: Sequence[Any], attr: str) -> np.ndarray:
    """``np.array([float(block.<attr>) for block in blocks])`` (float64, also when empty)."""
    return np.fromiter(map(float, map(attrgetter(attr), blocks)), np.float64, count=len(blocks))


def vehicle_params(robots: Sequence[RobotSpec]) -> SharedParams:
    """The vehicle parameters of ``robots`` (their ``vehicle.params``), stored once per distinct vehicle block."""
    vehicles, index = shared_blocks(spec_column(robots, "vehicle"))
    return SharedParams([vehicle.params for vehicle in vehicles], index)


def shared_blocks(values: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
    """``shared_rows``, with the usual fleet (one template: the same object for every
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
