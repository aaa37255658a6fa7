"""The maneuver layer's codes and records: states and roles as small integers (they travel in the platooning
message), the requests, lanes, actions and per-step output of ``machine.ManeuverMachine``, and its per-row arrays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from core.ports import MANEUVER_STATES

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
