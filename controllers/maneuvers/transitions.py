"""The maneuver state machine's transitions: each waiting state moves on when its partner's message says so
(a mixin of ``machine.ManeuverMachine``: it reads and writes the machine's per-row arrays)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .codes import (
    _HELD,
    ABORTED,
    ACCEPT,
    FOLLOWER,
    FREE,
    GAP_OPEN,
    GAP_OPENING,
    IDLE,
    JOIN_MOVE,
    JOIN_REQUEST,
    JOINED,
    LANE_CHANGE,
    LEAVE_REQUEST,
    LEFT,
    MERGE_REQUEST,
    MERGING,
    SPLIT_REQUEST,
    SPLITTING,
    WATCH,
)


@dataclass(frozen=True)
class _Pass:
    """What one pass reads: the instant, the messages heard, the states at its start (every row moves at most one
    state per pass) and the per-row conditions of this step."""

    t_ns: int
    t: float
    msg: Mapping[str, np.ndarray]
    ego: Mapping[str, np.ndarray]
    st: np.ndarray
    m_state: np.ndarray
    to_me: np.ndarray
    gap_done: np.ndarray
    join: np.ndarray
    leave: np.ndarray
    split: np.ndarray
    merge: np.ndarray
    pred_wanted: np.ndarray
    aligned: np.ndarray
    lane_done: np.ndarray
    extra: np.ndarray

    def heard(self, code: int, addressed: bool = True) -> np.ndarray:
        """Rows whose partner's message is in state ``code`` (and, when ``addressed``, names the row as its peer)."""
        got = self.m_state == code
        return got & self.to_me if addressed else got


