"""One follower's series, aligned with its predecessor's, as every follower metric sees them.

Spacing error e = gap - desired gap, with the gap measured the way the follower's law measures it (rear axle to rear
axle for the look-ahead CACC, bumper to bumper for the longitudinal laws) and computed by the law itself from the
true states. While a follower is degraded (fallen back to ACC) it opens its gap on purpose, so those samples are not
spacing errors. String-stability ratios use the L2 norm ||y|| = sqrt(sum y^2 dt) (Ploeg et al., IEEE T-ITS 15(2),
2014): rho_i = ||y_i|| / ||y_{i-1}|| along each platoon.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from core.robot_blocks import Dims
from core.robots import RobotSpec

from ..recording.limits import FOLLOWER_WORK, PASS_BUDGET_BYTES, SERIES_COLUMNS
from .geometry import Series, l2_norm, path_with_tail, signed_path_distance
from .roles import NONE, STEADY, Roles
from .rundata import RunData, law_of_block
from .transitions import note_window_errors, run_roles, settling


@dataclass
class RobotNorms:
    """Norms of one robot's own motion (leaders included), for the string-stability ratios."""

    dt: float
    l2_acceleration: float
    linf_acceleration: float
    l2_speed_deviation: float
    linf_speed_deviation: float
    initial_speed: float = 0.0


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
        initial_speed=float(v[0]) if any_rows else 0.0,
    )


@dataclass
class FollowerView:
    """What a follower metric reads: a follower's samples of steady following, each beside the predecessor it
    followed at that time (``roles.py``).

    ``me`` holds those samples and ``pred`` the predecessor's state at the same instants (gathered from whichever
    robot was the predecessor then), so ``im``/``ip`` index them alike; ``error_series`` is the spacing error at
    those samples (NaN while degraded) and ``error`` its finite values; ``lateral`` is the signed distance of each
    sample to the driven path of the predecessor of that time. ``robot`` carries the role the follower held
    longest in steady following (its predecessor, leader, platoon and position then), which is what the
    string-stability ratios compare it with. ``segment`` labels runs of consecutive samples (same predecessor, no
    gap in time): differences are only taken within one. ``transition_*`` are the same measures over the samples in
    which it followed in a transition (a maneuver or a cut-in), reported apart."""

    run: RunData
    robot: RobotSpec
    me: Series
    pred: Series
    im: np.ndarray
    ip: np.ndarray
    dims: Dims
    pred_dims: Dims
    axle_gap: np.ndarray
    bumper_gap: np.ndarray
    error_series: np.ndarray
    error: np.ndarray
    lateral: np.ndarray
    tail_m: float
    norms: dict[int, RobotNorms]
    entries: dict[int, dict[str, Any]]  # follower id -> its entry so far (predecessors come first)
    leader_series: Series | None = None  # the platoon leader's samples (None for a follower without a leader)
    segment: np.ndarray | None = None
    leader_rows: np.ndarray | None = None  # rows of ``me`` led by ``robot.leader`` (None: all)
    transition_t_ns: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    transition_gap: np.ndarray = field(default_factory=lambda: np.empty(0))
    transition_error: np.ndarray = field(default_factory=lambda: np.empty(0))
    transition_phase: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # roles.PHASES index
    transition_pred: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # the predecessor then
    pred_id: np.ndarray | None = None  # the predecessor of each steady sample (None: ``robot.predecessor``)

    @property
    def dt(self) -> float:
        return self.norms[self.robot.id].dt

    def predecessor_value(self, key: str) -> Any:
        """``key`` of the predecessor's entry (None for a leader or a missing predecessor)."""
        return self.entries.get(self.robot.predecessor, {}).get(key)  # type: ignore[arg-type]

    def contiguous(self) -> np.ndarray:
        """For each pair of neighbouring samples, whether they are consecutive steps with one predecessor."""
        if self.segment is None:
            return np.ones(max(len(self.im) - 1, 0), bool)
        return self.segment[1:] == self.segment[:-1]



def follower_views(run: RunData, entries: dict[int, dict[str, Any]]) -> Iterator[FollowerView]:
    """A view per robot that follows at any time, predecessors first. ``entries`` is shared: metrics fill it as
    the views are processed in order.

    Views come pass by pass: each pass loads whole groups of robots that follow one another at some time, up to
    ``PASS_BUDGET_BYTES`` with the work on one follower (``FOLLOWER_WORK``), so memory does not grow with the length
    of the run."""
    roles = run_roles(run)
    for robots in _passes(run, roles):  # a pass's series live only in its _views: one pass in memory at a time
        yield from _views(run, roles, robots, run.series([r.id for r in robots], SERIES_COLUMNS), entries)


