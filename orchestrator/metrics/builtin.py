"""The built-in metrics, one function each (the registry in ``registry.py`` lists them in order)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from .follower import FollowerView, start_chain
from .geometry import l2_norm, path_projection, path_with_tail
from .links import channel_busy, link_figures, v2x_log
from .registry import follower_metric, run_metric
from .roles import PHASES, platoon_names
from .rundata import RunData
from .transitions import run_roles
from .worst import worst_over_followers


# -- per follower ----------------------------------------------------------------------------------------------
@follower_metric("spacing_error", report=("spacing_error_rms_m", "spacing_error_max_m"))
def spacing_error(f: FollowerView) -> dict[str, Any]:
    """RMS and largest spacing error (gap minus the law's desired gap), degraded samples excluded."""
    return {"spacing_error_rms_m": _rms(f.error), "spacing_error_max_m": _linf(f.error)}


@follower_metric("lateral_deviation", report=("lateral_deviation_rms_m", "lateral_deviation_max_m"))
def lateral_deviation(f: FollowerView) -> dict[str, Any]:
    """RMS and largest distance to the predecessor's driven path (signed: positive to the left)."""
    return {"lateral_deviation_rms_m": _rms(f.lateral), "lateral_deviation_max_m": float(np.max(np.abs(f.lateral)))}


@follower_metric("min_gap", report=("min_gap_m",))
def min_gap(f: FollowerView) -> dict[str, Any]:
    """Smallest bumper-to-bumper gap to the predecessor."""
    return {"min_gap_m": float(np.min(f.bumper_gap)) if len(f.bumper_gap) else None}


@follower_metric("l2_norms")
def l2_norms(f: FollowerView) -> dict[str, Any]:
    """L2 norms sqrt(sum y^2 dt) of spacing error, lateral deviation, speed deviation and acceleration."""
    own = f.norms[f.robot.id]
    return {
        "l2_spacing_error": l2_norm(f.error, f.dt),
        "l2_lateral_deviation": l2_norm(f.lateral, f.dt),
        "l2_speed_deviation": own.l2_speed_deviation,
        "l2_acceleration": own.l2_acceleration,
    }


@follower_metric("string_stability",
                 report=("l2_ratio_spacing_error", "l2_ratio_acceleration", "l2_ratio_lateral_deviation"))
def string_stability(f: FollowerView) -> dict[str, Any]:
    """Ratios of this follower's norms to its predecessor's (below 1 along a platoon: string stable). Acceleration
    and speed deviation (from each robot's initial speed) are compared over the same samples, the follower's steady
    ones, each against the predecessor of that sample; the spacing-error and lateral ratios against the entry of the
    predecessor it followed longest."""
    ahead = f.pred_id if f.pred_id is not None else np.full(len(f.ip), f.robot.predecessor)
    ids, where = np.unique(ahead, return_inverse=True)  # a few predecessors over many samples
    start = np.array([f.norms[p].initial_speed if p in f.norms else np.nan for p in ids.tolist()], float)
    start = start[where.reshape(-1)] if len(ahead) else np.empty(0)
    a_me, a_ahead = f.me.cols["a"][f.im], f.pred.cols["a"][f.ip]
    v_me = f.me.cols["v"][f.im] - f.norms[f.robot.id].initial_speed
    v_ahead = f.pred.cols["v"][f.ip] - start
    return {
        "l2_ratio_spacing_error": _ratio(l2_norm(f.error, f.dt), f.predecessor_value("l2_spacing_error")),
        "l2_ratio_acceleration": _ratio(l2_norm(a_me, f.dt), l2_norm(a_ahead, f.dt)),
        "l2_ratio_lateral_deviation": _ratio(l2_norm(f.lateral, f.dt), f.predecessor_value("l2_lateral_deviation")),
        "linf_ratio_spacing_error": _ratio(_linf(f.error), f.predecessor_value("spacing_error_max_m")),
        "l2_ratio_speed_deviation": _ratio(l2_norm(v_me, f.dt), l2_norm(v_ahead, f.dt)),
        "linf_ratio_speed_deviation": _ratio(_linf(v_me), _linf(v_ahead)),
        "linf_ratio_acceleration": _ratio(_linf(a_me), _linf(a_ahead)),
    }


@follower_metric("leader_path")
def leader_path(f: FollowerView) -> dict[str, Any]:
    """Lateral deviation from the leader's driven path, and corner cutting: the mean offset towards the inside of
    the turn where the leader drives an arc (|curvature| > 0.02 1/m), positive when cutting inwards."""
    leader = f.leader_series
    if leader is None:
        return {"lateral_deviation_leader_rms_m": None, "lateral_deviation_leader_max_m": None,
                "corner_cutting_m": None}
    rows = slice(None) if f.leader_rows is None else f.leader_rows  # the samples led by this leader
    points = np.column_stack([f.me.cols["x"][rows], f.me.cols["y"][rows]])
    if not len(points):
        return {"lateral_deviation_leader_rms_m": None, "lateral_deviation_leader_max_m": None,
                "corner_cutting_m": None}
    by_id = {r.id: r for r in f.run.robots}
    via = start_chain(by_id, f.robot, f.robot.leader) if f.robot.leader is not None else []
    path = path_with_tail(leader, f.tail_m * (f.robot.position_in_platoon + 1), via)
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


@follower_metric("min_ttc")
def min_ttc(f: FollowerView) -> dict[str, Any]:
    """Smallest time to collision, gap / closing speed, over the samples where the gap closes (closing speeds
    between consecutive samples behind one predecessor only)."""
    return {"min_ttc_s": smallest_ttc(f.bumper_gap, f.me.t_ns[f.im], f.contiguous())}


def smallest_ttc(gap: np.ndarray, t_ns: np.ndarray, contiguous: np.ndarray | None = None) -> float | None:
    """Smallest gap / closing speed over neighbouring samples where the gap closes (``contiguous``: which
    neighbours may be differenced; default all)."""
    if len(gap) < 2:
        return None
    closing = -np.diff(gap) / (np.maximum(np.diff(t_ns), 1) / 1e9)
    mask = (closing > 1e-6) & (gap[1:] > 0)
    if contiguous is not None:
        mask &= contiguous
    return float(np.min(gap[1:][mask] / closing[mask])) if mask.any() else None


@follower_metric("collisions", report=("collisions",))
def collisions(f: FollowerView) -> dict[str, Any]:
    """Contacts this follower is part of (``trace/collisions.parquet``: oriented rectangles); without that trace, a
    non-positive bumper gap to the predecessor along the line between rear axles."""
    events = f.run.trace("collisions")
    if events is not None:
        rid = f.robot.id
        return {"collisions": int(np.count_nonzero((events["a"] == rid) | (events["b"] == rid)))}
    colliding = f.bumper_gap <= 0.0
    return {"collisions": int(np.count_nonzero(colliding[1:] & ~colliding[:-1]) + (1 if colliding[:1].any() else 0))}


@follower_metric("aoi", report=("aoi_mean_s",))
def aoi(f: FollowerView) -> dict[str, Any]:
    """Mean age of the predecessor data the law used."""
    age = f.me.cols.get("pred_age_s")
    if age is None:
        return {"aoi_mean_s": None}
    age = age[np.isfinite(age)]
    return {"aoi_mean_s": float(np.mean(age)) if len(age) else None}


@follower_metric("degradation")
def degradation(f: FollowerView) -> dict[str, Any]:
    """Time spent degraded (CACC fallen back to ACC) and every mode switch (time, new mode)."""
    degraded = f.me.cols.get("degraded")
    if degraded is None or len(degraded) < 2:
        return {"time_degraded_s": 0.0, "fallback_switches": 0, "fallback_switch_log": []}
    flag = np.nan_to_num(degraded) > 0.5
    dt = np.diff(f.me.t_ns) / 1e9
    at = np.flatnonzero(np.diff(flag)) + 1
    log = [{"t_s": float(f.me.t_ns[k] / 1e9), "to": "acc" if flag[k] else "cacc"} for k in at]
    return {"time_degraded_s": float(np.sum(dt[flag[:-1]])), "fallback_switches": len(log), "fallback_switch_log": log}


@follower_metric("link", report=("pdr", "latency_mean_s", "latency_p95_s", "interval_mean_s"))
def link(f: FollowerView) -> dict[str, Any] | None:
    """PDR, latency and inter-reception interval of the link from the predecessor (``trace/v2x.parquet``), per
    stretch in which the follower followed one predecessor (``links``) and over all of them. A CAM counts toward a
    link when it was generated while that link existed (``roles.py``): frames of a robot that is no longer the
    predecessor, or not yet, are not the link's."""
    log = v2x_log(f.run)
    if log is None:
        return None
    links = log.links
    names = {r.id: r.name for r in f.run.robots}
    stretches = []
    for pred, start, end in run_roles(f.run).link_windows(f.robot.id):
        counts = links.counts(receiver=f.robot.id, sender=pred, window_ns=(start, end))
        stretches.append({"predecessor": names.get(pred, str(pred)), "from_s": start / 1e9, "to_s": end / 1e9,
                          **link_figures(*counts), "sent": counts[0], "received": len(counts[1])})
    total = links.total(f.robot.id, [(p, a, b) for p, a, b in run_roles(f.run).link_windows(f.robot.id)])
    return {**link_figures(*total), "links": stretches}


@follower_metric("transition")
def transition(f: FollowerView) -> dict[str, Any]:
    """The platoon and position of the role it held longest in steady following, when it followed whom
    (``following``), and the samples of following in a transition (a maneuver or
    a cut-in until settled, ``roles.py``) apart from steady following: their duration, largest spacing error and
    smallest gap, overall and per stretch (``windows``, each with its cause)."""
    names = {r.id: r.name for r in f.run.robots}
    windows = run_roles(f.run).link_windows(f.robot.id, lagged=False)
    t, gap, error = f.transition_t_ns, f.transition_gap, f.transition_error
    dt = float(np.median(np.diff(t))) / 1e9 if len(t) > 1 else f.dt
    step_ns = max(round(dt * 1e9), 1)
    cuts = np.flatnonzero(np.diff(t) > step_ns * 1.5) + 1  # stretches of consecutive samples
    new_pred = np.flatnonzero(np.diff(f.transition_pred) != 0) + 1 if len(f.transition_pred) else cuts[:0]
    stretches = []
    for rows in np.split(np.arange(len(t)), cuts):
        if not len(rows):
            continue
        stretches.append({
            "from_s": float(t[rows[0]]) / 1e9, "to_s": float(t[rows[-1]] + step_ns) / 1e9,
            "cause": PHASES[int(f.transition_phase[rows[0]])] if len(f.transition_phase) else "maneuver",
            "spacing_error_max_m": _linf(error[rows]), "min_gap_m": float(np.min(gap[rows])),
            "min_ttc_s": smallest_ttc(gap[rows], t[rows], ~np.isin(rows[1:], new_pred)),
        })
    following = [{"predecessor": names.get(p, str(p)), "from_s": a / 1e9, "to_s": b / 1e9, **_steady_in(f, p, a, b)}
                 for p, a, b in windows]
    _note_steady_errors(f)
    platoons = f.run.cache.get("platoon_names")
    if platoons is None:
        platoons = f.run.cache["platoon_names"] = platoon_names(f.run.scenario)
    return {
        "platoon": platoons.get(f.robot.platoon, f"platoon {f.robot.platoon}"),
        "position": f.robot.position_in_platoon,
        "following": following,
        "transition": {"time_s": len(t) * dt, "spacing_error_max_m": _linf(error),
                       "min_gap_m": float(np.min(gap)) if len(gap) else None, "windows": stretches},
    }


def _steady_in(f: FollowerView, pred: int, start: int, end: int) -> dict[str, Any]:
    """Steady following of ``pred`` in [start, end) ns: its duration, RMS and largest spacing error, smallest gap,
    and the L2 ratio of the spacing error to the predecessor's over the same samples (where the predecessor was a
    follower then too: ``_note_steady_errors`` keeps each follower's steady errors for this)."""
    t = f.me.t_ns[f.im]
    owner = f.pred_id if f.pred_id is not None else np.full(len(t), pred)
    mine = (owner == pred) & (t >= start) & (t < end)
    error = f.error_series[mine]
    finite = np.isfinite(error)
    ratio = None
    ahead = f.run.cache.get("steady_errors", {}).get(pred)
    if ahead is not None and finite.any():
        common, ia, ib = np.intersect1d(t[mine][finite], ahead[0], assume_unique=True, return_indices=True)
        if len(common) > 1:
            ratio = _ratio(l2_norm(error[finite][ia], f.dt), l2_norm(ahead[1][ib], f.dt))
    return {"steady_s": float(np.count_nonzero(mine)) * f.dt, "spacing_error_rms_m": _rms(error),
            "spacing_error_max_m": _linf(error), "min_gap_m": float(np.min(f.bumper_gap[mine])) if mine.any() else None,
            "l2_ratio_spacing_error": ratio}


def _note_steady_errors(f: FollowerView) -> None:
    """Keeps this follower's steady spacing errors (times, values) for its followers' ratios, in runs whose roles
    change (elsewhere one predecessor per follower: the ratio of the whole run says it all)."""
    roles = run_roles(f.run)
    if len(roles.robot) == len(np.unique(roles.robot)):
        return
    finite = np.isfinite(f.error_series)
    f.run.cache.setdefault("steady_errors", {})[f.robot.id] = (f.me.t_ns[f.im][finite], f.error_series[finite])


# -- per run ---------------------------------------------------------------------------------------------------
@run_metric("summary", section="run")
def summary(run: RunData, followers: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The worst follower of the run for each headline metric (``worst.py``: largest error or ratio, smallest gap)
    and the total number of contacts."""
    return {
        "followers": len(followers),
        "spacing_error_max_m": worst_over_followers(followers, "spacing_error_max_m"),
        "lateral_deviation_max_m": worst_over_followers(followers, "lateral_deviation_max_m"),
        "l2_ratio_spacing_error_max": worst_over_followers(followers, "l2_ratio_spacing_error"),
        "l2_ratio_lateral_deviation_max": worst_over_followers(followers, "l2_ratio_lateral_deviation"),
        "collisions": int(sum(f.get("collisions", 0) for f in followers.values())),
        "min_gap_m": worst_over_followers(followers, "min_gap_m"),
    }


@run_metric("channel", section="channel")
def channel(run: RunData, followers: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """Channel busy ratio over every station and DCC window (``trace/channel_load.parquet``), CAMs sent and dropped
    by DCC, and the outcomes and PDR of the receptions the applications read (predecessor and leader links)."""
    busy = channel_busy(run) if os.path.lexists(run.path("v2x")) else None
    log = v2x_log(run) if busy is not None else None
    if busy is None or log is None:
        return None
    total, count, largest = busy
    counts = log.interest
    attempts = sum(counts.values())
    return {
        "cbr_mean": total / count if count else 0.0,
        "cbr_max": largest if count else 0.0,
        "cams_sent": log.cams_sent,
        "cams_dcc_dropped": log.cams_dcc_dropped,
        "interest_outcomes": counts,
        "pdr_interest": counts["received"] / attempts if attempts else None,
        **({"pms_sent": log.pms_sent} if log.pms_sent else {}),
    }


# -- helpers ---------------------------------------------------------------------------------------------------
def _rms(y: np.ndarray) -> float | None:
    y = y[np.isfinite(y)]
    return float(np.sqrt(np.mean(np.square(y)))) if len(y) else None


def _linf(y: np.ndarray) -> float | None:
    y = y[np.isfinite(y)]
    return float(np.max(np.abs(y))) if len(y) else None


def _ratio(num: float | None, den: float | None) -> float | None:
    """||y_i|| / ||y_{i-1}||; None when the predecessor's norm is (numerically) zero, e.g. a leader at constant
    speed has no acceleration to amplify."""
    if num is None or den is None or den < 1e-6:
        return None
    return float(num / den)
