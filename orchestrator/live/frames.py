"""Snapshots to the JSON messages the page reads (done in the sender thread, never in the scheduler's).

Messages (one JSON object per websocket text message):

- ``{"type": "roster", "version", "robots": [{"id", "name", "platoon", "position", "predecessor"}]}``: sent on
  connect and after every spawn or despawn;
- ``{"type": "frame", "t_ns", "end_ns", "final", "roster", "ids", "x", "y", "yaw", "v", "gap", "links",
  "link_window_s"}``: the robots' ground truth at ``t_ns`` (rear-axle point, SI units, roster order), ``gap`` the
  distance from each robot's rear axle to its predecessor's (null without a live predecessor), and ``links`` as
  ``[sender, receiver, received, lost]`` over the last ``link_window_s`` of simulation time.

Floats are written with Python's shortest round-trip repr, so the page holds the very doubles of the trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from core.ports import V2X_EVENTS, V2X_OUTCOMES
from core.robots import RobotSpec

from .snapshot import Snapshot

_RX = V2X_EVENTS.index("rx")
_RECEIVED = V2X_OUTCOMES.index("received")
_EMPTY = np.empty(0, np.int64)


def roster_message(specs: Sequence[RobotSpec], version: int) -> str:
    """The live robots: names, platoons and predecessors (what the page needs to label and colour them)."""
    robots = [{"id": int(s.id), "name": s.name, "platoon": int(s.platoon), "position": int(s.position_in_platoon),
               "predecessor": None if s.predecessor is None else int(s.predecessor)} for s in specs]
    return json.dumps({"type": "roster", "version": version, "robots": robots}, allow_nan=False)


class LinkWindow:
    """Receptions and losses per (sender, receiver) over a sliding window of simulation time."""

    def __init__(self, window_ns: int) -> None:
        self.window_ns = window_ns
        self._t = _EMPTY
        self._sender = _EMPTY
        self._receiver = _EMPTY
        self._ok = np.empty(0, bool)

    def add(self, values: Iterable[tuple[int, dict[str, Any]]]) -> None:
        """Take ``v2x`` log values (rx rows: outcome received or lost) or ``cam_rx`` values (all received)."""
        parts = [self._t], [self._sender], [self._receiver], [self._ok]
        for _, value in values:
            if "outcome" in value:
                rx = np.asarray(value["event"]) == _RX
                t = np.asarray(value["t_ns"])[rx]
                ok = np.asarray(value["outcome"])[rx] == _RECEIVED
            else:
                rx = slice(None)
                t = np.asarray(value["received_ns"])
                ok = np.ones(len(t), bool)
            for part, column in zip(parts, (t, np.asarray(value["sender"])[rx], np.asarray(value["receiver"])[rx], ok),
                                    strict=True):
                part.append(column)
        self._t, self._sender, self._receiver, self._ok = (np.concatenate(p) for p in parts)

    def counts(self, t_ns: int) -> list[list[int]]:
        """``[sender, receiver, received, lost]`` for every pair heard from or lost within the window ending at
        ``t_ns``; older rows are dropped."""
        keep = self._t > t_ns - self.window_ns
        self._t, self._sender, self._receiver, self._ok = (a[keep] for a in (self._t, self._sender, self._receiver,
                                                                                self._ok))
        if not len(self._t):
            return []
        pairs, inverse = np.unique(np.stack([self._sender, self._receiver], axis=1), axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        received = np.bincount(inverse, weights=self._ok, minlength=len(pairs)).astype(np.int64)
        total = np.bincount(inverse, minlength=len(pairs))
        return [[int(s), int(r), int(k), int(n - k)] for (s, r), k, n in zip(pairs, received, total, strict=True)]


def frame_message(snap: Snapshot, predecessors: dict[int, int | None], links: LinkWindow) -> str:
    """One frame: the robots at ``snap.t_ns`` and the V2X links of the window ending then."""
    links.add(snap.v2x)
    state = snap.state
    frame: dict[str, Any] = {"type": "frame", "t_ns": snap.t_ns, "end_ns": snap.end_ns, "final": snap.final,
                             "roster": snap.roster_version, "link_window_s": links.window_ns / 1e9}
    if state is None or not len(state["id"]):
        frame.update(ids=[], x=[], y=[], yaw=[], v=[], gap=[])
    else:
        ids = np.asarray(state["id"])
        x, y = np.asarray(state["x"], np.float64), np.asarray(state["y"], np.float64)
        frame.update(ids=ids.tolist(), x=_floats(x), y=_floats(y), yaw=_floats(state["yaw"]), v=_floats(state["v"]),
                     gap=_gaps(ids, x, y, predecessors))
    frame["links"] = links.counts(snap.t_ns)
    return json.dumps(frame, allow_nan=False)


def _floats(values: Any) -> list[float | None]:
    """A column as JSON numbers; a non-finite value (a plug-in's broken state) becomes null rather than failing."""
    array = np.asarray(values, np.float64)
    if np.isfinite(array).all():
        return array.tolist()
    return [float(v) if np.isfinite(v) else None for v in array]


def _gaps(ids: np.ndarray, x: np.ndarray, y: np.ndarray, predecessors: dict[int, int | None]) -> list[float | None]:
    """Rear axle to the predecessor's rear axle [m]; None for a leader or a predecessor not alive."""
    row = {int(rid): k for k, rid in enumerate(ids)}
    gaps: list[float | None] = []
    for rid in ids.tolist():
        pred = predecessors.get(rid)
        ahead = None if pred is None else row.get(pred)
        gap = None if ahead is None else float(np.hypot(x[ahead] - x[row[rid]], y[ahead] - y[row[rid]]))
        gaps.append(gap if gap is not None and np.isfinite(gap) else None)
    return gaps
