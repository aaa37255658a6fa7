"""How a maneuver ends: a robot made free, joined, gone or merged, timeouts and clean aborts (a mixin of
``machine.ManeuverMachine``)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .codes import (
    ABORTED,
    FOLLOWER,
    FREE,
    GAP_OPEN,
    GAP_OPENING,
    JOIN_MOVE,
    JOINED,
    LANE_CHANGE,
    LEFT,
    MERGING,
    SPLITTING,
    WATCH,
    PlatoonLane,
)


class Endings:
    """Completions, timeouts and aborts of ``ManeuverMachine``."""

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
