"""Roles over time: for every robot and every interval, its platoon, position, predecessor and leader.

Every metric that speaks of "the predecessor" or "the leader" reads them here, at the time of each sample, so the
numbers stay right when the platoon changes (joins, leaves, splits, merges, cut-ins). The table is derived from the
traces alone:

- a run with maneuvers records ``trace/platoon_state.parquet`` (every robot, every control step: platoon id and
  index, maneuver state, whose messages it uses as predecessor and leader); a role lasts from one recorded change
  to the next;
- any other run keeps the roles the scenario gave each robot, while it is alive (spawn to despawn);
- ``trace/range.parquet`` adds cut-ins: a vehicle that is not a scenario robot (SUMO traffic, a remote spawn) is the
  range target of a follower instead of its predecessor.

Each interval has a **phase**. ``steady`` is plain following; the others are the transitions a maneuver study looks
at and that steady-state figures (RMS spacing error, string-stability ratios) must not mix in:

- ``maneuver``: the robot or its predecessor is in a maneuver state that moves it (every state but idle, accept,
  watch and split_request: a leader accepting or asking keeps driving as before), or less than ``SETTLE_S`` has
  passed since the robot's predecessor or platoon changed (a new predecessor starts at another gap);
- ``cut_in``: a vehicle from outside the platoons is between the follower and its predecessor, and ``SETTLE_S``
  after it has gone.

The follower metrics then extend each transition until the follower has settled (spacing error back within
``SETTLED_BAND`` of the gap): closing the gap a leaver left takes longer than any fixed window. A platoon's leader
(position 0) follows no one, even where it listens to the car ahead to merge later.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from core.ports import MANEUVER_STATES
from core.robots import RobotSpec

SETTLE_S = 1.0
"""Seconds after a change of predecessor or platoon, and after a cut-in vehicle has gone, that count as the
transition whatever the gap; the follower metrics then extend each transition until the spacing error is back
within ``SETTLED_BAND`` (``follower.py``)."""
SETTLED_BAND = 0.05
"""A follower has settled when its spacing error is within this fraction of its gap (at least ``SETTLED_MIN_M``):
the 5 % band of a step response's settling time."""
SETTLED_MIN_M = 0.1

PHASES = ("steady", "maneuver", "cut_in")
STEADY, MANEUVER, CUT_IN = 0, 1, 2
NONE = -1
"""A missing predecessor or leader (a leader, a robot alone), or a robot that is not alive."""

_STILL_STATES = np.array([MANEUVER_STATES.index(s) for s in ("idle", "accept", "watch", "split_request")],
                         np.float64)
"""Maneuver states in which a robot drives as it would without the maneuver."""


