"""Every vehicle's maneuver state machine, as arrays over the control federate's rows (codes, not objects).

A vehicle moves on only when it has heard the message its state waits for (its partner's state, through the
channel); each waiting state has a timeout after which the vehicle aborts, which its partners hear in turn.
Sequences (Plexe, Segata et al.; /docs/platoons.md "Maneuvers"):

- join (robot J into platoon P at position k; k = size: the tail): J sends join_request to P's leader L; L sends
  accept; J sends join_move (platoon P, index k) and drives to its slot in its own lane; the vehicle O at k hears it
  and opens a gap (gap_opening -> gap_open); J, in its slot and having heard gap_open (at the tail: no O), changes
  lane (lane_change) and is joined: it follows k-1 and L, O follows J.
- leave (robot V): V sends leave_request to L; L accepts; V opens a gap (gap_opening), changes lane (lane_change)
  and has left (cruising in its lane); the vehicle behind V hears it and follows V's predecessor, closing the gap.
- split (P at k): L sends split_request to K (at k); K becomes the leader of a new platoon (splitting), keeping a
  larger gap to the vehicle ahead; its followers hear it and take K as their leader.
- merge (rear platoon R into front platoon F): R's leader sends merge_request to F's leader, which accepts; R's
  leader approaches F's tail (merging) and is joined; R's followers hear it and take F's leader as theirs.

Role changes and whose messages a vehicle uses come out of ``step`` as ``Action``s for the federate to apply.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from core.ports import MANEUVER_EVENTS, MANEUVER_REASONS, MANEUVER_STATES, MANEUVER_TYPES

from .codes import (
    _ROW_FIELDS,
    ACCEPT,
    DRIVER,
    EXTERNAL,
    FOLLOWER,
    FREE,
    GAP_OPEN,
    GAP_OPENING,
    IDLE,
    JOIN_MOVE,
    JOIN_REQUEST,
    LANE_CHANGE,
    LEAVE_REQUEST,
    MERGE_REQUEST,
    MERGING,
    SPLIT_REQUEST,
    SPLITTING,
    WATCH,
    Action,
    ManeuverOutput,
    PlatoonLane,
    Request,
)
from .endings import Endings
from .lanes import LanePath, pursue_lane, quintic
from .slot import in_slot, slot_accel, slot_error
from .transitions import Transitions


class ManeuverMachine(Transitions, Endings):
    """The state machines of all rows. ``settings``: a ``ManeuverSettings``-like object (attributes);
    ``paths``: the reference paths; ``lanes``: each platoon id's lane; ``law_of(platoon)``: the control law a follower
    joining that platoon runs, with the platoon's parameters (its ``desired_gap`` and ``gap_reference`` size a slot
    and the gap opened for a joiner); ``law_of(platoon, robot)``: a member's own law (a leaver's gap). Either is
    asked about one or a few robots at a time."""

    def __init__(self, requests: list[Request], settings: Any, paths: list[LanePath],
                 lanes: Mapping[int, PlatoonLane], law_of: Callable[..., Any]) -> None:
        self.requests = sorted(requests, key=lambda r: (r.at_ns, r.index))
        self._next = 0
        self.s = settings
        self.paths = paths
        self.lanes = dict(lanes)
        self.law_of = law_of
        self.ids = np.empty(0, np.int64)
        self.a: dict[str, np.ndarray] = {name: np.empty(0, dtype) for name, (dtype, _) in _ROW_FIELDS.items()}
        self._events: list[tuple[int, int, int, int, int, int, int, int]] = []
        self._actions: list[Action] = []
        self._type_of: dict[int, int] = {r.index: MANEUVER_TYPES.index(r.type) for r in requests}
        self._by_index = {r.index: r for r in requests}
        s = settings
        total = 2 * s.reply_timeout_s + s.move_timeout_s + s.gap_open_s + 2 * s.lane_change_s
        self._timeout_s = np.full(len(MANEUVER_STATES), np.inf)
        for state, limit in ((JOIN_REQUEST, s.reply_timeout_s), (LEAVE_REQUEST, s.reply_timeout_s),
                             (SPLIT_REQUEST, s.reply_timeout_s), (MERGE_REQUEST, s.reply_timeout_s),
                             (ACCEPT, total), (WATCH, total), (JOIN_MOVE, s.move_timeout_s),
                             (MERGING, s.move_timeout_s), (GAP_OPENING, s.gap_open_s + s.move_timeout_s),
                             (GAP_OPEN, s.move_timeout_s + 2 * s.lane_change_s + s.reply_timeout_s),
                             (LANE_CHANGE, 2 * s.lane_change_s + s.reply_timeout_s),
                             (SPLITTING, s.gap_open_s + s.move_timeout_s)):
            self._timeout_s[state] = limit

    def request(self, r: Request) -> None:
        """A request made while the run goes (a reaction to misbehaviour): started at the next step at or after
        ``r.at_ns``, after the scenario's requests due by then."""
        self.requests.insert(self._next + sum(q.at_ns <= r.at_ns for q in self.requests[self._next:]), r)
        self._type_of[r.index] = MANEUVER_TYPES.index(r.type)
        self._by_index[r.index] = r

    # -- rows ---------------------------------------------------------------------------------------------------
    def add(self, ids: np.ndarray, role: np.ndarray, platoon: np.ndarray, position: np.ndarray,
            dims: Mapping[str, np.ndarray], v: np.ndarray) -> None:
        """Rows for new robots at the end (``role``: ``DRIVER`` ... per robot; ``dims``: length_m, width_m,
        rear_overhang_m)."""
        n = len(ids)
        self.ids = np.concatenate([self.ids, np.asarray(ids, np.int64)])
        given = {"role": role, "pid": platoon, "pidx": position, "cruise_v": v, "length": dims["length_m"],
                 "width": dims["width_m"], "rear_overhang": dims["rear_overhang_m"]}
        for name, (dtype, fill) in _ROW_FIELDS.items():
            new = np.asarray(given[name], dtype) if name in given else np.full(n, fill, dtype)
            self.a[name] = np.concatenate([self.a[name], new])

    def remove(self, keep: np.ndarray) -> None:
        """Keeps the rows where ``keep`` is True."""
        self.ids = self.ids[keep]
        for name in _ROW_FIELDS:
            self.a[name] = self.a[name][keep]

    def _row(self, robot: int) -> int:
        found = np.flatnonzero(self.ids == robot)
        return int(found[0]) if len(found) else -1

    def members(self, platoon: int) -> np.ndarray:
        """Rows of a platoon, leader first."""
        rows = np.flatnonzero(self.a["pid"] == platoon)
        return rows[np.argsort(self.a["pidx"][rows], kind="stable")]

    # -- what travels -------------------------------------------------------------------------------------------
    def message(self) -> dict[str, np.ndarray]:
        """The platooning-message columns of every row: platoon id, index, state code (watch is sent as idle) and
        partner (NaN: none). A joiner on its way says the platoon and position it is joining."""
        a = self.a
        st = a["st"]
        pid = a["pid"].astype(np.float64)
        pidx = a["pidx"].astype(np.float64)
        joining = np.isin(st, (JOIN_REQUEST, JOIN_MOVE)) | ((st == LANE_CHANGE) & (a["role"] == FREE))
        for row in np.flatnonzero(joining):
            request = self._by_index[int(a["req"][row])]
            pid[row] = request.platoon
            pidx[row] = a["aux"][row]
        pid[pid < 0] = np.nan
        return {"platoon_id": pid, "platoon_index": pidx, "maneuver": np.where(st == WATCH, IDLE, st).astype(float),
                "maneuver_peer": np.where(a["peer"] >= 0, a["peer"], np.nan).astype(float)}

    def drain_events(self) -> dict[str, np.ndarray]:
        """The ``maneuver_events`` rows since the last call."""
        rows = self._events
        self._events = []
        cols = list(zip(*rows, strict=True)) if rows else [()] * 8
        out: dict[str, np.ndarray] = {}
        for k, (name, dtype) in enumerate((("t_ns", np.int64), ("request", np.int64), ("robot", np.int64),
                                           ("peer", np.int64), ("maneuver", np.uint8), ("event", np.uint8),
                                           ("state", np.uint8), ("reason", np.uint8))):
            out[name] = np.asarray(cols[k], dtype)
        return out

    def _event(self, t_ns: int, row: int, event: str, reason: str = "none") -> None:
        req = int(self.a["req"][row])
        self._events.append((t_ns, req, int(self.ids[row]), int(self.a["peer"][row]), self._type_of.get(req, 0),
                             MANEUVER_EVENTS.index(event), int(self.a["st"][row]), MANEUVER_REASONS.index(reason)))

    # -- helpers ------------------------------------------------------------------------------------------------
    def _set(self, row: int, state: int, t_ns: int, peer: int | None = None, limit: float = np.nan) -> None:
        """Moves ``row`` to ``state`` (``limit``: its timeout [s] when not the state's own)."""
        self.a["st"][row] = state
        self.a["since"][row] = t_ns
        self.a["limit"][row] = limit
        if peer is not None and peer != self.a["peer"][row]:
            self.a["peer"][row] = peer
            self._actions.append(Action("peer", int(self.ids[row]), int(peer)))

    def _act(self, kind: str, row: int, value: int) -> None:
        self._actions.append(Action(kind, int(self.ids[row]), int(value)))

    def _gap(self, row: int, t: float, to: float, wait: int = -1) -> None:
        """Starts a gap ramp from the present extra distance to ``to`` [m] (``wait``: from the excess the robot
        finds once it has data from its new predecessor, robot ``wait``). The ramp takes ``gap_open_s``, longer
        for a change of more than ``gap_rate_mps`` times that."""
        a = self.a
        a["gap_from"][row] = self._extra(t)[row]
        a["gap_to"][row] = to
        a["gap_t0"][row] = t
        a["gap_lazy"][row] = wait >= 0
        a["gap_wait"][row] = wait
        a["gap_T"][row] = self._ramp_s(abs(to - a["gap_from"][row]))

    def _ramp_s(self, change: np.ndarray | float) -> np.ndarray:
        return np.maximum(self.s.gap_open_s, np.abs(change) / self.s.gap_rate_mps)

    def _extra(self, t: float) -> np.ndarray:
        a = self.a
        q = quintic((t - a["gap_t0"]) / a["gap_T"])
        return a["gap_from"] + (a["gap_to"] - a["gap_from"]) * q

    def _lane(self, row: int, t: float, path: int, to: float, start: float | None = None) -> None:
        """Starts steering ``row`` onto lane ``to`` of ``path`` along a ramp from ``start`` (default: where it is)."""
        a = self.a
        a["lane_path"][row] = path
        a["lane_from"][row] = a["lane_now"][row] if start is None else start
        a["lane_to"][row] = to
        a["lane_t0"][row] = t
        a["lane_on"][row] = True

    def _offset_on(self, path: int, x: float, y: float) -> float:
        return float(self.paths[path].project(np.array([x]), np.array([y]))[1][0])

    def _slot_distance(self, platoon: int, rows: np.ndarray, front_v: np.ndarray, front_rows_ro: np.ndarray,
                       own: bool = False) -> np.ndarray:
        """Rear axle to rear axle [m] that platoon ``platoon``'s law wants behind the vehicle ahead: for a robot
        joining it (its slot), or with ``own`` for the one robot of ``rows``, a member that keeps its own law."""
        law = self.law_of(platoon, int(self.ids[rows[0]])) if own else self.law_of(platoon)
        gap = np.asarray(law.desired_gap(np.nan_to_num(front_v)), float)
        if getattr(law, "gap_reference", "axle") == "bumper":
            gap = gap + front_rows_ro + self.a["length"][rows] - self.a["rear_overhang"][rows]
        return gap

    # -- one step -----------------------------------------------------------------------------------------------
    def step(self, t_ns: int, ego: Mapping[str, np.ndarray], msg: Mapping[str, np.ndarray],
             front: Mapping[str, np.ndarray], pred_wanted: np.ndarray, leader_wanted: np.ndarray,
             dims_of: Callable[[np.ndarray], np.ndarray], wheel_kmax: np.ndarray) -> ManeuverOutput:
        """One control step. ``msg``: the newest message from each row's partner (``maneuver``,
        ``maneuver_peer``, ``platoon_id``, ``platoon_index``; NaN: none); ``front``: the newest sample of each
        row's predecessor (x, y, yaw, v); ``dims_of(ids)``: the rear overhang of robots; ``wheel_kmax``: the
        largest curvature each vehicle can drive [1/m]."""
        self._actions = []
        t = t_ns / 1e9
        a = self.a
        n = len(self.ids)
        while self._next < len(self.requests) and self.requests[self._next].at_ns <= t_ns:
            self._start(self.requests[self._next], t_ns, ego, pred_wanted, leader_wanted)
            self._next += 1

        # lanes: pure pursuit onto the (ramped) offset
        w = np.full(n, np.nan)
        on = np.flatnonzero(a["lane_on"])
        for path in np.unique(a["lane_path"][on]):
            rows = on[a["lane_path"][on] == path]
            tau = (t - a["lane_t0"][rows]) / self.s.lane_change_s
            offset = a["lane_from"][rows] + (a["lane_to"][rows] - a["lane_from"][rows]) * quintic(tau)
            w[rows], a["lane_now"][rows] = pursue_lane(
                self.paths[int(path)], ego["x"][rows], ego["y"][rows], ego["yaw"][rows], ego["v"][rows], offset,
                self.s.lookahead_time_s, self.s.min_lookahead_m, wheel_kmax[rows])
        lane_done = (t >= a["lane_t0"] + self.s.lane_change_s) & \
            (np.abs(a["lane_now"] - a["lane_to"]) < 0.05 * a["width"])

        # slots: joiners and merging leaders driven here
        slotting = (a["role"] == FREE) & (a["front"] >= 0) & np.isin(a["st"], (JOIN_MOVE, LANE_CHANGE, MERGING))
        s_err = np.full(n, np.nan)
        distance = np.full(n, np.nan)
        for row in np.flatnonzero(slotting):
            request = self._by_index[int(a["req"][row])]
            platoon = request.platoon if request.type == "join" else request.into
            rows = np.array([row])
            distance[row] = self._slot_distance(platoon, rows, front["v"][rows], dims_of(a["front"][rows]))[0]
        s_err[slotting] = slot_error(ego["x"][slotting], ego["y"][slotting], front["x"][slotting],
                                     front["y"][slotting], front["yaw"][slotting], distance[slotting])
        aligned = in_slot(s_err, ego["v"], front["v"], distance)

        extra = self._extra(t)
        if (a["st"] != IDLE).any():  # nothing waits for anything otherwise
            self._transitions(t_ns, t, msg, ego, front, pred_wanted, leader_wanted, aligned, lane_done, extra)
            self._timeouts(t_ns)

        # lazy gap ramps: start from the excess distance to the new predecessor, once it is known
        lazy = np.flatnonzero(a["gap_lazy"] & np.isfinite(front["x"]) & (pred_wanted == a["gap_wait"]))
        if len(lazy):
            gap = np.hypot(front["x"][lazy] - ego["x"][lazy], front["y"][lazy] - ego["y"][lazy])
            want = np.array([self._slot_distance(int(a["pid"][r]), np.array([r]), front["v"][[r]],
                                                 dims_of(np.array([pred_wanted[r]])), own=True)[0] for r in lazy])
            a["gap_from"][lazy] = np.maximum(0.0, gap - want)
            a["gap_to"][lazy] = np.where(a["gap_hold"][lazy], a["gap_from"][lazy], 0.0)
            a["gap_t0"][lazy] = t
            a["gap_T"][lazy] = self._ramp_s(a["gap_from"][lazy] - a["gap_to"][lazy])
            a["gap_lazy"][lazy] = False
        extra = self._extra(t)
        extra = np.where(a["gap_lazy"], 0.0, extra)

        accel = np.full(n, np.nan)
        free = a["role"] == FREE
        accel[free] = 0.1 * (a["cruise_v"][free] - ego["v"][free])  # cruise: hold the speed it had
        slotting &= free
        accel[slotting] = slot_accel(s_err[slotting], ego["v"][slotting], front["v"][slotting],
                                     self.s.approach_gain, self.s.speed_gain, self.s.max_accel_mps2,
                                     self.s.max_decel_mps2)
        a["cruise_v"][slotting] = ego["v"][slotting]
        w = np.where(a["lane_on"], w, np.nan)
        return ManeuverOutput(self._actions, accel, w, extra)

    # -- requests -----------------------------------------------------------------------------------------------
    def _refuse(self, request: Request, t_ns: int, robot_row: int, reason: str) -> None:
        self._events.append((t_ns, request.index, int(self.ids[robot_row]) if robot_row >= 0 else -1, -1,
                             MANEUVER_TYPES.index(request.type), MANEUVER_EVENTS.index("refused"),
                             int(self.a["st"][robot_row]) if robot_row >= 0 else IDLE,
                             MANEUVER_REASONS.index(reason)))

    def _start(self, r: Request, t_ns: int, ego: Mapping[str, np.ndarray], pred_wanted: np.ndarray,
               leader_wanted: np.ndarray) -> None:
        a = self.a
        t = t_ns / 1e9
        if r.type in ("join", "leave"):
            me = self._row(r.robot)
            if me < 0:
                return self._refuse(r, t_ns, -1, "not_applicable")
            home = self.members(int(a["pid"][me]))
        platoon = r.platoon
        if r.type == "leave":
            platoon = int(a["pid"][me])
        rows = self.members(platoon)
        involved = rows if r.type != "merge" else np.concatenate([rows, self.members(r.into)])
        if r.type == "join":
            involved = np.concatenate([involved, [me]])
        if not len(rows) or (r.type == "merge" and not len(self.members(r.into))):
            return self._refuse(r, t_ns, -1, "not_applicable")
        if (a["st"][involved] != IDLE).any() or (a["gap_t0"][involved] + a["gap_T"][involved] > t).any():
            return self._refuse(r, t_ns, int(rows[0]), "busy")
        a["rtype"][involved] = MANEUVER_TYPES.index(r.type)
        leader = int(rows[0])
        lid = int(self.ids[leader])
        if r.type == "join":
            k = len(rows) if r.position < 0 else r.position
            if len(home) != 1 or k > len(rows) or a["role"][me] not in (DRIVER, FREE):
                return self._refuse(r, t_ns, me, "not_applicable")
            a["req"][involved] = r.index
            a["aux"][me] = k  # the position it joins at
            a["front"][me] = self.ids[rows[k - 1]]
            self._act("pred", me, int(self.ids[rows[k - 1]]))
            reply = self.s.reply_timeout_s
            self._set(me, JOIN_REQUEST, t_ns, lid)
            self._set(leader, WATCH, t_ns, int(self.ids[me]), reply)
            if k < len(rows):
                self._set(int(rows[k]), WATCH, t_ns, int(self.ids[me]), 2 * reply)
            self._event(t_ns, me, "requested")
        elif r.type == "leave":
            i = int(a["pidx"][me])
            if i == 0 or a["role"][me] != FOLLOWER:
                return self._refuse(r, t_ns, me, "not_applicable")
            a["req"][involved] = r.index
            self._set(me, LEAVE_REQUEST, t_ns, lid)
            self._set(leader, WATCH, t_ns, int(self.ids[me]), self.s.reply_timeout_s)
            if i + 1 < len(rows):
                closer = int(rows[i + 1])
                a["aux"][closer] = pred_wanted[me]
                self._set(closer, WATCH, t_ns, int(self.ids[me]))
            self._event(t_ns, me, "requested")
        elif r.type == "split":
            k = r.position
            if k >= len(rows) or a["role"][rows[k]] != FOLLOWER:
                return self._refuse(r, t_ns, leader, "not_applicable")
            a["req"][involved] = r.index
            head = int(rows[k])
            self._set(leader, SPLIT_REQUEST, t_ns, int(self.ids[head]))
            self._set(head, WATCH, t_ns, lid, self.s.reply_timeout_s)
            for row in rows[k + 1:]:
                a["aux"][row] = k
                self._set(int(row), WATCH, t_ns, int(self.ids[head]), 2 * self.s.reply_timeout_s)
            self._event(t_ns, leader, "requested")
        else:  # merge: ``platoon`` is the rear one
            front_rows = self.members(r.into)
            if a["role"][leader] not in (DRIVER, FOLLOWER, FREE):
                return self._refuse(r, t_ns, leader, "not_applicable")
            a["req"][involved] = r.index
            front_leader = int(front_rows[0])
            a["front"][leader] = self.ids[front_rows[-1]]
            self._set(leader, MERGE_REQUEST, t_ns, int(self.ids[front_leader]))
            self._set(front_leader, WATCH, t_ns, lid, self.s.reply_timeout_s)
            for row in rows[1:]:
                a["aux2"][row] = self.ids[front_leader]
                self._set(int(row), WATCH, t_ns, lid)
            self._event(t_ns, leader, "requested")
        return None


__all__ = ["DRIVER", "EXTERNAL", "FOLLOWER", "FREE", "Action", "ManeuverMachine", "ManeuverOutput",
           "PlatoonLane", "Request"]
