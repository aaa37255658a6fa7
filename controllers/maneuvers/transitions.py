"""The maneuver state machine's transitions: each waiting state moves on when its partner's message says so
(a mixin of ``machine.ManeuverMachine``: it reads and writes the machine's per-row arrays)."""

from __future__ import annotations

from collections.abc import Mapping

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


class Transitions:
    """The ``_transitions`` pass of ``ManeuverMachine.step``."""

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