@dataclass(frozen=True)
class Roles:
    """The role table: one row per (robot, interval), rows of one robot contiguous and in time order.

    Times are ns, intervals [from_ns, to_ns). ``predecessor`` and ``leader`` are robot ids (``NONE``: none);
    ``platoon`` is a platoon id (the scenario's platoons are 0, 1, ... in order; maneuvers number new ones) and
    ``position`` the index in it (0: its leader); ``phase`` indexes ``PHASES``.
    """

    robot: np.ndarray
    platoon: np.ndarray
    position: np.ndarray
    predecessor: np.ndarray
    leader: np.ndarray
    phase: np.ndarray
    from_ns: np.ndarray
    to_ns: np.ndarray
    lag_ns: int = 0
    """How long after a recorded role change the channel acts on it (``platoon_state`` is published at the end of
    a control step and read at the next step of the run): a link starts and ends that much later for the frames it
    carries."""

    @cached_property
    def _row_index(self) -> dict[int, np.ndarray]:
        """Rows per robot, built once (a lookup per follower, not a pass over the table)."""
        order = np.argsort(self.robot, kind="stable")
        ids = self.robot[order]
        cuts = np.flatnonzero(np.diff(ids)) + 1
        return {int(self.robot[rows[0]]): rows for rows in np.split(order, cuts) if len(rows)}

    def rows_of(self, robot: int) -> np.ndarray:
        """Row indices of ``robot``'s intervals, in time order."""
        return self._row_index.get(int(robot), np.empty(0, np.int64))

    def at(self, robot: int, t_ns: np.ndarray) -> dict[str, np.ndarray]:
        """``robot``'s predecessor, leader, platoon, position and phase at each of ``t_ns`` (``NONE`` outside its
        intervals)."""
        rows = self.rows_of(robot)
        t_ns = np.asarray(t_ns, np.int64)
        out = {name: np.full(len(t_ns), NONE, np.int64)
               for name in ("predecessor", "leader", "platoon", "position", "phase")}
        if not len(rows):
            return out
        k = np.searchsorted(self.from_ns[rows], t_ns, side="right") - 1
        inside = (k >= 0) & (t_ns < self.to_ns[rows][np.maximum(k, 0)])
        pick = rows[np.maximum(k, 0)]
        for name in out:
            out[name] = np.where(inside, getattr(self, name)[pick], NONE)
        return out

    def followers(self) -> list[int]:
        """Every robot that has a predecessor at some time, in order of first appearance."""
        return list(dict.fromkeys(int(r) for r in self.robot[self.predecessor != NONE]))

    def link_windows(self, robot: int, lagged: bool = True) -> list[tuple[int, int, int]]:
        """(predecessor, from_ns, to_ns) of each stretch in which ``robot`` follows one predecessor (any phase).
        Adjacent rows with the same predecessor are merged. ``lagged``: shifted by ``lag_ns`` where a recorded
        change starts or ends them, the times the link carries frames; otherwise the times of the roles."""
        windows: list[tuple[int, int, int]] = []
        rows = self.rows_of(robot)
        if not len(rows):
            return windows
        first, last = int(self.from_ns[rows[0]]), int(self.to_ns[rows[-1]])
        for k in rows:
            pred = int(self.predecessor[k])
            if pred == NONE:
                continue
            if windows and windows[-1][0] == pred and windows[-1][2] == self.from_ns[k]:
                windows[-1] = (pred, windows[-1][1], int(self.to_ns[k]))
            else:
                windows.append((pred, int(self.from_ns[k]), int(self.to_ns[k])))
        lag = self.lag_ns if lagged else 0
        return [(p, a if a == first else a + lag, b if b == last else b + lag) for p, a, b in windows]

    def groups(self) -> list[list[int]]:
        """Robots linked by any predecessor or leader relation at any time (connected components), each sorted:
        the sets of robots whose metrics need each other's samples."""
        parent: dict[int, int] = {int(r): int(r) for r in np.unique(self.robot)}

        def root(r: int) -> int:
            while parent[r] != r:
                parent[r] = parent[parent[r]]
                r = parent[r]
            return r

        for a, b in zip(np.r_[self.robot, self.robot], np.r_[self.predecessor, self.leader], strict=True):
            if b != NONE and int(b) in parent:
                parent[root(int(a))] = root(int(b))
        out: dict[int, list[int]] = {}
        for r in parent:
            out.setdefault(root(r), []).append(r)
        return [sorted(members) for members in out.values()]

    def as_json(self, names: Mapping[int, str], platoon_names: Mapping[int, str]) -> dict[str, Any]:
        """The ``roles`` block of ``metrics.json``: one entry per interval, robots and platoons by name."""

        def name(rid: int) -> str | None:
            return None if rid == NONE else names.get(rid, str(rid))

        return {"settle_s": SETTLE_S, "intervals": [
            {"robot": name(int(self.robot[k])), "platoon": platoon_names.get(int(self.platoon[k]),
                                                                             f"platoon {int(self.platoon[k])}"),
             "position": int(self.position[k]), "predecessor": name(int(self.predecessor[k])),
             "leader": name(int(self.leader[k])), "from_s": float(self.from_ns[k]) / 1e9,
             "to_s": float(self.to_ns[k]) / 1e9, "phase": PHASES[int(self.phase[k])]}
            for k in range(len(self.robot))]}


def build_roles(robots: Iterable[RobotSpec], end_ns: int, platoon_state: Mapping[str, np.ndarray] | None,
                range_trace: Mapping[str, np.ndarray] | None = None, step_ns: int = 0) -> Roles:
    """The role table of a run: from ``platoon_state`` where the run recorded it, otherwise from the robots' specs
    (alive [spawn, despawn or ``end_ns``)); cut-ins from ``range_trace`` marked on top. ``step_ns``: the run's
    step, after which the channel acts on a recorded change (``Roles.lag_ns``)."""
    robots = list(robots)
    if platoon_state is not None and len(platoon_state["t_ns"]):
        rows = replace(_from_platoon_state(platoon_state, end_ns), lag_ns=step_ns)
    else:
        rows = _from_specs(robots, end_ns)
    if range_trace is not None and len(range_trace["t_ns"]):
        rows = _mark_cut_ins(rows, range_trace, {r.id for r in robots})
    return rows


