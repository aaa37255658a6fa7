"""Platoon metrics from the recorded traces: spacing error, string-stability ratios, lateral deviation, safety and
communication (Ploeg et al., IEEE T-ITS 15(2), 2014, for the L2 string-stability measure).

All metrics are computed after the run from ``trace/*.parquet`` so they can be recomputed from a run directory.
Spacing error e = gap - desired gap, where the gap is measured the way the follower's law measures it (rear axle to
rear axle for the look-ahead CACC, bumper to bumper for the longitudinal laws). String-stability ratios use the L2
norm ||y|| = sqrt(sum y^2 dt): rho_i = ||y_i|| / ||y_{i-1}|| along each platoon.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.spatial import cKDTree

from .core.robots import RobotSpec

Columns = Mapping[str, np.ndarray]


@dataclass
class Series:
    """One robot's samples, time-sorted."""

    t_ns: np.ndarray
    cols: dict[str, np.ndarray]


def split_by_robot(trace: Columns) -> dict[int, Series]:
    """Rows of a vehicles trace grouped per robot, each sorted by time."""
    order = np.lexsort((trace["t_ns"], trace["robot"]))
    robots = trace["robot"][order]
    cuts = np.flatnonzero(np.diff(robots)) + 1
    out = {}
    for rows in np.split(order, cuts):
        if len(rows) == 0:
            continue
        out[int(trace["robot"][rows[0]])] = Series(
            trace["t_ns"][rows], {k: np.asarray(v)[rows] for k, v in trace.items() if k not in ("t_ns", "robot")}
        )
    return out


def l2_norm(y: np.ndarray, dt: float) -> float:
    """sqrt(sum y^2 dt)."""
    return float(np.sqrt(np.sum(np.square(y)) * dt))


def signed_path_distance(points: np.ndarray, path: np.ndarray) -> np.ndarray:
    """Signed distance from each point to a polyline (positive: left of the direction of travel)."""
    return path_projection(points, path)[0]


