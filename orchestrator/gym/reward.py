"""The reward of a decision: track the desired gap smoothly, never collide.

    r_k = -sum over agent robots of ( w_e e_k^2 + w_j j_k^2 ) - w_c [a collision happened during the step]

- ``e_k`` [m]: the robot's true spacing error at the decision, from the ``state`` port (ground truth, like the
  metrics): the gap measured as its law measures it (rear axle to rear axle, or bumper to bumper) minus the law's
  desired gap at that instant;
- ``j_k`` [m/s^3]: the jerk of the commanded acceleration, (a_k - a_{k-1}) / P over the decision period P;
- a collision (any new contact of the ``collisions`` port) ends the episode (``terminated``) and costs ``w_c``.

The default weights make a 0.1 m error cost as much as a jerk of 1 m/s^3 (0.01 each); a collision costs as much as a
1 m error held for 1,000 decisions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from core.robots import rows_of


@dataclass(frozen=True)
class RewardWeights:
    """The weights of the reward (module docstring)."""

    spacing_error: float = 1.0
    """w_e [1/m^2]"""
    jerk: float = 0.01
    """w_j [s^6/m^2]"""
    collision: float = 1000.0
    """w_c, once, at the step the contact happens"""


def true_spacing_error(state: Mapping[str, np.ndarray], rows: tuple[np.ndarray, np.ndarray],
                       bumper_offset: np.ndarray, desired_gap: np.ndarray) -> np.ndarray:
    """[m] each agent robot's true spacing error: the distance between its rear axle and its predecessor's, less
    ``bumper_offset`` (0 for laws that measure rear axle to rear axle; the predecessor's rear overhang plus the
    robot's length ahead of its rear axle for bumper-to-bumper laws), minus ``desired_gap``. ``rows``: the agents'
    and their predecessors' rows in ``state`` (``spacing_rows``)."""
    me, ahead = rows
    gap = np.hypot(state["x"][ahead] - state["x"][me], state["y"][ahead] - state["y"][me]) - bumper_offset
    return gap - desired_gap


def spacing_rows(ids: np.ndarray, agents: np.ndarray, preds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of the agents and of their predecessors in a robot-indexed port with rows ``ids``."""
    rows = rows_of(ids, np.concatenate([agents, preds]))
    return rows[: len(agents)], rows[len(agents):]


def reward(weights: RewardWeights, spacing_error: np.ndarray, accel: np.ndarray, previous_accel: np.ndarray,
           period_s: float, collided: bool) -> tuple[float, np.ndarray]:
    """The reward of one decision, and the jerk [m/s^3] per agent robot it was computed from."""
    jerk = (accel - previous_accel) / period_s
    error = np.where(np.isfinite(spacing_error), spacing_error, 0.0)
    cost = weights.spacing_error * float(error @ error) + weights.jerk * float(jerk @ jerk)
    return -cost - (weights.collision if collided else 0.0), jerk