def _from_specs(robots: list[RobotSpec], end_ns: int) -> Roles:
    """One row per robot while it is alive, split where its predecessor or leader is not (a late spawn, an early
    despawn): a link exists only while both ends do."""
    life = {r.id: (r.spawn_ns, end_ns if r.despawn_ns is None else r.despawn_ns) for r in robots}
    rows: list[tuple[int, ...]] = []
    for r in robots:
        start, end = life[r.id]
        pred = NONE if r.predecessor is None else r.predecessor
        leader = NONE if r.leader is None else r.leader
        ends = {start, end}
        for other in (pred, leader):
            if other != NONE:
                ends |= {t for t in life.get(other, (start, start)) if start < t < end}
        for a, b in itertools.pairwise(sorted(ends)):
            def alive(rid: int, a: int = a) -> bool:
                return rid != NONE and life.get(rid, (0, 0))[0] <= a < life.get(rid, (0, 0))[1]

            rows.append((r.id, r.platoon, r.position_in_platoon, pred if alive(pred) else NONE,
                         leader if alive(leader) else NONE, STEADY, a, b))
    table = np.asarray(rows, np.int64).reshape(-1, 8)
    return Roles(*(table[:, k] for k in range(8)))


def _from_platoon_state(table: Mapping[str, np.ndarray], end_ns: int) -> Roles:
    """Intervals from the per-step records: the columns on a (time, robot) grid, the phase worked out on it (it
    needs the predecessor's state at the same instant), then one row per run of equal values."""
    t_all = np.asarray(table["t_ns"], np.int64)
    robot_all = np.asarray(table["robot"], np.int64)
    times, ti = np.unique(t_all, return_inverse=True)
    ids, ri = np.unique(robot_all, return_inverse=True)
    shape = (len(times), len(ids))

    def grid(name: str) -> np.ndarray:
        g = np.full(shape, np.nan)
        g[ti, ri] = np.asarray(table[name], np.float64)
        return g

    alive = np.zeros(shape, bool)
    alive[ti, ri] = True
    platoon, position = grid("platoon_id"), grid("platoon_index")
    pred_id, leader_id = grid("predecessor"), grid("leader")
    pred_id[position == 0] = np.nan  # a platoon's leader may listen to the car ahead (to merge later): it leads
    moving = alive & ~np.isin(grid("maneuver"), _STILL_STATES)
    wanted = np.nan_to_num(pred_id, nan=NONE).astype(np.int64)
    col = np.clip(np.searchsorted(ids, wanted), 0, len(ids) - 1)
    pred_col = np.where((wanted != NONE) & (ids[col] == wanted), col, -1)  # the predecessor's grid column
    pred_moving = np.where(pred_col >= 0, np.take_along_axis(moving, np.maximum(pred_col, 0), axis=1), False)
    settling = _since_change(times, np.nan_to_num(pred_id, nan=NONE), np.nan_to_num(platoon, nan=NONE)) < SETTLE_S * 1e9
    has_pred = np.isfinite(pred_id)
    phase = np.where(moving | (has_pred & (pred_moving | settling)), MANEUVER, STEADY)
    step = int(np.median(np.diff(times))) if len(times) > 1 else 0
    columns = {"platoon": platoon, "position": position, "predecessor": pred_id, "leader": leader_id,
               "phase": phase.astype(np.float64)}
    out: dict[str, list[np.ndarray]] = {name: [] for name in (*columns, "robot", "from_ns", "to_ns")}
    for k, rid in enumerate(ids):
        live = np.flatnonzero(alive[:, k])
        if not len(live):
            continue
        values = np.column_stack([np.nan_to_num(columns[name][live, k], nan=NONE) for name in columns])
        # a new row where any value changes or the robot was absent in between (despawned and back)
        cut = np.r_[True, (np.diff(values, axis=0) != 0).any(axis=1) | (np.diff(live) != 1)]
        starts = np.flatnonzero(cut)
        ends = np.r_[starts[1:], len(live)]  # exclusive, in live samples
        last_t = times[live[ends - 1]]
        gap_after = np.r_[live[starts[1:]] - live[ends[:-1] - 1] != 1, True]  # absent after this row's end
        out["robot"].append(np.full(len(starts), rid, np.int64))
        out["from_ns"].append(times[live[starts]])
        next_start = np.r_[times[live[starts[1:]]], 0]
        until = np.where(gap_after, last_t + step, next_start)
        if live[-1] == len(times) - 1:  # recorded to the end: the role lasts to the end of the run
            until[-1] = max(int(end_ns), int(last_t[-1]) + step)
        out["to_ns"].append(until.astype(np.int64))
        for j, name in enumerate(columns):
            out[name].append(values[starts, j].astype(np.int64))
    joined = {name: np.concatenate(parts) if parts else np.empty(0, np.int64) for name, parts in out.items()}
    return Roles(**joined)


