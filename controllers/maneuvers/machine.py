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
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from orchestrator.core.ports import MANEUVER_EVENTS, MANEUVER_REASONS, MANEUVER_STATES, MANEUVER_TYPES

from .lanes import LanePath, pursue_lane, quintic
from .slot import in_slot, slot_accel, slot_error

(IDLE, JOIN_REQUEST, ACCEPT, JOIN_MOVE, GAP_OPENING, GAP_OPEN, LANE_CHANGE, JOINED, LEAVE_REQUEST, LEFT,
 SPLIT_REQUEST, SPLITTING, MERGE_REQUEST, MERGING, ABORTED, WATCH) = range(len(MANEUVER_STATES))
DRIVER, FOLLOWER, FREE, EXTERNAL = range(4)
"""Roles: driven by its leader drive, a follower in a control group, driven here (slot or cruise), external."""

_HELD = (IDLE, JOINED, LEFT, ABORTED)  # states that wait for nothing


@dataclass(frozen=True)
class Request:
    """One scenario request with robots and platoons as ids (``platoon`` etc. are platoon ids, -1: none)."""

    index: int
    at_ns: int
    type: str
    robot: int = -1
    platoon: int = -1
    position: int = -1  # -1: the tail
    into: int = -1
    lane_offset_m: float | None = None
    new_platoon: int = -1  # split: the new platoon; leave: the leaver's own


@dataclass(frozen=True)
class PlatoonLane:
    """A platoon's lane: its reference path (index into the machine's paths) and offset [m] left of it."""

    path: int
    offset: float


class Action(NamedTuple):
    """A change for the federate: ``kind`` "pred" / "leader" / "peer" (whose messages robot ``robot`` uses: robot id
    ``value``, -1 none), "free" (the robot leaves its drive or group and is driven by the maneuver layer), "follow"
    (it becomes a follower in platoon ``value``'s control group)."""

    kind: str
    robot: int
    value: int


class ManeuverOutput(NamedTuple):
    """One step's decisions, over the federate's rows."""

    actions: list[Action]
    accel: np.ndarray  # [m/s^2] for rows driven here (FREE), NaN elsewhere
    yaw_rate: np.ndarray  # [rad/s] where the lane is steered here, NaN elsewhere
    extra_gap: np.ndarray  # [m] added to a follower's desired gap (0: none)


_ROW_FIELDS: dict[str, tuple[Any, Any]] = {  # per-row arrays: dtype and fill of new rows
    "role": (np.uint8, DRIVER), "pid": (np.int64, -1), "pidx": (np.int64, 0), "st": (np.uint8, IDLE),
    "peer": (np.int64, -1), "req": (np.int64, -1), "rtype": (np.int64, -1), "since": (np.int64, 0),
    "front": (np.int64, -1), "limit": (np.float64, np.nan),
    "aux": (np.int64, -1), "aux2": (np.int64, -1), "lane_path": (np.int64, -1), "lane_from": (np.float64, 0.0),
    "lane_to": (np.float64, 0.0), "lane_t0": (np.float64, -np.inf), "lane_on": (np.bool_, False),
    "lane_now": (np.float64, np.nan), "gap_from": (np.float64, 0.0), "gap_to": (np.float64, 0.0),
    "gap_t0": (np.float64, -np.inf), "gap_lazy": (np.bool_, False), "gap_hold": (np.bool_, False),
    "gap_wait": (np.int64, -1), "gap_T": (np.float64, 1.0),
    "cruise_v": (np.float64, 0.0),
    "length": (np.float64, 0.0), "width": (np.float64, 0.0), "rear_overhang": (np.float64, 0.0),
}


