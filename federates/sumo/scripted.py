"""Lane changes the scenario tells SUMO's vehicles to make at given times (``lane_changes``), e.g. a cut-in, and what
became of each.

Each is SUMO's own ``vehicle.changeLane(id, lane, duration)``, given at ``t_s`` before SUMO's step from ``t_s`` to
``t_s + period_s``; with ``mode`` the vehicle's lane change mode is set first (``vehicle.setLaneChangeMode``).
SUMO's lane-change model carries it out: with SUMO's default mode (1621) it still respects the safe gaps of the
vehicles on the target lane and adapts its speed to find one ("lane change mode (0xb6)", bits 9-8, in SUMO's TraCI
documentation "Change Vehicle State"); the vType's ``lcAssertive`` divides the gaps it requires. Without the
sublane model the vehicle is in the new lane after one step; with it (``lateral_resolution_m``) it moves sideways
at the vType's ``maxSpeedLat``.

SUMO says nothing when it does not do as told: a request it cannot fulfil within its duration simply lapses. So
every SUMO step the vehicle's lane and lateral position are compared with the step before, and each request ends
as an event (``LANE_CHANGE_EVENTS``):

- ``lane_change_requested`` when SUMO is told;
- ``lane_change_delayed`` (once per request) at the first SUMO step in which the vehicle, not yet on the target
  lane, came no closer to it, with SUMO's reason (``getLaneChangeStatePretty``, e.g. ``blocked by left follower``);
- ``lane_change_done`` at the first SUMO step that has the vehicle's reference point (the middle of its front
  bumper) on the target lane;
- ``lane_change_refused`` when the request ended (its duration passed, the vehicle left the network, or a later
  entry replaced it) without that.

A delayed or refused request is also one line of ``unmet_requests()``, which the run puts into ``run.json``'s
``notes`` and ``outcomes.unmet_requests`` (``coopsim run --strict`` then exits with code 3).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.timebase import seconds_to_ns

from .params import LaneChange

LOG = logging.getLogger("coopsim.sumo")

LANE_CHANGE_EVENTS = ("lane_change_requested", "lane_change_delayed", "lane_change_done", "lane_change_refused")
"""Event names the federate's ``traffic`` port uses for scripted lane changes."""

LATERAL_PROGRESS_M = 1e-3
"""[m] the least sideways move towards the target lane within a SUMO step that counts as progress (SUMO's positions
are exact; this only keeps rounding from counting)."""


@dataclass(frozen=True)
class LaneChangeEvent:
    """One event of a scripted lane change: ``t_ns`` the instant whose SUMO state showed it, ``vehicle`` SUMO's id."""

    t_ns: int
    vehicle: str
    event: str
    lane_from: int
    lane_to: int
    detail: str = ""


@dataclass
class _Pending:
    """A request SUMO holds: where the vehicle was, and until when."""

    index: int
    change: LaneChange
    lane_from: int
    lane: int  # lane and lateral offset in it [m] after the previous SUMO step
    lateral_m: float
    end_ns: int
    delayed_at_ns: int | None = None
    why_delayed: str = ""