def _since_change(times: np.ndarray, *grids: np.ndarray) -> np.ndarray:
    """Per (time, robot): ns since any of ``grids`` last changed for that robot (inf before the first change; the
    values a robot starts with are not a change)."""
    changed = np.zeros(grids[0].shape, bool)
    for g in grids:
        changed[1:] |= g[1:] != g[:-1]
    t = np.where(changed, times[:, None].astype(np.float64), -np.inf)
    last = np.maximum.accumulate(t, axis=0)
    return times[:, None] - last


def _mark_cut_ins(roles: Roles, range_trace: Mapping[str, np.ndarray], scenario_ids: set[int]) -> Roles:
    """Splits the followers' rows where a vehicle from outside the scenario's robots is their range target, and
    marks those stretches (and ``SETTLE_S`` after) ``cut_in``."""
    robot = np.asarray(range_trace["robot"], np.int64)
    target = np.asarray(range_trace["target"], np.int64)
    t_ns = np.asarray(range_trace["t_ns"], np.int64)
    outsider = (target != NONE) & ~np.isin(target, np.fromiter(scenario_ids, np.int64, len(scenario_ids)))
    windows: dict[int, list[tuple[int, int]]] = {}
    for rid in np.unique(robot[outsider]):
        mine = np.flatnonzero(robot == rid)
        mine = mine[np.argsort(t_ns[mine], kind="stable")]
        flag = outsider[mine]
        t = t_ns[mine]
        edges = np.flatnonzero(np.diff(np.r_[False, flag, False].astype(np.int8)))
        spans = []
        for a, b in zip(edges[::2], edges[1::2], strict=True):
            end = (t[b] if b < len(t) else t[-1]) + int(SETTLE_S * 1e9)
            if spans and t[a] <= spans[-1][1]:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((int(t[a]), int(end)))
        windows[int(rid)] = spans
    if not windows:
        return roles
    names = ("robot", "platoon", "position", "predecessor", "leader", "phase", "from_ns", "to_ns")
    out: dict[str, list[int]] = {name: [] for name in names}
    for k in range(len(roles.robot)):
        row = {name: int(getattr(roles, name)[k]) for name in names}
        spans = windows.get(row["robot"], []) if row["predecessor"] != NONE else []
        cuts = sorted({row["from_ns"], row["to_ns"], *(t for s in spans for t in s
                                                       if row["from_ns"] < t < row["to_ns"])})
        for a, b in itertools.pairwise(cuts):
            inside = any(s <= a < e for s, e in spans)
            piece = dict(row, from_ns=a, to_ns=b, phase=CUT_IN if inside else row["phase"])
            for name in names:
                out[name].append(piece[name])
    return Roles(**{name: np.asarray(values, np.int64) for name, values in out.items()}, lag_ns=roles.lag_ns)


def platoon_names(scenario: Any) -> dict[int, str]:
    """Platoon names by id: the scenario's platoons in order, then the platoons maneuvers make (numbered as the
    maneuver plan numbers them: the platoon count plus the request's index; a leaver's platoon takes its name, a
    split's new one its ``name`` or ``<platoon>_<position>``)."""
    from ..scenario.maneuvers_block import platoon_names as scenario_platoons

    names = dict(enumerate(scenario_platoons(scenario)))
    base = len(names)
    for index, request in enumerate(getattr(scenario, "maneuvers", None) or []):
        if request.type == "split":
            names[base + index] = request.name or f"{request.platoon}_{request.position}"
        elif request.type == "leave":
            names[base + index] = str(request.robot)
    return names
