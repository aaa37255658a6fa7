"""Lane changes the scenario tells SUMO's vehicles to make at given times (``lane_changes``), e.g. a cut-in.

Each is SUMO's own ``vehicle.changeLane(id, lane, duration)``, given at ``t_s`` before SUMO's step from ``t_s`` to
``t_s + period_s``. SUMO's lane-change model carries it out: by default it still respects the safe gaps of the
vehicles on the target lane and adapts its speed to find one ("laneChangeMode", bits 8-9, in SUMO's TraCI
documentation); the vType's ``lcAssertive`` lowers the gaps it accepts. Without the sublane model the vehicle is in
the new lane after one step; with it (``lateral_resolution_m``) it moves sideways at the vType's ``maxSpeedLat``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from orchestrator.core.timebase import seconds_to_ns

from .params import LaneChange

LOG = logging.getLogger("coopsim.sumo")


class LaneChangeScript:
    """The scenario's lane changes in time order, each given to SUMO once at its time."""

    def __init__(self, changes: Sequence[LaneChange]) -> None:
        # (time [ns], index in the scenario's list, change): the index names it in errors
        self._due = sorted(((seconds_to_ns(c.t_s), k, c) for k, c in enumerate(changes)), key=lambda d: d[:2])
        self._next = 0
        self.issued = 0

    def issue(self, sumo: Any, t_ns: int) -> None:
        """Give SUMO every lane change due at or before ``t_ns`` (SUMO's state is the one at ``t_ns``)."""
        while self._next < len(self._due) and self._due[self._next][0] <= t_ns:
            _, k, change = self._due[self._next]
            self._next += 1
            vid = change.vehicle
            where = f"lane_changes[{k}] at {change.t_s} s"
            if vid not in sumo.vehicle.getIDList():
                raise ValueError(f"{where}: SUMO vehicle '{vid}' is not on the road (not departed yet, or arrived)")
            edge = sumo.vehicle.getRoadID(vid)
            lanes = sumo.edge.getLaneNumber(edge)
            if change.lane >= lanes:
                raise ValueError(f"{where}: lane {change.lane} does not exist on edge '{edge}' of vehicle '{vid}' "
                                 f"(lanes 0 to {lanes - 1})")
            sumo.vehicle.changeLane(vid, change.lane, change.duration_s)
            self.issued += 1
            LOG.info("%s: SUMO vehicle %s told to change to lane %d on %s", where, vid, change.lane, edge)