class LaneChangeScript:
    """The scenario's lane changes in time order: each given to SUMO once at its time, then watched until it is done
    or refused."""

    def __init__(self, changes: Sequence[LaneChange]) -> None:
        # (time [ns], index in the scenario's list, change): the index names it in errors
        self._due = sorted(((seconds_to_ns(c.t_s), k, c) for k, c in enumerate(changes)), key=lambda d: d[:2])
        self._next = 0
        self._pending: dict[str, _Pending] = {}  # SUMO id -> its latest request (SUMO keeps one per vehicle)
        self.issued = 0
        self._unmet: list[str] = []  # one line per request that ended delayed or refused, in the order they ended

    @property
    def unmet(self) -> list[str]:
        """One line per request SUMO delayed or refused: those that ended, then those still held back."""
        return [*self._unmet, *(f"{_name(p.index, p.change)}: SUMO held back '{vid}' (lane {p.lane_from} to "
                                f"{p.change.lane}) from {p.delayed_at_ns / 1e9:.1f} s: {p.why_delayed}; not on lane "
                                f"{p.change.lane} when the run ended"
                                for vid, p in self._pending.items() if p.delayed_at_ns is not None)]

    def issue(self, sumo: Any, t_ns: int) -> list[LaneChangeEvent]:
        """Give SUMO every lane change due at or before ``t_ns`` (SUMO's state is the one at ``t_ns``); returns their
        ``lane_change_requested`` events (and the refusal of a request a new one replaces)."""
        events: list[LaneChangeEvent] = []
        while self._next < len(self._due) and self._due[self._next][0] <= t_ns:
            _, k, change = self._due[self._next]
            self._next += 1
            vid = change.vehicle
            where = _name(k, change)
            if vid not in sumo.vehicle.getIDList():
                raise ValueError(f"{where}: SUMO vehicle '{vid}' is not on the road (not departed yet, or arrived)")
            edge = sumo.vehicle.getRoadID(vid)
            lanes = sumo.edge.getLaneNumber(edge)
            if change.lane >= lanes:
                raise ValueError(f"{where}: lane {change.lane} does not exist on edge '{edge}' of vehicle '{vid}' "
                                 f"(lanes 0 to {lanes - 1})")
            old = self._pending.pop(vid, None)
            if old is not None:
                events.append(self._refuse(old, t_ns, vid, f"replaced by {where}"))
            if change.mode is not None:
                sumo.vehicle.setLaneChangeMode(vid, change.mode)
            lane = int(sumo.vehicle.getLaneIndex(vid))
            sumo.vehicle.changeLane(vid, change.lane, change.duration_s)
            self.issued += 1
            self._pending[vid] = _Pending(k, change, lane, lane, float(sumo.vehicle.getLateralLanePosition(vid)),
                                          t_ns + seconds_to_ns(change.duration_s))
            events.append(LaneChangeEvent(t_ns, vid, LANE_CHANGE_EVENTS[0], lane, change.lane))
            LOG.info("%s: SUMO vehicle %s told to change from lane %d to lane %d on %s", where, vid, lane,
                     change.lane, edge)
        return events

    def watch(self, sumo: Any, t_ns: int) -> list[LaneChangeEvent]:
        """After SUMO's step to ``t_ns``: the requests that were delayed, done or refused in it."""
        if not self._pending:
            return []
        events: list[LaneChangeEvent] = []
        present = set(sumo.vehicle.getIDList())
        for vid, p in list(self._pending.items()):
            if vid not in present:
                del self._pending[vid]
                events.append(self._refuse(p, t_ns, vid, "the vehicle left the network"))
                continue
            lane = int(sumo.vehicle.getLaneIndex(vid))
            lateral = float(sumo.vehicle.getLateralLanePosition(vid))
            if lane == p.change.lane:
                del self._pending[vid]
                detail = ""
                if p.delayed_at_ns is not None:
                    detail = (f"{(t_ns - seconds_to_ns(p.change.t_s)) / 1e9:.1f} s after the request "
                              f"(held back from {p.delayed_at_ns / 1e9:.1f} s: {p.why_delayed})")
                    self._unmet.append(f"{_name(p.index, p.change)}: SUMO held back '{vid}' (lane {p.lane_from} to "
                                       f"{p.change.lane}) from {p.delayed_at_ns / 1e9:.1f} s: {p.why_delayed}; it "
                                       f"reached lane {p.change.lane} at {t_ns / 1e9:.1f} s")
                events.append(LaneChangeEvent(t_ns, vid, LANE_CHANGE_EVENTS[2], p.lane_from, p.change.lane, detail))
                continue
            towards = 1 if p.change.lane > p.lane_from else -1  # lane indices grow to the left, like lateral offsets
            moved = (lane - p.lane) * towards > 0 or (lane == p.lane and
                                                      (lateral - p.lateral_m) * towards > LATERAL_PROGRESS_M)
            p.lane, p.lateral_m = lane, lateral
            if t_ns >= p.end_ns:
                del self._pending[vid]
                events.append(self._refuse(p, t_ns, vid, f"still on lane {lane} when the request ended "
                                           f"({_reason(sumo, vid, towards)})"))
            elif not moved and p.delayed_at_ns is None:
                p.delayed_at_ns, p.why_delayed = t_ns, _reason(sumo, vid, towards)
                events.append(LaneChangeEvent(t_ns, vid, LANE_CHANGE_EVENTS[1], p.lane_from, p.change.lane,
                                              p.why_delayed))
        return events

    def _refuse(self, p: _Pending, t_ns: int, vid: str, why: str) -> LaneChangeEvent:
        self._unmet.append(f"{_name(p.index, p.change)}: SUMO did not move '{vid}' from lane {p.lane_from} to lane "
                           f"{p.change.lane}: {why}")
        LOG.warning("%s", self._unmet[-1])
        return LaneChangeEvent(t_ns, vid, LANE_CHANGE_EVENTS[3], p.lane_from, p.change.lane, why)


def _name(index: int, change: LaneChange) -> str:
    return f"lane_changes[{index}] at {change.t_s} s"


_MOTIVES = frozenset(("stay", "left", "right", "strategic", "cooperative", "speedGain", "keepRight", "TraCI",
                      "urgent", "sublane"))
"""Names in SUMO's lane-change state that say why and where a vehicle wants to change, not what stops it."""


def _reason(sumo: Any, vid: str, direction: int) -> str:
    """SUMO's own words on what stops a change in ``direction`` (1 left, -1 right) as the TraCI request sees it,
    e.g. ``blocked by right follower`` (``vehicle.getLaneChangeStatePretty``: the state after the request)."""
    try:
        _, with_request = sumo.vehicle.getLaneChangeStatePretty(vid, direction)
    except Exception:  # libsumo and TraCI raise their own TraCIException
        return "SUMO gave no reason"
    return ", ".join(w for w in with_request if w not in _MOTIVES) or "SUMO gave no reason"
