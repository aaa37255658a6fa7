"""Maneuver metrics (``metrics.json`` ``maneuvers``), from ``trace/maneuver_events.parquet`` and the vehicles trace.

Per request of the scenario's ``maneuvers`` list: its outcome (completed, aborted, refused, unfinished), the time
from the request to its completion, and over the maneuver's window (its first to its last event) the smallest
bumper-to-bumper gap between any two vehicles in one lane, the largest deceleration of the robots taking part and
of any robot, and the aborts with the state that gave up and why (the literature's measures: Segata et al.,
Plexe; time to complete, minimum gap, maximum deceleration, failure under loss).

The gap: vehicle j is ahead of i in i's frame (rear-axle points, i's heading) when dx > 0, in i's lane when the
lateral offset is below half their widths summed; the gap is dx minus i's front length and j's rear overhang.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .registry import run_metric
from .roles import CUT_IN
from .rundata import RunData
from .transitions import run_roles


@run_metric("maneuvers", section="maneuvers")
def maneuvers(run: RunData, followers: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """Each maneuver's outcome, time to complete, smallest gap and largest deceleration, and aborts with reasons."""
    events = run.trace("maneuver_events")
    requests = getattr(run.scenario, "maneuvers", None) or []
    if events is None or not requests:
        return None
    names = {r.id: r.name for r in run.robots}
    motion = _motion(run)
    entries = []
    for index, request in enumerate(requests):
        mine = np.flatnonzero(np.asarray(events["request"]) == index)
        kinds = events["event"][mine]
        t_s = np.asarray(events["t_ns"])[mine] / 1e9
        robots = sorted({int(r) for r in np.asarray(events["robot"])[mine] if r >= 0})
        entry: dict[str, Any] = {"index": index, "type": request.type, "at_s": request.at_s,
                                 "robots": [names.get(r, str(r)) for r in robots]}
        requested = np.flatnonzero(kinds == "requested")
        entry["requested_s"] = float(t_s[requested[0]]) if len(requested) else float(request.at_s)
        entry["completed_s"] = None
        done = np.flatnonzero(kinds == "completed")
        aborted = np.flatnonzero(kinds == "aborted")
        if len(done) and not len(aborted):
            entry["status"] = "completed"
            entry["completed_s"] = float(t_s[done[-1]])
            entry["time_to_complete_s"] = float(t_s[done[-1]] - request.at_s)
        elif len(aborted):
            entry["status"] = "aborted"
            entry["reason"] = str(events["reason"][mine][aborted[0]])
        elif (kinds == "refused").any():
            entry["status"] = "refused"
            entry["reason"] = str(events["reason"][mine][np.flatnonzero(kinds == "refused")[0]])
        else:
            entry["status"] = "unfinished"
        entry["aborts"] = [{"robot": names.get(int(events["robot"][mine][k]), ""), "t_s": float(t_s[k]),
                            "state": str(events["state"][mine][k]), "reason": str(events["reason"][mine][k])}
                           for k in aborted]
        if len(mine) and motion is not None:
            end = float(t_s.max())
            entry.update(_window(motion, float(request.at_s), end, robots))
            entry.update(_behind(run, ("maneuver", index), followers, float(request.at_s), end,
                                 {names.get(r, str(r)) for r in robots}))
        entries.append(entry)
    count = {status: sum(e["status"] == status for e in entries)
             for status in ("completed", "aborted", "refused", "unfinished")}
    return {"requests": entries, **count}


def _behind(run: RunData, key: tuple[str, int], followers: Mapping[str, Mapping[str, Any]], start: float,
            end: float, not_behind: set[str]) -> dict[str, Any]:
    """What an event over [start, end] s did to the followers: the smallest time to collision in a transition
    then, and the largest |spacing error| of the followers not in ``not_behind`` over the window (kept per window
    as the follower metrics ran: ``follower._note_window_errors``)."""
    ttc = [w["min_ttc_s"] for f in followers.values() for w in (f.get("transition") or {}).get("windows", [])
           if w.get("min_ttc_s") is not None and w["from_s"] <= end and w["to_s"] >= start]
    errors = run.cache.get("window_errors", {}).get(key, {})
    behind = [value for name, value in errors.items() if name not in not_behind]
    return {"min_ttc_s": min(ttc) if ttc else None, "max_spacing_error_behind_m": max(behind) if behind else None}


def _motion(run: RunData) -> dict[str, Any] | None:
    """Every robot's pose and acceleration on one time grid (NaN where a robot is not alive), and its size."""
    ids = [r.id for r in run.robots]
    series = run.series(ids, ["x", "y", "yaw", "a"])
    if not series:
        return None
    t_ns = np.unique(np.concatenate([s.t_ns for s in series.values()]))
    grid = {name: np.full((len(t_ns), len(ids)), np.nan) for name in ("x", "y", "yaw", "a")}
    for k, rid in enumerate(ids):
        s = series.get(rid)
        if s is None:
            continue
        rows = np.searchsorted(t_ns, s.t_ns)
        for name in grid:
            grid[name][rows, k] = s.cols[name]
    dims = {key: np.array([float(getattr(r.dims, key)) for r in run.robots])
            for key in ("length_m", "width_m", "rear_overhang_m")}
    return {"t_s": t_ns / 1e9, "ids": np.asarray(ids, np.int64), **grid, **dims}


