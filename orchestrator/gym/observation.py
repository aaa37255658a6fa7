"""The agent's observation: what each of its robots knows at a decision, as a flat vector of named features.

Every feature is a field of a declared port (``core.ports``) as the robot received it, in SI units: its own
``estimate``, its forward ``range`` sensor, and the newest ``cam_rx`` samples of its predecessor and its platoon
leader with their age, plus the spacing error its control law sees (``control_diag``'s desired gap). What a robot
does not have is filled, never NaN (a learner cannot take NaN): a range sensor that sees nothing reads its maximum
range with ``gap_seen`` 0, a sample never received reads 0 with an age of ``AGE_CAP_S``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .driver import Sensed

AGE_CAP_S = 10.0
"""[s] the age given for a sample never received, and the largest age the observation shows."""


@dataclass(frozen=True)
class Feature:
    """One entry of the observation: its name, the port field it comes from and its unit."""

    name: str
    source: str
    unit: str


FEATURES: tuple[Feature, ...] = (
    Feature("v", "estimate.v", "m/s"),
    Feature("a", "estimate.a", "m/s^2"),
    Feature("gap", "range.range_m", "m"),
    Feature("gap_rate", "range.range_rate_mps", "m/s"),
    Feature("gap_seen", "range.range_m is finite", "1"),
    Feature("pred_v", "cam_rx.v (predecessor)", "m/s"),
    Feature("pred_a", "cam_rx.a (predecessor)", "m/s^2"),
    Feature("pred_age", "cam_rx.generated_ns (predecessor), age", "s"),
    Feature("leader_v", "cam_rx.v (leader)", "m/s"),
    Feature("leader_a", "cam_rx.a (leader)", "m/s^2"),
    Feature("leader_age", "cam_rx.generated_ns (leader), age", "s"),
    Feature("desired_gap", "control_diag.desired_gap_m", "m"),
    Feature("spacing_error", "gap as the law measures it - desired_gap", "m"),
)
"""The features of one agent robot, in vector order (an environment of several agents repeats them per robot)."""

INDEX = {feature.name: k for k, feature in enumerate(FEATURES)}
"""A feature's position within one robot's block."""


def observe(sensed: Sensed, max_range_m: float, axle_gap: np.ndarray) -> np.ndarray:
    """The observation vector (float64, robot after robot) of ``sensed``. ``axle_gap``: per agent robot, True when
    its law measures the gap rear axle to rear axle (from its estimate to the received predecessor pose; the
    extended look-ahead CACC), False for bumper to bumper (the range sensor's gap, else the received one)."""
    n = len(sensed.law_accel)
    out = np.empty((n, len(FEATURES)))
    ego, pred, leader = sensed.ego, sensed.pred, sensed.leader
    gap = sensed.sensors["gap_m"]
    seen = np.isfinite(gap)
    out[:, 0] = ego["v"]
    out[:, 1] = ego["a"]
    out[:, 2] = np.where(seen, gap, max_range_m)
    out[:, 3] = np.where(seen & np.isfinite(sensed.sensors["gap_rate_mps"]), sensed.sensors["gap_rate_mps"], 0.0)
    out[:, 4] = seen
    for col, sample, age in ((5, pred, sensed.pred_age_s), (8, leader, sensed.leader_age_s)):
        known = np.isfinite(age)
        out[:, col] = np.where(known, sample["v"], 0.0)
        out[:, col + 1] = np.where(known & np.isfinite(sample["a"]), sample["a"], 0.0)
        out[:, col + 2] = np.minimum(np.where(known, age, AGE_CAP_S), AGE_CAP_S)
    desired = np.where(np.isfinite(sensed.desired_gap_m), sensed.desired_gap_m, 0.0)
    out[:, 11] = desired
    axle = np.hypot(pred["x"] - ego["x"], pred["y"] - ego["y"])
    measured = np.where(axle_gap, axle, np.where(seen, gap, np.nan))
    out[:, 12] = np.where(np.isfinite(measured), measured - desired, 0.0)
    return out.reshape(-1)