def _passes(run: RunData, roles: Roles) -> Iterator[list[RobotSpec]]:
    by_id = {r.id: r for r in run.robots}
    groups = [[by_id[rid] for rid in group if rid in by_id] for group in roles.groups()]
    in_table = set(roles.robot.tolist())
    groups += [[r] for r in run.robots if r.id not in in_table]
    per_robot = run.vehicle_rows() / max(len(run.robots), 1) * (len(SERIES_COLUMNS) + 1) * 8  # with the times
    budget = PASS_BUDGET_BYTES - FOLLOWER_WORK * per_robot  # one follower's work beside the pass's series
    batch: list[RobotSpec] = []
    for members in sorted(groups, key=lambda g: min(r.id for r in g) if g else 0):
        if batch and (len(batch) + len(members)) * per_robot > budget:
            yield batch
            batch = []
        batch += members
    if batch:
        yield batch


def main_role(roles: Roles, robot: int) -> dict[str, int] | None:
    """The role ``robot`` held longest in steady following (else longest in any phase): predecessor, leader,
    platoon and position. None for a robot that never follows."""
    rows = roles.rows_of(robot)
    rows = rows[roles.predecessor[rows] != NONE]
    if not len(rows):
        return None
    steady = rows[roles.phase[rows] == STEADY]
    pool = steady if len(steady) else rows
    time: dict[tuple[int, int, int, int], int] = {}
    for k in pool:
        key = (int(roles.predecessor[k]), int(roles.leader[k]), int(roles.platoon[k]), int(roles.position[k]))
        time[key] = time.get(key, 0) + int(roles.to_ns[k] - roles.from_ns[k])
    pred, leader, platoon, position = max(time, key=lambda key: time[key])  # ties: the earliest role
    return {"predecessor": pred, "leader": leader, "platoon": platoon, "position": position}


def _ordered(robots: list[RobotSpec], mains: Mapping[int, Mapping[str, int]]) -> list[RobotSpec]:
    """Followers with a main role, each after its main predecessor (when that one follows too)."""
    by_id = {r.id: r for r in robots}
    done: set[int] = set()
    out: list[RobotSpec] = []

    def visit(rid: int, trail: set[int]) -> None:
        if rid in done or rid in trail or rid not in mains:
            return
        ahead = mains[rid]["predecessor"]
        if ahead in by_id:
            visit(ahead, trail | {rid})
        done.add(rid)
        out.append(by_id[rid])

    for robot in robots:
        visit(robot.id, set())
    return out


def _views(run: RunData, roles: Roles, robots: list[RobotSpec], series: dict[int, Series],
           entries: dict[int, dict[str, Any]]) -> Iterator[FollowerView]:
    norms = {rid: robot_norms(s) for rid, s in series.items()}
    by_id = {r.id: r for r in run.robots}
    mains = {r.id: m for r in robots if (m := main_role(roles, r.id)) is not None}
    for robot in _ordered(robots, mains):
        if robot.id not in series:
            continue
        # built in a function of its own: what building it took (pieces, the role at every sample) is gone before
        # the metrics run on it, so a follower costs its view's series and no more
        view = _view(run, roles, by_id, robot, mains[robot.id], series, norms, entries)
        if view is not None:
            yield view
        del view  # not held while the next one is built


def _view(run: RunData, roles: Roles, by_id: Mapping[int, RobotSpec], robot: RobotSpec, main: Mapping[str, int],
          series: dict[int, Series], norms: dict[int, RobotNorms], entries: dict[int, dict[str, Any]]
          ) -> FollowerView | None:
    """One follower's view (``FollowerView``), None when it never follows a robot of the pass."""
    role = replace(robot, predecessor=main["predecessor"],
                   leader=None if main["leader"] == NONE else main["leader"],
                   platoon=main["platoon"], position_in_platoon=max(main["position"], 0))
    full = series[robot.id]
    at = roles.at(robot.id, full.t_ns)
    pieces = [_piece(run, by_id, robot, full, series[p], p, rows, _law(run, robot, at["platoon"][rows]))
              for p in np.unique(at["predecessor"]) if p != NONE and p in series
              for rows in [np.flatnonzero(at["predecessor"] == p)]]
    pieces = [p for p in pieces if p is not None]
    if not pieces:
        return None
    rows = np.concatenate([p["rows"] for p in pieces])
    order = np.argsort(rows, kind="stable")
    cat = {k: np.concatenate([p[k] for p in pieces])[order]
           for k in ("rows", "pred_rows_t", "axle_gap", "bumper_gap", "error", "lateral", "pred_id")}
    cat["pred"] = {c: np.concatenate([p["pred"][c] for p in pieces])[order] for c in pieces[0]["pred"]}
    del pieces, rows, order
    phase = at["phase"][cat["rows"]]
    leader_at = at["leader"][cat["rows"]]
    del at
    steady = ~settling(phase != STEADY, cat["rows"], cat["error"], cat["axle_gap"])
    me_rows = cat["rows"][steady]
    me = Series(full.t_ns[me_rows], {name: values[me_rows] for name, values in full.cols.items()})
    pred = Series(me.t_ns, {c: v[steady] for c, v in cat.pop("pred").items()})
    n = len(me_rows)
    step = np.diff(me_rows) != 1
    segment = np.cumsum(np.r_[False, step | (np.diff(cat["pred_id"][steady]) != 0)])
    leader = role.leader
    leader_rows = np.flatnonzero(leader_at[steady] == (NONE if leader is None else leader))
    error_series = cat["error"][steady]
    axle_gap = cat["axle_gap"][steady]
    tail = float(np.max(axle_gap)) + 1.0 if n else 1.0
    trans = ~steady
    note_window_errors(run, roles, robot.name, full.t_ns[cat["rows"]], cat["error"])
    return FollowerView(
        run, role, me, pred, np.arange(n), np.arange(n), robot.dims,
        by_id[role.predecessor].dims if role.predecessor in by_id else robot.dims,
        axle_gap, cat["bumper_gap"][steady], error_series, error_series[np.isfinite(error_series)],
        cat["lateral"][steady], tail, norms, entries,
        series.get(leader) if leader is not None else None, segment, leader_rows,
        full.t_ns[cat["rows"][trans]], cat["bumper_gap"][trans], cat["error"][trans],
        phase[trans], cat["pred_id"][trans], cat["pred_id"][steady],
    )


