"""One follower's series, aligned with its predecessor's, as every follower metric sees them.

Spacing error e = gap - desired gap, with the gap measured the way the follower's law measures it (rear axle to rear
axle for the look-ahead CACC, bumper to bumper for the longitudinal laws) and computed by the law itself from the
true states. While a follower is degraded (fallen back to ACC) it opens its gap on purpose, so those samples are not
spacing errors. String-stability ratios use the L2 norm ||y|| = sqrt(sum y^2 dt) (Ploeg et al., IEEE T-ITS 15(2),
2014): rho_i = ||y_i|| / ||y_{i-1}|| along each platoon.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.robots import RobotSpec
from .geometry import Series, aligned, l2_norm, path_with_tail, signed_path_distance
from .rundata import RunData


@dataclass
class RobotNorms:
    """Norms of one robot's own motion (leaders included), for the string-stability ratios."""

    dt: float
    l2_acceleration: float
    linf_acceleration: float
    l2_speed_deviation: float
    linf_speed_deviation: float


def robot_norms(series: Series) -> RobotNorms:
    """Acceleration and speed-deviation norms (speed relative to the robot's initial speed)."""
    dt = float(np.median(np.diff(series.t_ns))) / 1e9 if len(series.t_ns) > 1 else 0.0
    a, v = series.cols["a"], series.cols["v"]
    any_rows = len(series.t_ns) > 0
    return RobotNorms(
        dt=dt,
        l2_acceleration=l2_norm(a, dt),
        linf_acceleration=float(np.max(np.abs(a))) if any_rows else 0.0,
        l2_speed_deviation=l2_norm(v - v[0], dt),
        linf_speed_deviation=float(np.max(np.abs(v - v[0]))) if any_rows else 0.0,
    )


@dataclass
class FollowerView:
    """What a follower metric reads. ``im``/``ip`` index the samples both robots have; ``error_series`` is the
    spacing error at those samples (NaN while degraded) and ``error`` its finite values; ``lateral`` is the signed
    distance of every sample of the follower to its predecessor's driven path."""

    run: RunData
    robot: RobotSpec
    me: Series
    pred: Series
    im: np.ndarray
    ip: np.ndarray
    dims: Mapping[str, float]
    pred_dims: Mapping[str, float]
    axle_gap: np.ndarray
    bumper_gap: np.ndarray
    error_series: np.ndarray
    error: np.ndarray
    lateral: np.ndarray
    tail_m: float
    norms: dict[int, RobotNorms]
    entries: dict[int, dict[str, Any]]  # follower id -> its entry so far (predecessors come first)

    @property
    def dt(self) -> float:
        return self.norms[self.robot.id].dt

    def predecessor_value(self, key: str) -> Any:
        """``key`` of the predecessor's entry (None for a leader or a missing predecessor)."""
        return self.entries.get(self.robot.predecessor, {}).get(key)  # type: ignore[arg-type]

    @property
    def leader_series(self) -> Series | None:
        leader = self.robot.leader
        return self.run.vehicles.get(leader) if leader is not None else None


def follower_views(run: RunData, entries: dict[int, dict[str, Any]]) -> list[FollowerView]:
    """A view per follower that has samples together with its predecessor, in roster order (predecessors
    first). ``entries`` is shared: metrics fill it as the views are processed in order."""
    series = run.vehicles
    norms = {rid: robot_norms(s) for rid, s in series.items()}
    by_id = {r.id: r for r in run.robots}
    views = []
    for robot in run.robots:
        if robot.predecessor is None or robot.id not in series or robot.predecessor not in series:
            continue
        me, pred = series[robot.id], series[robot.predecessor]
        _, im, ip = aligned(me, pred)
        if len(im) == 0:
            continue
        dims, pred_dims = robot.config["dims"], by_id[robot.predecessor].config["dims"]
        axle_gap = np.hypot(pred.cols["x"][ip] - me.cols["x"][im], pred.cols["y"][ip] - me.cols["y"][im])
        bumper_gap = axle_gap - pred_dims["rear_overhang_m"] - (dims["length_m"] - dims["rear_overhang_m"])
        error_series = _spacing_error(run, robot, me, pred, im, ip, dims, pred_dims, axle_gap)
        points = np.column_stack([me.cols["x"], me.cols["y"]])
        tail = float(np.max(axle_gap)) + 1.0
        views.append(FollowerView(
            run, robot, me, pred, im, ip, dims, pred_dims, axle_gap, bumper_gap, error_series,
            error_series[np.isfinite(error_series)], signed_path_distance(points, path_with_tail(pred, tail)), tail,
            norms, entries,
        ))
    return views


def _spacing_error(run: RunData, robot: RobotSpec, me: Series, pred: Series, im: np.ndarray, ip: np.ndarray,
                   dims: Mapping[str, float], pred_dims: Mapping[str, float], axle_gap: np.ndarray) -> np.ndarray:
    law = run.laws.get(robot.id)
    if law is not None:
        keys = ("x", "y", "yaw", "v", "yaw_rate")
        ego = {k: me.cols[k][im] for k in keys}
        ahead = {k: pred.cols[k][ip] for k in keys}
        error = np.asarray(law.spacing_error(ego, ahead, dims, pred_dims), dtype=float)
    else:  # no law (an external driver): the recorded desired gap, measured between rear axles
        error = axle_gap - me.cols["desired_gap_m"][im]
    degraded = me.cols.get("degraded")
    if degraded is not None:  # while fallen back to ACC the follower opens its gap on purpose: not an error
        error = np.where(np.nan_to_num(degraded[im]) > 0.5, np.nan, error)
    return error