class ManeuverMachine:
    """The state machines of all rows. ``settings``: a ``ManeuverSettings``-like object (attributes);
    ``paths``: the reference paths; ``lanes``: each platoon id's lane; ``law_of``: a platoon id's control law
    (its ``desired_gap`` and ``gap_reference`` size a slot)."""

    def __init__(self, requests: list[Request], settings: Any, paths: list[LanePath],
                 lanes: Mapping[int, PlatoonLane], law_of: Callable[[int], Any]) -> None:
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

    def _slot_distance(self, platoon: int, rows: np.ndarray, front_v: np.ndarray, front_rows_ro: np.ndarray
                       ) -> np.ndarray:
        """Rear axle to rear axle [m] that platoon ``platoon``'s law wants behind the vehicle ahead."""
        law = self.law_of(platoon)
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
                                                 dims_of(np.array([pred_wanted[r]])))[0] for r in lazy])
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

    # -- transitions --------------------------------------------------------------------------------------------
    def _transitions(self, t_ns: int, t: float, msg: Mapping[str, np.ndarray], ego: Mapping[str, np.ndarray],
                     front: Mapping[str, np.ndarray], pred_wanted: np.ndarray, leader_wanted: np.ndarray,
                     aligned: np.ndarray, lane_done: np.ndarray, extra: np.ndarray) -> None:
        a = self.a
        st = a["st"].copy()  # every row moves at most one state per step
        m_state = np.nan_to_num(msg["maneuver"], nan=-1.0)
        to_me = msg["maneuver_peer"] == self.ids
        gap_done = t >= a["gap_t0"] + a["gap_T"]
        types = a["rtype"]
        join, leave, split, merge = (types == k for k in range(4))

        def heard(code: int, addressed: bool = True) -> np.ndarray:
            got = m_state == code
            return got & to_me if addressed else got

        # partners that aborted
        active = ~np.isin(st, _HELD)
        for row in np.flatnonzero(active & heard(ABORTED, addressed=False)):
            self._abort(int(row), t_ns, t, "partner_aborted", ego)
        st = a["st"].copy()

        # the leader accepts a request addressed to it
        for code in (JOIN_REQUEST, LEAVE_REQUEST, MERGE_REQUEST):
            for row in np.flatnonzero((st == WATCH) & heard(code)):
                self._set(int(row), ACCEPT, t_ns)
                self._event(t_ns, int(row), "accepted")
        # the leader's part ends when its partner is done
        for row in np.flatnonzero((st == ACCEPT) & (heard(JOINED, False) | heard(LEFT, False))):
            self._set(int(row), IDLE, t_ns, -1)
        for row in np.flatnonzero((st == SPLIT_REQUEST) & heard(SPLITTING, False)):
            self._set(int(row), IDLE, t_ns, -1)

        # join
        for row in np.flatnonzero(join & (st == JOIN_REQUEST) & heard(ACCEPT)):
            row = int(row)
            request = self._by_index[int(a["req"][row])]
            rows = self.members(request.platoon)
            k = int(a["aux"][row])
            opener = int(self.ids[rows[k]]) if k < len(rows) else int(self.ids[rows[0]])
            self._set(row, JOIN_MOVE, t_ns, opener)
            self._make_free(row, t, ego, request.platoon)
        for row in np.flatnonzero(join & (st == WATCH) & heard(JOIN_MOVE, False)
                                  & (msg["platoon_id"] == a["pid"]) & (msg["platoon_index"] == a["pidx"])):
            row = int(row)
            joiner = self._row(int(a["peer"][row]))
            size = float(self.a["length"][joiner]) if joiner >= 0 else 0.0
            law = self.law_of(int(a["pid"][row]))
            gap = float(np.asarray(law.desired_gap(ego["v"][[row]]), float)[0])
            self._gap(row, t, gap + (size if getattr(law, "gap_reference", "axle") == "bumper" else 0.0))
            self._set(row, GAP_OPENING, t_ns)
            self._event(t_ns, row, "gap_opening")
        for row in np.flatnonzero(join & (st == GAP_OPENING) & gap_done):
            self._set(int(row), GAP_OPEN, t_ns)
            self._event(t_ns, int(row), "gap_open")
        move_on = join & (st == JOIN_MOVE) & aligned
        request_rows = {int(q): self.members(self._by_index[int(q)].platoon) for q in np.unique(a["req"][move_on])}
        for row in np.flatnonzero(move_on):
            row = int(row)
            rows = request_rows[int(a["req"][row])]
            at_tail = int(a["aux"][row]) >= len(rows)
            if at_tail or heard(GAP_OPEN)[row]:
                request = self._by_index[int(a["req"][row])]
                lane = self.lanes[request.platoon]
                self._lane(row, t, lane.path, lane.offset)
                self._set(row, LANE_CHANGE, t_ns)
                self._event(t_ns, row, "lane_change")
        for row in np.flatnonzero(join & (st == LANE_CHANGE) & lane_done & (a["role"] == FREE)):
            self._joined(int(row), t_ns)
        for row in np.flatnonzero(join & (st == GAP_OPEN) & heard(JOINED)):
            row = int(row)
            self._act("pred", row, int(a["peer"][row]))
            a["gap_from"][row] = a["gap_to"][row] = 0.0  # its gap is now the joiner's
            self._set(row, IDLE, t_ns, -1)

        # leave
        for row in np.flatnonzero(leave & (st == LEAVE_REQUEST) & heard(ACCEPT)):
            row = int(row)
            law = self.law_of(int(a["pid"][row]))
            self._gap(row, t, float(np.asarray(law.desired_gap(ego["v"][[row]]), float)[0]))
            self._set(row, GAP_OPENING, t_ns)
            self._event(t_ns, row, "gap_opening")
        for row in np.flatnonzero(leave & (st == GAP_OPENING) & gap_done):
            row = int(row)
            request = self._by_index[int(a["req"][row])]
            lane = self.lanes[int(a["pid"][row])]
            a["lane_path"][row] = lane.path
            a["lane_now"][row] = self._offset_on(lane.path, ego["x"][row], ego["y"][row])
            to = request.lane_offset_m if request.lane_offset_m is not None else lane.offset - 2.0 * a["width"][row]
            a["aux2"][row] = round(lane.offset * 1e6)  # where it came from, in micrometres (for an abort)
            self._lane(row, t, lane.path, to)
            self._set(row, LANE_CHANGE, t_ns)
            self._event(t_ns, row, "lane_change")
        for row in np.flatnonzero(leave & (st == LANE_CHANGE) & lane_done & (a["role"] == FOLLOWER)):
            self._left(int(row), t_ns, t, ego)
        # the vehicle behind follows the leaver's predecessor once the leaver changes lane, keeping the distance it
        # has (the leaver is still beside it), and closes the gap once the leaver has left
        for row in np.flatnonzero(leave & (st == WATCH) & heard(LANE_CHANGE, False) & (pred_wanted != a["aux"])):
            row = int(row)
            self._act("pred", row, int(a["aux"][row]))
            self._gap(row, t, 0.0, wait=int(a["aux"][row]))
            a["gap_hold"][row] = True
        for row in np.flatnonzero(leave & (st == WATCH) & heard(LEFT, False)):
            row = int(row)
            if pred_wanted[row] != a["aux"][row]:
                self._act("pred", row, int(a["aux"][row]))
            a["gap_hold"][row] = False
            self._gap(row, t, 0.0, wait=int(a["aux"][row]) if a["gap_lazy"][row] else -1)
            self._set(row, IDLE, t_ns, -1)

        # split
        for row in np.flatnonzero(split & (st == WATCH) & heard(SPLIT_REQUEST)):
            row = int(row)
            request = self._by_index[int(a["req"][row])]
            self._act("leader", row, int(pred_wanted[row]))  # it keeps a gap to the platoon ahead, ACC-like
            a["pid"][row] = request.new_platoon
            a["pidx"][row] = 0
            self._gap(row, t, extra[row] + self.s.split_time_gap_s * float(ego["v"][row]))
            self._set(row, SPLITTING, t_ns)
            self._event(t_ns, row, "accepted")
        for row in np.flatnonzero(split & (st == SPLITTING) & gap_done):
            self._event(t_ns, int(row), "completed")
            self._set(int(row), IDLE, t_ns, -1)
        for row in np.flatnonzero(split & (st == WATCH) & heard(SPLITTING, False)):
            row = int(row)
            self._act("leader", row, int(a["peer"][row]))
            a["pid"][row] = int(msg["platoon_id"][row])
            a["pidx"][row] -= int(a["aux"][row])
            self._set(row, IDLE, t_ns, -1)

        # merge
        for row in np.flatnonzero(merge & (st == MERGE_REQUEST) & heard(ACCEPT)):
            row = int(row)
            self._set(row, MERGING, t_ns)
            self._act("pred", row, int(a["front"][row]))
            if a["role"][row] == FOLLOWER:  # a leader made by a split: close its extra gap
                self._gap(row, t, 0.0)
            else:
                self._make_free(row, t, ego, int(a["pid"][row]))
        merging = merge & (st == MERGING)
        done = merging & np.where(a["role"] == FOLLOWER, gap_done, aligned)
        for row in np.flatnonzero(done):
            self._merged(int(row), t_ns)
        for row in np.flatnonzero(merge & (st == WATCH) & heard(JOINED, False)):
            row = int(row)
            self._act("leader", row, int(a["aux2"][row]))
            a["pid"][row] = int(msg["platoon_id"][row])
            a["pidx"][row] += int(msg["platoon_index"][row])
            self._set(row, IDLE, t_ns, -1)

        # final states are held, then idle
        for row in np.flatnonzero(np.isin(st, (JOINED, LEFT, ABORTED)) & (t_ns - a["since"] >= self.s.hold_s * 1e9)):
            row = int(row)
            self._set(row, IDLE, t_ns, -1)
            a["req"][row] = -1
            a["rtype"][row] = -1

    def _make_free(self, row: int, t: float, ego: Mapping[str, np.ndarray], platoon: int) -> None:
        """The robot is driven here from now on, keeping its lane (measured on ``platoon``'s path)."""
        a = self.a
        lane = self.lanes[platoon]
        a["lane_now"][row] = self._offset_on(lane.path, ego["x"][row], ego["y"][row])
        a["aux2"][row] = round(a["lane_now"][row] * 1e6)  # its own lane, in micrometres (for an abort)
        self._lane(row, t, lane.path, float(a["lane_now"][row]))
        a["cruise_v"][row] = ego["v"][row]
        if a["role"][row] != FREE:
            a["role"][row] = FREE
            self._act("free", row, -1)

    def _joined(self, row: int, t_ns: int) -> None:
        a = self.a
        request = self._by_index[int(a["req"][row])]
        k = int(a["aux"][row])
        rows = self.members(request.platoon)
        a["pidx"][rows[k:]] += 1  # the vehicles behind the slot move one position back
        a["pid"][row] = request.platoon
        a["pidx"][row] = k
        a["role"][row] = FOLLOWER
        a["lane_on"][row] = False
        a["front"][row] = -1
        self._act("follow", row, request.platoon)
        self._act("leader", row, int(self.ids[rows[0]]))
        self._set(row, JOINED, t_ns)
        self._event(t_ns, row, "completed")

    def _left(self, row: int, t_ns: int, t: float, ego: Mapping[str, np.ndarray]) -> None:
        a = self.a
        request = self._by_index[int(a["req"][row])]
        others = self.members(int(a["pid"][row]))
        others = others[others != row]
        a["pidx"][others[a["pidx"][others] > a["pidx"][row]]] -= 1
        self.lanes[request.new_platoon] = PlatoonLane(int(a["lane_path"][row]), float(a["lane_to"][row]))
        a["pid"][row] = request.new_platoon
        a["pidx"][row] = 0
        a["role"][row] = FREE
        a["cruise_v"][row] = ego["v"][row]
        a["gap_from"][row] = a["gap_to"][row] = 0.0
        self._act("free", row, -1)
        self._act("pred", row, -1)
        self._act("leader", row, -1)
        self._set(row, LEFT, t_ns)
        self._event(t_ns, row, "completed")

    def _merged(self, row: int, t_ns: int) -> None:
        a = self.a
        request = self._by_index[int(a["req"][row])]
        rows = self.members(request.into)
        if a["role"][row] == FREE:
            a["role"][row] = FOLLOWER
            a["lane_on"][row] = False
            self._act("follow", row, request.into)
        self._act("leader", row, int(self.ids[rows[0]]))
        a["pid"][row] = request.into
        a["pidx"][row] = len(rows)
        a["front"][row] = -1
        self._set(row, JOINED, t_ns)
        self._event(t_ns, row, "completed")

    # -- timeouts and aborts ------------------------------------------------------------------------------------
    def _timeouts(self, t_ns: int) -> None:
        a = self.a
        limit = np.where(np.isnan(a["limit"]), self._timeout_s[a["st"]], a["limit"])
        late = (t_ns - a["since"]) / 1e9 > limit
        for row in np.flatnonzero(late):
            self._abort(int(row), t_ns, t_ns / 1e9, "timeout", None)

    def _abort(self, row: int, t_ns: int, t: float, reason: str, ego: Mapping[str, np.ndarray] | None) -> None:
        """The robot gives its maneuver up and returns to a safe state: a joiner or merger cruises in its own
        lane, a leaver returns to its platoon's lane, a gap closes again; partners hear "aborted"."""
        a = self.a
        self._event(t_ns, row, "aborted", reason)
        state = int(a["st"][row])
        home = a["aux2"][row] / 1e6
        if a["role"][row] == FREE and state in (JOIN_MOVE, LANE_CHANGE, MERGING):
            a["front"][row] = -1
            if state == LANE_CHANGE:
                self._lane(row, t, int(a["lane_path"][row]), home)
        elif a["role"][row] == FOLLOWER and state in (GAP_OPENING, GAP_OPEN, LANE_CHANGE, WATCH, SPLITTING):
            if state == LANE_CHANGE:
                self._lane(row, t, int(a["lane_path"][row]), home)
            if state != SPLITTING:
                self._gap(row, t, 0.0)
        self._set(row, ABORTED, t_ns)

    def settle_lanes(self, t: float) -> None:
        """Followers steered back into their platoon's lane after an aborted leave hand the steering back."""
        a = self.a
        back = (a["role"] == FOLLOWER) & a["lane_on"] & (a["st"] != LANE_CHANGE) & \
            (t >= a["lane_t0"] + self.s.lane_change_s) & (np.abs(a["lane_now"] - a["lane_to"]) < 0.1 * a["width"])
        a["lane_on"][back] = False