def _law(run: RunData, robot: RobotSpec, platoons: np.ndarray) -> Any:
    """The law ``robot`` follows with while in ``platoons`` (the most frequent of them): its own in the platoon it
    started in (a member keeps a time gap of its own there), the law of the platoon block (``maneuver_plan``) in a
    platoon it joined in a run with maneuvers."""
    laws = run.cache.get("platoon_laws")
    if laws is None:
        laws = {}
        if getattr(run.scenario, "maneuvers", None):
            from ..build.maneuver_plan import maneuver_plan

            plan = maneuver_plan(run.scenario, run.robots) or {"blocks": {}}
            classes: dict[str, Any] = {}
            laws = {int(k): law_of_block(block, classes) for k, block in plan["blocks"].items()}
        run.cache["platoon_laws"] = laws
    values, counts = np.unique(platoons, return_counts=True)
    platoon = int(values[np.argmax(counts)]) if len(values) else NONE
    if platoon == robot.platoon and run.laws.get(robot.id) is not None:
        return run.laws[robot.id]
    return laws[platoon] if laws.get(platoon) is not None else run.laws.get(robot.id)


def _piece(run: RunData, by_id: Mapping[int, RobotSpec], robot: RobotSpec, me: Series, pred: Series, ahead: int,
           rows: np.ndarray, law: Any) -> dict[str, Any] | None:
    """The samples ``rows`` of ``me`` in which ``robot`` follows ``ahead``, beside ``ahead``'s samples at the same
    instants: gaps, spacing errors and lateral offsets from that predecessor."""
    common, ia, ip = np.intersect1d(me.t_ns[rows], pred.t_ns, assume_unique=True, return_indices=True)
    if not len(common):
        return None
    rows = rows[ia]
    pred_spec = by_id.get(ahead)
    if pred_spec is None:  # a predecessor from outside the scenario: no size to measure the gap with
        return None
    mine = Series(me.t_ns[rows], {k: v[rows] for k, v in me.cols.items()})
    im = np.arange(len(rows))
    dims, pred_dims = robot.dims, pred_spec.dims
    axle_gap = np.hypot(pred.cols["x"][ip] - mine.cols["x"], pred.cols["y"][ip] - mine.cols["y"])
    bumper_gap = axle_gap - pred_dims.rear_overhang_m - (dims.length_m - dims.rear_overhang_m)
    error = _spacing_error(law, mine, pred, im, ip, dims, pred_dims, axle_gap)
    tail = float(np.max(axle_gap)) + 1.0
    via = start_chain(by_id, robot, ahead) if robot.predecessor == ahead else []
    points = np.column_stack([mine.cols["x"], mine.cols["y"]])
    lateral = signed_path_distance(points, path_with_tail(pred, tail, via))
    return {"rows": rows, "pred_rows_t": pred.t_ns[ip], "axle_gap": axle_gap, "bumper_gap": bumper_gap,
            "error": error, "lateral": lateral, "pred_id": np.full(len(rows), ahead, np.int64),
            "pred": {k: v[ip] for k, v in pred.cols.items()}}


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
    return [(r.initial.x, r.initial.y, r.initial.yaw) for r in chain[::-1]]


def _spacing_error(law: Any, me: Series, pred: Series, im: np.ndarray, ip: np.ndarray,
                   dims: Dims, pred_dims: Dims, axle_gap: np.ndarray) -> np.ndarray:
    if law is not None:
        keys = ("x", "y", "yaw", "v", "yaw_rate")
        ego = {k: me.cols[k][im] for k in keys}
        ahead = {k: pred.cols[k][ip] for k in keys}
        error = np.asarray(law.spacing_error(ego, ahead, dims.plain(), pred_dims.plain()), dtype=float)
    else:  # no law (an external driver): the recorded desired gap, measured between rear axles
        error = axle_gap - me.cols["desired_gap_m"][im]
    degraded = me.cols.get("degraded")
    if degraded is not None:  # while fallen back to ACC the follower opens its gap on purpose: not an error
        error = np.where(np.nan_to_num(degraded[im]) > 0.5, np.nan, error)
    return error
