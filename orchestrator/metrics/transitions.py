"""The run's role table as the metrics use it (``roles.py`` built once per run from its traces) and the transitions
derived from it: how long a follower's transition lasts (until it has settled), and the windows maneuvers and
cut-ins are judged over, with each follower's largest spacing error in them."""

from __future__ import annotations

from typing import Any

import numpy as np

from core.timebase import seconds_to_ns

from .roles import CUT_IN, NONE, SETTLED_BAND, SETTLED_MIN_M, Roles, build_roles
from .rundata import RunData


def run_roles(run: RunData) -> Roles:
    """The run's role table (``roles.py``), built once per run."""
    roles = run.cache.get("roles")
    if roles is None:
        scenario = run.scenario
        end_ns = seconds_to_ns(scenario.duration_s) + seconds_to_ns(scenario.step_s)
        roles = build_roles(run.robots, end_ns, run.trace("platoon_state"), _cut_in_scan(run),
                            seconds_to_ns(scenario.step_s))
        run.cache["roles"] = roles
    return roles


def _cut_in_scan(run: RunData) -> dict[str, np.ndarray] | None:
    """What the cut-ins need of ``trace/range.parquet`` (``roles._mark_cut_ins``): ``t_ns``, ``robot`` and
    ``target`` of the robots that ever had a target from outside the scenario's robots, read a row group at a time.
    Not ``run.trace("range")``: the whole trace, held for the rest of the run's outputs, grows with simulated time
    (350 MB at an hour of 100 robots) although most runs have no outsider at all."""
    from ..recording.trace_schema import check_values, open_trace, read_group

    path = run.path("range")
    if not path.exists():
        return None
    ids = np.fromiter((r.id for r in run.robots), np.int64)
    parquet = open_trace(path)
    if not {"t_ns", "robot", "target"} <= set(parquet.schema_arrow.names):
        return None
    followers: set[int] = set()  # robots that ever had a target from outside the scenario's robots
    row0 = 0
    for g in range(parquet.num_row_groups):
        group = read_group(parquet, path, g, ["robot", "target"])
        check_values(path, {c: group.column(c) for c in group.column_names}, "range", row0)
        row0 += group.num_rows
        target = group.column("target").to_numpy()
        outside = (target != NONE) & ~np.isin(target, ids)
        followers.update(np.unique(group.column("robot").to_numpy()[outside]).tolist())
    if not followers:
        return None
    wanted = np.fromiter(followers, np.int64)
    parts = []
    for g in range(parquet.num_row_groups):
        group = read_group(parquet, path, g, ["t_ns", "robot", "target"])
        keep = np.isin(group.column("robot").to_numpy(), wanted)
        parts.append({c: group.column(c).to_numpy()[keep] for c in ("t_ns", "robot", "target")})
    return {c: np.concatenate([p[c] for p in parts]) for c in ("t_ns", "robot", "target")}


def roles_json(run: RunData) -> dict[str, Any]:
    """The ``roles`` block of ``metrics.json``: every robot's intervals, by name."""
    from .roles import platoon_names

    return run_roles(run).as_json({r.id: r.name for r in run.robots}, platoon_names(run.scenario))



def event_windows(run: RunData, roles: Roles) -> dict[tuple[str, int], tuple[int, int]]:
    """The windows maneuvers and cut-ins are judged over: ("maneuver", request index) from the request to its last
    event, ("cut_in", row of the role table) over the cut-in's rows (a follower's adjacent cut-in rows joined)."""
    windows: dict[tuple[str, int], tuple[int, int]] = {}
    events = run.trace("maneuver_events")
    if events is not None and len(events["t_ns"]):
        request, t_ns = np.asarray(events["request"]), np.asarray(events["t_ns"], np.int64)
        for index, spec in enumerate(getattr(run.scenario, "maneuvers", None) or []):
            mine = t_ns[request == index]
            if len(mine):
                windows[("maneuver", index)] = (seconds_to_ns(spec.at_s), int(mine.max()))
    for k in np.flatnonzero(roles.phase == CUT_IN):
        windows[("cut_in", int(k))] = (int(roles.from_ns[k]), int(roles.to_ns[k]))
    return windows


def note_window_errors(run: RunData, roles: Roles, name: str, t_ns: np.ndarray, error: np.ndarray) -> None:
    """Keeps, for each maneuver and cut-in window, this follower's largest |spacing error| in it (every sample of
    following, steady or not): what the maneuver metrics report as the error an event caused behind."""
    windows = run.cache.get("event_windows")
    if windows is None:
        windows = run.cache["event_windows"] = event_windows(run, roles)
    found = run.cache.setdefault("window_errors", {})
    for key, (start, end) in windows.items():
        inside = (t_ns >= start) & (t_ns <= end) & np.isfinite(error)
        if inside.any():
            found.setdefault(key, {})[name] = float(np.max(np.abs(error[inside])))


def settling(transition: np.ndarray, rows: np.ndarray, error: np.ndarray, gap: np.ndarray) -> np.ndarray:
    """``transition`` extended over the samples after each transition until the spacing error is first back within
    the settled band (``roles.SETTLED_BAND``; NaN errors, e.g. degraded samples, count as settled). ``rows``: the
    samples' indices in the follower's series; a gap in them ends any extension."""
    band = np.maximum(SETTLED_BAND * np.abs(gap), SETTLED_MIN_M)
    unsettled = np.abs(np.nan_to_num(error)) > band
    open_ = transition | unsettled
    run = np.cumsum(np.r_[True, (np.diff(rows) != 1) | ~open_[1:] | ~open_[:-1]])  # runs of consecutive open samples
    started = np.zeros(len(rows), np.int64)
    np.add.at(started, np.arange(len(rows)), transition)
    seen = np.cumsum(started) - _first_of_run(np.cumsum(started), run)  # transitions so far within the run
    return transition | (unsettled & (seen > 0))


def _first_of_run(values: np.ndarray, run: np.ndarray) -> np.ndarray:
    """For each sample, ``values`` just before its run starts (0 for the first run)."""
    starts = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
    before = np.where(starts > 0, values[np.maximum(starts - 1, 0)], 0)
    return np.repeat(before, np.diff(np.r_[starts, len(run)]))
