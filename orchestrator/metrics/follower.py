"""One follower's series, aligned with its predecessor's, as every follower metric sees them.

Spacing error e = gap - desired gap, with the gap measured the way the follower's law measures it (rear axle to rear
axle for the look-ahead CACC, bumper to bumper for the longitudinal laws) and computed by the law itself from the
true states. While a follower is degraded (fallen back to ACC) it opens its gap on purpose, so those samples are not
spacing errors. String-stability ratios use the L2 norm ||y|| = sqrt(sum y^2 dt) (Ploeg et al., IEEE T-ITS 15(2),
2014): rho_i = ||y_i|| / ||y_{i-1}|| along each platoon.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.robots import RobotSpec
from .geometry import Series, aligned, l2_norm, path_with_tail, signed_path_distance
from .limits import PASS_BUDGET_BYTES, SERIES_COLUMNS
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
    leader_series: Series | None = None  # the platoon leader's samples (None for a follower without a leader)

    @property
    def dt(self) -> float:
        return self.norms[self.robot.id].dt

    def predecessor_value(self, key: str) -> Any:
        """``key`` of the predecessor's entry (None for a leader or a missing predecessor)."""
        return self.entries.get(self.robot.predecessor, {}).get(key)  # type: ignore[arg-type]




def follower_views(run: RunData, entries: dict[int, dict[str, Any]]) -> Iterator[FollowerView]:
    """A view per follower that has samples together with its predecessor, in roster order (predecessors
    first). ``entries`` is shared: metrics fill it as the views are processed in order.

    Views come pass by pass: each pass loads whole platoons (a follower's predecessor and leader are in its own
    platoon) up to ``PASS_BUDGET_BYTES`` of samples, so memory does not grow with the length of the run."""
    for robots in _passes(run):  # a pass's series live only in its _views: one pass in memory at a time
        yield from _views(run, robots, run.series([r.id for r in robots], SERIES_COLUMNS), entries)


def _passes(run: RunData) -> Iterator[list[RobotSpec]]:
    platoons: dict[int, list[RobotSpec]] = {}
    for robot in run.robots:
        platoons.setdefault(robot.platoon, []).append(robot)
    per_robot = run.vehicle_rows() / max(len(run.robots), 1) * len(SERIES_COLUMNS) * 8
    batch: list[RobotSpec] = []
    for members in platoons.values():
        if batch and (len(batch) + len(members)) * per_robot > PASS_BUDGET_BYTES:
            yield batch
            batch = []
        batch += members
    if batch:
        yield batch


def _views(run: RunData, robots: list[RobotSpec], series: dict[int, Series],
           entries: dict[int, dict[str, Any]]) -> Iterator[FollowerView]:
    norms = {rid: robot_norms(s) for rid, s in series.items()}
    by_id = {r.id: r for r in run.robots}
    for robot in robots:
        if robot.predecessor is None or robot.id not in series or robot.predecessor not in series:
            continue
        me, pred = series[robot.id], series[robot.predecessor]
        keep = following(run, robot, me.t_ns)
        if keep is not None:  # maneuvers: only while it follows its scenario predecessor, both idle
            me = Series(me.t_ns[keep], {name: values[keep] for name, values in me.cols.items()})
        _, im, ip = aligned(me, pred)
        if len(im) == 0:
            continue
        dims, pred_dims = robot.config["dims"], by_id[robot.predecessor].config["dims"]
        axle_gap = np.hypot(pred.cols["x"][ip] - me.cols["x"][im], pred.cols["y"][ip] - me.cols["y"][im])
        bumper_gap = axle_gap - pred_dims["rear_overhang_m"] - (dims["length_m"] - dims["rear_overhang_m"])
        error_series = _spacing_error(run, robot, me, pred, im, ip, dims, pred_dims, axle_gap)
        points = np.column_stack([me.cols["x"], me.cols["y"]])
        tail = float(np.max(axle_gap)) + 1.0
        yield FollowerView(
            run, robot, me, pred, im, ip, dims, pred_dims, axle_gap, bumper_gap, error_series,
            error_series[np.isfinite(error_series)],
            signed_path_distance(points, path_with_tail(pred, tail, start_chain(by_id, robot, robot.predecessor))),
            tail,
            norms, entries, series.get(robot.leader) if robot.leader is not None else None,
        )


def following(run: RunData, robot: RobotSpec, t_ns: np.ndarray) -> np.ndarray | None:
    """In a run with maneuvers (``trace/platoon_state.parquet``), whether ``robot`` follows the predecessor the
    scenario gave it at each of ``t_ns``, with neither of them in a maneuver: the samples its follower metrics
    (which compare it with that predecessor) mean something for. None for a run without maneuvers."""
    states = run.cache.get("platoon_state")
    if states is None:
        table = run.trace("platoon_state")
        if table is None:
            return None
        robot_col = np.asarray(table["robot"])
        order = np.lexsort((np.asarray(table["t_ns"]), robot_col))
        states = {}
        for rid in np.unique(robot_col):
            rows = order[robot_col[order] == rid]
            states[int(rid)] = (np.asarray(table["t_ns"])[rows], np.asarray(table["predecessor"])[rows],
                                np.asarray(table["maneuver"])[rows])
        run.cache["platoon_state"] = states
    if robot.id not in states or robot.predecessor not in states:
        return np.zeros(len(t_ns), bool)

    def at(rid: int, column: int) -> np.ndarray:
        t, *cols = states[rid]
        k = np.clip(np.searchsorted(t, t_ns, side="right") - 1, 0, len(t) - 1)
        return np.where(t[k] <= t_ns, cols[column][k], np.nan)

    return (at(robot.id, 0) == robot.predecessor) & (at(robot.id, 1) == 0) & (at(robot.predecessor, 1) == 0)


def start_chain(by_id: Mapping[int, RobotSpec], robot: RobotSpec, ahead: int) -> list[tuple[float, float, float]]:
    """The start poses of the robots from the one behind ``ahead`` back to ``robot`` (nearest ``ahead`` first),
    when they all appear together with ``ahead``: the way ``ahead`` came before the run. Empty otherwise (a late
    joiner starts wherever it was placed)."""
    chain, current = [], robot
    while True:
        if current.spawn_ns != by_id[ahead].spawn_ns:
            return []
        chain.append(current)
        if current.predecessor == ahead or current.predecessor is None:
            break
        current = by_id[current.predecessor]
    if chain[-1].predecessor != ahead:
        return []
    return [(r.config["initial"]["x"], r.config["initial"]["y"], r.config["initial"]["yaw"]) for r in chain[::-1]]


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