def _window(m: Mapping[str, Any], start: float, end: float, robots: list[int]) -> dict[str, Any]:
    """Smallest same-lane gap and largest decelerations over [start, end] s."""
    rows = (m["t_s"] >= start) & (m["t_s"] <= end)
    if not rows.any():
        return {"min_gap_m": None, "max_decel_mps2": None, "max_decel_any_mps2": None}
    x, y, yaw, a = (m[name][rows] for name in ("x", "y", "yaw", "a"))
    dx_w = x[:, None, :] - x[:, :, None]  # [t, i, j]: j relative to i
    dy_w = y[:, None, :] - y[:, :, None]
    c, s = np.cos(yaw)[:, :, None], np.sin(yaw)[:, :, None]
    ahead = dx_w * c + dy_w * s
    side = -dx_w * s + dy_w * c
    half = (m["width_m"][:, None] + m["width_m"][None, :]) / 2.0
    gap = ahead - (m["length_m"] - m["rear_overhang_m"])[None, :, None] - m["rear_overhang_m"][None, None, :]
    same_lane = (ahead > 0) & (np.abs(side) < half[None]) & np.isfinite(gap)
    gaps = gap[same_lane]
    taking_part = np.isin(m["ids"], robots)
    decel = -a
    return {
        "min_gap_m": float(gaps.min()) if len(gaps) else None,
        "max_decel_mps2": float(np.nanmax(decel[:, taking_part])) if taking_part.any() else None,
        "max_decel_any_mps2": float(np.nanmax(decel)),
    }


@run_metric("cut_ins", section="cut_ins")
def cut_ins(run: RunData, followers: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """Each cut-in (a vehicle from outside the scenario's robots became a follower's range target in place of its
    predecessor, ``roles.py``): who cut in front of whom and when, the smallest range gap and time to collision to
    the intruder, the follower's hardest braking, and the largest spacing error it caused behind."""
    windows = [(name, w) for name, f in followers.items()
               for w in (f.get("transition") or {}).get("windows", []) if w.get("cause") == "cut_in"]
    if not windows:
        return None  # the whole range trace (large in a long run) is read only when there are cut-ins
    scan = run.trace("range")
    if scan is None:
        return None
    ids = {r.name: r.id for r in run.robots}
    roles = run_roles(run)
    labels = _vehicle_labels(run)
    robot, target, t_ns = (np.asarray(scan[k], np.int64) for k in ("robot", "target", "t_ns"))
    range_m, rate = np.asarray(scan["range_m"], float), np.asarray(scan["range_rate_mps"], float)
    outsider = (target >= 0) & ~np.isin(target, np.fromiter(ids.values(), np.int64, len(ids)))
    accel = run.series([ids[name] for name, _ in windows], ["a"])
    events = []
    for name, w in windows:
        start, end = round(w["from_s"] * 1e9), round(w["to_s"] * 1e9)
        rows = (robot == ids[name]) & (t_ns >= start) & (t_ns < end) & outsider
        if not rows.any():
            continue
        values, counts = np.unique(target[rows], return_counts=True)
        intruder = int(values[np.argmax(counts)])
        seen = rows & (target == intruder)
        closing = seen & (rate < -1e-6)
        a = accel.get(ids[name])
        braking = None
        if a is not None:
            during = (a.t_ns >= start) & (a.t_ns < end)
            braking = float(np.max(-a.cols["a"][during])) if during.any() else None
        mine = {("cut_in", int(k)) for k in roles.rows_of(ids[name])
                 if roles.phase[k] == CUT_IN and roles.from_ns[k] < end and roles.to_ns[k] > start}
        behind = [value for key, found in run.cache.get("window_errors", {}).items() if key in mine
                  for other, value in found.items() if other != name]
        events.append({
            "robot": name, "intruder": labels.get(intruder, f"vehicle {intruder}"),
            "from_s": float(t_ns[seen].min()) / 1e9, "to_s": w["to_s"],
            "min_gap_m": float(range_m[seen].min()),
            "min_ttc_s": float(np.min(range_m[closing] / -rate[closing])) if closing.any() else None,
            "max_decel_mps2": braking,
            "max_spacing_error_behind_m": max(behind) if behind else None,
        })
    return {"events": sorted(events, key=lambda e: (e["from_s"], e["robot"]))} if events else None


def _vehicle_labels(run: RunData) -> dict[int, str]:
    """Names of robots from outside the scenario: SUMO's vehicle ids (``trace/traffic.parquet`` departures)."""
    traffic = run.trace("traffic")
    if traffic is None or "sumo_id" not in traffic:
        return {}
    departed = np.asarray(traffic["event"]) == "departed"
    return {int(r): str(s) for r, s in zip(np.asarray(traffic["robot"])[departed],
                                             np.asarray(traffic["sumo_id"])[departed], strict=True)}