def path_projection(points: np.ndarray, path: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Signed distance from each point to a polyline (positive: left of the direction of travel) and the index of
    the nearest path vertex.

    The nearest vertex is found with a k-d tree; the distance is then taken to the better of its two adjacent
    segments, so densely sampled paths give the exact perpendicular distance.
    """
    if len(path) < 2:
        return np.full(len(points), np.nan), np.zeros(len(points), np.int64)
    _, idx = cKDTree(path).query(points)
    best = np.full(len(points), np.inf)
    signed = np.zeros(len(points))
    for seg_start in (np.maximum(idx - 1, 0), np.minimum(idx, len(path) - 2)):
        a = path[seg_start]
        b = path[seg_start + 1]
        ab = b - a
        length2 = np.maximum(np.einsum("ij,ij->i", ab, ab), 1e-18)
        u = np.clip(np.einsum("ij,ij->i", points - a, ab) / length2, 0.0, 1.0)
        foot = a + u[:, None] * ab
        d = np.linalg.norm(points - foot, axis=1)
        cross = ab[:, 0] * (points[:, 1] - a[:, 1]) - ab[:, 1] * (points[:, 0] - a[:, 0])
        better = d < best
        best = np.where(better, d, best)
        signed = np.where(better, np.sign(cross) * d, signed)
    return signed, idx


def _path_with_tail(series: Series, tail_m: float) -> np.ndarray:
    """A robot's driven path, extended backwards along its initial heading (followers start behind it)."""
    x, y, yaw = series.cols["x"], series.cols["y"], series.cols["yaw"]
    back = np.linspace(tail_m, 0.0, max(int(tail_m / 0.05), 2), endpoint=False)
    tail = np.column_stack([x[0] - back * np.cos(yaw[0]), y[0] - back * np.sin(yaw[0])])
    return np.vstack([tail, np.column_stack([x, y])])


def _aligned(a: Series, b: Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Common times of two series and the row indices of each."""
    common, ia, ib = np.intersect1d(a.t_ns, b.t_ns, assume_unique=True, return_indices=True)
    return common, ia, ib


def platoon_metrics(
    trace: Columns,
    robots: Sequence[RobotSpec],
    gap_reference: Mapping[int, str],
    v2x: Columns | None = None,
    series_out: dict[str, dict[str, np.ndarray]] | None = None,
    spacing_error: Mapping[int, Any] | None = None,
    collision_events: Sequence[tuple[int, int, int]] | None = None,
) -> dict[str, Any]:
    """Per-follower metrics (keys of metrics.json ``followers``) and per-run aggregates.

    ``series_out``, when given, receives per follower name the time series behind the metrics (``t_s``,
    ``spacing_error_m``, ``lateral_m``) for plots. ``spacing_error`` maps a follower id to its law's
    ``spacing_error(ego, pred, dims, pred_dims)`` (the error the law itself regulates, from true states); without
    it the error is the gap minus the recorded desired gap. ``collision_events`` are the physics' contacts
    ``(t_ns, a, b)`` between oriented rectangles; a follower's ``collisions`` counts those it is part of. Without
    them, a contact is a non-positive bumper gap to the predecessor along the line between rear axles."""
    series = split_by_robot(trace)
    by_id = {r.id: r for r in robots}
    followers: dict[str, dict[str, Any]] = {}
    spacing_l2: dict[int, float] = {}
    lateral_l2: dict[int, float] = {}
    accel_l2: dict[int, float] = {}
    accel_linf: dict[int, float] = {}
    speed_l2: dict[int, float] = {}
    speed_linf: dict[int, float] = {}
    _linf_of: dict[int, float | None] = {}
    dt_of = {}
    for rid, s in series.items():
        dt = float(np.median(np.diff(s.t_ns))) / 1e9 if len(s.t_ns) > 1 else 0.0
        dt_of[rid] = dt
        accel_l2[rid] = l2_norm(s.cols["a"], dt)
        accel_linf[rid] = float(np.max(np.abs(s.cols["a"]))) if len(s.t_ns) else 0.0
        speed_l2[rid] = l2_norm(s.cols["v"] - s.cols["v"][0], dt)  # deviation from the robot's initial speed
        speed_linf[rid] = float(np.max(np.abs(s.cols["v"] - s.cols["v"][0]))) if len(s.t_ns) else 0.0
    for robot in robots:
        if robot.predecessor is None or robot.id not in series or robot.predecessor not in series:
            continue
        me, pred = series[robot.id], series[robot.predecessor]
        pred_dims = by_id[robot.predecessor].config["dims"]
        dims = robot.config["dims"]
        _, im, ip = _aligned(me, pred)
        if len(im) == 0:
            continue
        dx = pred.cols["x"][ip] - me.cols["x"][im]
        dy = pred.cols["y"][ip] - me.cols["y"][im]
        axle_gap = np.hypot(dx, dy)
        bumper_gap = axle_gap - pred_dims["rear_overhang_m"] - (dims["length_m"] - dims["rear_overhang_m"])
        gap = bumper_gap if gap_reference.get(robot.id, "axle") == "bumper" else axle_gap
        law_error = (spacing_error or {}).get(robot.id)
        if law_error is not None:
            ego_cols = {k: me.cols[k][im] for k in ("x", "y", "yaw", "v", "yaw_rate")}
            pred_cols = {k: pred.cols[k][ip] for k in ("x", "y", "yaw", "v", "yaw_rate")}
            error_series = np.asarray(law_error(ego_cols, pred_cols, dims, pred_dims), dtype=float)
        else:
            error_series = gap - me.cols["desired_gap_m"][im]
        degraded = me.cols.get("degraded")
        if degraded is not None:  # while fallen back to ACC the follower opens its gap on purpose: not an error
            error_series = np.where(np.nan_to_num(degraded[im]) > 0.5, np.nan, error_series)
        error = error_series[np.isfinite(error_series)]
        dt = dt_of[robot.id]
        spacing_l2[robot.id] = l2_norm(error, dt)
        points = np.column_stack([me.cols["x"], me.cols["y"]])
        tail = float(np.max(axle_gap)) + 1.0
        lateral = signed_path_distance(points, _path_with_tail(pred, tail))
        lateral_l2[robot.id] = l2_norm(lateral, dt)
        leader_series = series.get(robot.leader) if robot.leader is not None else None
        to_leader = _leader_path_metrics(points, leader_series, tail * (robot.position_in_platoon + 1))
        if collision_events is not None:
            collisions = sum(1 for _, a, b in collision_events if robot.id in (a, b))
        else:
            colliding = bumper_gap <= 0.0
            collisions = int(np.count_nonzero(colliding[1:] & ~colliding[:-1]) + (1 if colliding[:1].any() else 0))
        entry: dict[str, Any] = {
            "spacing_error_rms_m": _rms(error),
            "spacing_error_max_m": float(np.max(np.abs(error))) if len(error) else None,
            "lateral_deviation_rms_m": _rms(lateral),
            "lateral_deviation_max_m": float(np.max(np.abs(lateral))),
            "min_gap_m": float(np.min(bumper_gap)),
            "l2_spacing_error": spacing_l2.get(robot.id),
            "l2_lateral_deviation": lateral_l2.get(robot.id),
            "l2_speed_deviation": speed_l2.get(robot.id),
            "l2_acceleration": accel_l2.get(robot.id),
            "l2_ratio_spacing_error": _ratio(spacing_l2.get(robot.id), spacing_l2.get(robot.predecessor)),
            "l2_ratio_acceleration": _ratio(accel_l2.get(robot.id), accel_l2.get(robot.predecessor)),
            "l2_ratio_lateral_deviation": _ratio(lateral_l2.get(robot.id), lateral_l2.get(robot.predecessor)),
            "linf_ratio_spacing_error": _ratio(_linf(error), _linf_of.get(robot.predecessor)),
            "l2_ratio_speed_deviation": _ratio(speed_l2.get(robot.id), speed_l2.get(robot.predecessor)),
            "linf_ratio_speed_deviation": _ratio(speed_linf.get(robot.id), speed_linf.get(robot.predecessor)),
            "linf_ratio_acceleration": _ratio(accel_linf.get(robot.id), accel_linf.get(robot.predecessor)),
            **to_leader,
            "min_ttc_s": _min_ttc(bumper_gap, me.t_ns[im]),
            "collisions": collisions,
            "aoi_mean_s": _mean_finite(me.cols.get("pred_age_s")),
            **_degradation(me),
        }
        _linf_of[robot.id] = _linf(error)
        if v2x is not None:
            entry.update(link_metrics(v2x, receiver=robot.id, sender=robot.predecessor))
        followers[robot.name] = entry
        if series_out is not None:
            series_out[robot.name] = {
                "t_s": me.t_ns[im] / 1e9,
                "spacing_error_m": error_series,
                "lateral_m": lateral[im],
            }
    return {"followers": followers, "run": _run_summary(followers)}


def _linf(y: np.ndarray) -> float | None:
    y = y[np.isfinite(y)]
    return float(np.max(np.abs(y))) if len(y) else None


def _leader_path_metrics(points: np.ndarray, leader: Series | None, tail_m: float) -> dict[str, float | None]:
    """Lateral deviation from the leader's driven path, and corner cutting: the mean offset towards the inside of
    the turn where the leader drives an arc (|curvature| > 0.02 1/m), positive when cutting inwards."""
    if leader is None:
        return {"lateral_deviation_leader_rms_m": None, "lateral_deviation_leader_max_m": None,
                "corner_cutting_m": None}
    path = _path_with_tail(leader, tail_m)
    signed, idx = path_projection(points, path)
    n_tail = len(path) - len(leader.t_ns)
    v = leader.cols["v"]
    curvature = np.where(v > 0.05, leader.cols["yaw_rate"] / np.maximum(v, 0.05), 0.0)
    k_at = np.concatenate([np.zeros(n_tail), curvature])[idx]
    on_arc = np.abs(k_at) > 0.02
    inward = signed * np.sign(k_at)
    return {
        "lateral_deviation_leader_rms_m": _rms(signed),
        "lateral_deviation_leader_max_m": float(np.max(np.abs(signed))),
        "corner_cutting_m": float(np.mean(inward[on_arc])) if on_arc.any() else None,
    }


def _min_ttc(bumper_gap: np.ndarray, t_ns: np.ndarray) -> float | None:
    """Smallest time to collision gap / closing speed over the samples where the gap closes."""
    if len(bumper_gap) < 2:
        return None
    closing = -np.diff(bumper_gap) / (np.diff(t_ns) / 1e9)
    gap = bumper_gap[1:]
    mask = (closing > 1e-6) & (gap > 0)
    return float(np.min(gap[mask] / closing[mask])) if mask.any() else None


def _degradation(me: Series) -> dict[str, Any]:
    """Time spent degraded (CACC fallen back to ACC) and every mode switch (time, new mode)."""
    degraded = me.cols.get("degraded")
    if degraded is None or len(degraded) < 2:
        return {"time_degraded_s": 0.0, "fallback_switches": 0, "fallback_switch_log": []}
    flag = np.nan_to_num(degraded) > 0.5
    dt = np.diff(me.t_ns) / 1e9
    at = np.flatnonzero(np.diff(flag)) + 1
    log = [{"t_s": float(me.t_ns[k] / 1e9), "to": "acc" if flag[k] else "cacc"} for k in at]
    return {"time_degraded_s": float(np.sum(dt[flag[:-1]])), "fallback_switches": len(log), "fallback_switch_log": log}


def link_metrics(v2x: Columns, receiver: int, sender: int) -> dict[str, Any]:
    """PDR, latency and inter-reception interval of one directed link, from ``trace/v2x.parquet`` columns."""
    event, outcome = v2x["event"], v2x["outcome"]
    sent = (event == "tx") & (outcome == "sent") & (v2x["sender"] == sender)  # DCC-dropped CAMs never left
    link = (event == "rx") & (v2x["sender"] == sender) & (v2x["receiver"] == receiver)
    ok = link & (outcome == "received")
    n_sent = int(np.count_nonzero(sent))
    latency = np.asarray(v2x["latency_s"])[ok]
    rx_times = np.sort(np.asarray(v2x["t_ns"])[ok]) / 1e9
    intervals = np.diff(rx_times)
    return {
        "pdr": float(np.count_nonzero(ok) / n_sent) if n_sent else None,
        "latency_mean_s": float(np.mean(latency)) if len(latency) else None,
        "latency_p95_s": float(np.percentile(latency, 95)) if len(latency) else None,
        "interval_mean_s": float(np.mean(intervals)) if len(intervals) else None,
    }


def _rms(y: np.ndarray) -> float | None:
    y = y[np.isfinite(y)]
    return float(np.sqrt(np.mean(np.square(y)))) if len(y) else None


def _mean_finite(y: np.ndarray | None) -> float | None:
    if y is None:
        return None
    y = y[np.isfinite(y)]
    return float(np.mean(y)) if len(y) else None


def _ratio(num: float | None, den: float | None) -> float | None:
    """||y_i|| / ||y_{i-1}||; None when the predecessor's norm is (numerically) zero, e.g. a leader at constant
    speed has no acceleration to amplify."""
    if num is None or den is None or den < 1e-6:
        return None
    return float(num / den)


def _run_summary(followers: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    def worst(key: str) -> float | None:
        values = [f[key] for f in followers.values() if f.get(key) is not None]
        return float(max(values)) if values else None

    return {
        "followers": len(followers),
        "spacing_error_max_m": worst("spacing_error_max_m"),
        "lateral_deviation_max_m": worst("lateral_deviation_max_m"),
        "l2_ratio_spacing_error_max": worst("l2_ratio_spacing_error"),
        "l2_ratio_lateral_deviation_max": worst("l2_ratio_lateral_deviation"),
        "collisions": int(sum(f["collisions"] for f in followers.values())),
        "min_gap_m": min((f["min_gap_m"] for f in followers.values()), default=None),
    }