class Transitions:
    """The ``_transitions`` pass of ``ManeuverMachine.step``."""

    # -- transitions --------------------------------------------------------------------------------------------
    def _transitions(self, t_ns: int, t: float, msg: Mapping[str, np.ndarray], ego: Mapping[str, np.ndarray],
                     front: Mapping[str, np.ndarray], pred_wanted: np.ndarray, leader_wanted: np.ndarray,
                     aligned: np.ndarray, lane_done: np.ndarray, extra: np.ndarray) -> None:
        """Move every row on by what its partner's message says: aborts first, then the leader's part, then each
        maneuver's steps, then final states held long enough become idle."""
        a = self.a
        m_state = np.nan_to_num(msg["maneuver"], nan=-1.0)
        to_me = msg["maneuver_peer"] == self.ids
        gap_done = t >= a["gap_t0"] + a["gap_T"]
        types = a["rtype"]
        join, leave, split, merge = (types == k for k in range(4))
        # partners that aborted
        active = ~np.isin(a["st"], _HELD)
        for row in np.flatnonzero(active & (m_state == ABORTED)):
            self._abort(int(row), t_ns, t, "partner_aborted", ego)
        p = _Pass(t_ns, t, msg, ego, a["st"].copy(), m_state, to_me, gap_done, join, leave, split, merge, pred_wanted,
                  aligned, lane_done, extra)
        self._leader_part(p)
        self._join_steps(p)
        self._leave_steps(p)
        self._split_steps(p)
        self._merge_steps(p)
        self._release_final(p)

    def _leader_part(self, p: _Pass) -> None:
        """The leader accepts a request addressed to it; its part ends when its partner is done."""
        st, t_ns = p.st, p.t_ns
        for code in (JOIN_REQUEST, LEAVE_REQUEST, MERGE_REQUEST):
            for row in np.flatnonzero((st == WATCH) & p.heard(code)):
                self._set(int(row), ACCEPT, t_ns)
                self._event(t_ns, int(row), "accepted")
        for row in np.flatnonzero((st == ACCEPT) & (p.heard(JOINED, False) | p.heard(LEFT, False))):
            self._set(int(row), IDLE, t_ns, -1)
        for row in np.flatnonzero((st == SPLIT_REQUEST) & p.heard(SPLITTING, False)):
            self._set(int(row), IDLE, t_ns, -1)

    def _join_steps(self, p: _Pass) -> None:
        """Join: the joiner moves beside the gap its opener makes, changes lane into it and joins; the opener
        then follows the joiner."""
        a, st, t_ns, t, ego, join = self.a, p.st, p.t_ns, p.t, p.ego, p.join
        for row in np.flatnonzero(join & (st == JOIN_REQUEST) & p.heard(ACCEPT)):
            row = int(row)
            request = self._by_index[int(a["req"][row])]
            rows = self.members(request.platoon)
            k = int(a["aux"][row])
            opener = int(self.ids[rows[k]]) if k < len(rows) else int(self.ids[rows[0]])
            self._set(row, JOIN_MOVE, t_ns, opener)
            self._make_free(row, t, ego, request.platoon)
        for row in np.flatnonzero(join & (st == WATCH) & p.heard(JOIN_MOVE, False)
                                  & (p.msg["platoon_id"] == a["pid"]) & (p.msg["platoon_index"] == a["pidx"])):
            self._open_gap_for_joiner(int(row), t_ns, t, ego)
        for row in np.flatnonzero(join & (st == GAP_OPENING) & p.gap_done):
            self._set(int(row), GAP_OPEN, t_ns)
            self._event(t_ns, int(row), "gap_open")
        move_on = join & (st == JOIN_MOVE) & p.aligned
        request_rows = {int(q): self.members(self._by_index[int(q)].platoon) for q in np.unique(a["req"][move_on])}
        for row in np.flatnonzero(move_on):
            row = int(row)
            rows = request_rows[int(a["req"][row])]
            at_tail = int(a["aux"][row]) >= len(rows)
            if at_tail or p.heard(GAP_OPEN)[row]:
                request = self._by_index[int(a["req"][row])]
                lane = self.lanes[request.platoon]
                self._lane(row, t, lane.path, lane.offset)
                self._set(row, LANE_CHANGE, t_ns)
                self._event(t_ns, row, "lane_change")
        for row in np.flatnonzero(join & (st == LANE_CHANGE) & p.lane_done & (a["role"] == FREE)):
            self._joined(int(row), t_ns)
        for row in np.flatnonzero(join & (st == GAP_OPEN) & p.heard(JOINED)):
            row = int(row)
            self._act("pred", row, int(a["peer"][row]))
            a["gap_from"][row] = a["gap_to"][row] = 0.0  # its gap is now the joiner's
            self._set(row, IDLE, t_ns, -1)

    def _open_gap_for_joiner(self, row: int, t_ns: int, t: float, ego: Mapping[str, np.ndarray]) -> None:
        """The opener's gap: its law's desired gap, plus the joiner's length when the law measures bumpers."""
        a = self.a
        joiner = self._row(int(a["peer"][row]))
        size = float(a["length"][joiner]) if joiner >= 0 else 0.0
        law = self.law_of(int(a["pid"][row]))  # the law the joiner will follow with
        gap = float(np.asarray(law.desired_gap(ego["v"][[row]]), float)[0])
        self._gap(row, t, gap + (size if getattr(law, "gap_reference", "axle") == "bumper" else 0.0))
        self._set(row, GAP_OPENING, t_ns)
        self._event(t_ns, row, "gap_opening")

    def _leave_steps(self, p: _Pass) -> None:
        """Leave: the leaver opens a gap, changes lane and leaves; the vehicle behind follows the leaver's
        predecessor once the leaver changes lane, keeping the distance it has (the leaver is still beside it), and
        closes the gap once the leaver has left."""
        a, st, t_ns, t, ego, leave, pred_wanted = self.a, p.st, p.t_ns, p.t, p.ego, p.leave, p.pred_wanted
        for row in np.flatnonzero(leave & (st == LEAVE_REQUEST) & p.heard(ACCEPT)):
            row = int(row)
            law = self.law_of(int(a["pid"][row]), int(self.ids[row]))  # the leaver's own gap
            self._gap(row, t, float(np.asarray(law.desired_gap(ego["v"][[row]]), float)[0]))
            self._set(row, GAP_OPENING, t_ns)
            self._event(t_ns, row, "gap_opening")
        for row in np.flatnonzero(leave & (st == GAP_OPENING) & p.gap_done):
            self._change_lane_out(int(row), t_ns, t, ego)
        for row in np.flatnonzero(leave & (st == LANE_CHANGE) & p.lane_done & (a["role"] == FOLLOWER)):
            self._left(int(row), t_ns, t, ego)
        for row in np.flatnonzero(leave & (st == WATCH) & p.heard(LANE_CHANGE, False) & (pred_wanted != a["aux"])):
            row = int(row)
            self._act("pred", row, int(a["aux"][row]))
            self._gap(row, t, 0.0, wait=int(a["aux"][row]))
            a["gap_hold"][row] = True
        for row in np.flatnonzero(leave & (st == WATCH) & p.heard(LEFT, False)):
            row = int(row)
            if pred_wanted[row] != a["aux"][row]:
                self._act("pred", row, int(a["aux"][row]))
            a["gap_hold"][row] = False
            self._gap(row, t, 0.0, wait=int(a["aux"][row]) if a["gap_lazy"][row] else -1)
            self._set(row, IDLE, t_ns, -1)

    def _change_lane_out(self, row: int, t_ns: int, t: float, ego: Mapping[str, np.ndarray]) -> None:
        """The leaver's lane change: to the requested offset, else two vehicle widths beside its lane."""
        a = self.a
        request = self._by_index[int(a["req"][row])]
        lane = self.lanes[int(a["pid"][row])]
        a["lane_path"][row] = lane.path
        a["lane_now"][row] = self._offset_on(lane.path, ego["x"][row], ego["y"][row])
        to = request.lane_offset_m if request.lane_offset_m is not None else lane.offset - 2.0 * a["width"][row]
        a["aux2"][row] = round(lane.offset * 1e6)  # where it came from, in micrometres (for an abort)
        self._lane(row, t, lane.path, to)
        self._set(row, LANE_CHANGE, t_ns)
        self._event(t_ns, row, "lane_change")

    def _split_steps(self, p: _Pass) -> None:
        """Split: the new leader keeps a gap to the platoon ahead until it is open; the vehicles behind it follow
        it as their leader."""
        a, st, t_ns, split = self.a, p.st, p.t_ns, p.split
        for row in np.flatnonzero(split & (st == WATCH) & p.heard(SPLIT_REQUEST)):
            row = int(row)
            request = self._by_index[int(a["req"][row])]
            self._act("leader", row, int(p.pred_wanted[row]))  # it keeps a gap to the platoon ahead, ACC-like
            a["pid"][row] = request.new_platoon
            a["pidx"][row] = 0
            self._gap(row, p.t, p.extra[row] + self.s.split_time_gap_s * float(p.ego["v"][row]))
            self._set(row, SPLITTING, t_ns)
            self._event(t_ns, row, "accepted")
        for row in np.flatnonzero(split & (st == SPLITTING) & p.gap_done):
            self._event(t_ns, int(row), "completed")
            self._set(int(row), IDLE, t_ns, -1)
        for row in np.flatnonzero(split & (st == WATCH) & p.heard(SPLITTING, False)):
            row = int(row)
            self._act("leader", row, int(a["peer"][row]))
            a["pid"][row] = int(p.msg["platoon_id"][row])
            a["pidx"][row] -= int(a["aux"][row])
            self._set(row, IDLE, t_ns, -1)

    def _merge_steps(self, p: _Pass) -> None:
        """Merge: the rear platoon's leader closes up to the front platoon (a follower made leader by a split
        closes its extra gap); its followers then follow the front platoon's leader."""
        a, st, t_ns, merge = self.a, p.st, p.t_ns, p.merge
        for row in np.flatnonzero(merge & (st == MERGE_REQUEST) & p.heard(ACCEPT)):
            row = int(row)
            self._set(row, MERGING, t_ns)
            self._act("pred", row, int(a["front"][row]))
            if a["role"][row] == FOLLOWER:  # a leader made by a split: close its extra gap
                self._gap(row, p.t, 0.0)
            else:
                self._make_free(row, p.t, p.ego, int(a["pid"][row]))
        merging = merge & (st == MERGING)
        done = merging & np.where(a["role"] == FOLLOWER, p.gap_done, p.aligned)
        for row in np.flatnonzero(done):
            self._merged(int(row), t_ns)
        for row in np.flatnonzero(merge & (st == WATCH) & p.heard(JOINED, False)):
            row = int(row)
            self._act("leader", row, int(a["aux2"][row]))
            a["pid"][row] = int(p.msg["platoon_id"][row])
            a["pidx"][row] += int(p.msg["platoon_index"][row])
            self._set(row, IDLE, t_ns, -1)

    def _release_final(self, p: _Pass) -> None:
        """Final states (joined, left, aborted) are held for ``hold_s``, then idle."""
        a = self.a
        held = np.isin(p.st, (JOINED, LEFT, ABORTED)) & (p.t_ns - a["since"] >= self.s.hold_s * 1e9)
        for row in np.flatnonzero(held):
            row = int(row)
            self._set(row, IDLE, p.t_ns, -1)
            a["req"][row] = -1
            a["rtype"][row] = -1
