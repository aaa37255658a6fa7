"""Universes: independent copies of a scenario stepped in one world (``orchestrator.batch.batched``).

Every robot carries the universe of its batch point (``RobotSpec.universe``). Whatever couples robots (the range
scan, the contact test, a radio channel) runs per universe on that universe's rows, in roster order, so a robot sees
exactly what it would see in a run of its point alone; the per-robot work stays one vectorised call.
"""

from __future__ import annotations

import numpy as np


def universe_segments(universe: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """None when every row is in one universe (a world of one point: nothing to separate). Otherwise ``(order,
    bounds)``: the rows sorted by universe, stable so that each universe keeps roster order, and the ``k``-th
    universe's rows are ``order[bounds[k]:bounds[k + 1]]``."""
    universe = np.asarray(universe, np.int64)
    if len(universe) < 2 or (universe == universe[0]).all():
        return None
    order = np.argsort(universe, kind="stable")
    ordered = universe[order]
    starts = np.flatnonzero(np.diff(ordered)) + 1
    bounds = np.concatenate([[0], starts, [len(universe)]]).astype(np.int64)
    return order.astype(np.int64), bounds
