"""Reactions to misbehaviour that the control federate carries out (``detection.reaction``; the V2X federate's
detector names the suspects on the ``suspicions`` port, ``federates.v2x.suspicions``).

A follower suspects its platoon when a message of its predecessor or of its leader (whom it listens to as it
receives) is judged misbehaving; the suspicion lasts ``hold_ns`` after the last such message.

- ``open_gap``: while it suspects, the follower multiplies its desired gap by ``gap_factor`` (its law's time gap
  and standstill distance alike: h v + r becomes factor (h v + r)); the extra distance, (factor - 1) times the
  law's desired gap, ramps at ``gap_rate_mps`` both ways. The law sees its predecessor that much closer than it is
  (its pose moved back along its heading for a law on the rear-axle pose, a shorter range for a law on the range
  sensor), as a gap opened for a maneuver is made.
- ``leave``: the follower requests the leave maneuver (``controllers.maneuvers``: it opens a gap, changes lane to
  ``lane_offset_m`` and drives on alone), again at most once per ``hold_ns`` while the machine refuses it (busy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from controllers.maneuvers.codes import FOLLOWER, IDLE, Request
from federates.v2x.suspicions import SUSPICIONS

REACTIVE_REQUESTS = 1_000_000
"""Request index of a reactive leave: this plus the leaver's robot id (the scenario's requests are 0, 1, ...)."""


class Reactions:
    """Per control row: until when it suspects its platoon [ns], the extra gap it keeps [m], when it last asked
    to leave [ns]."""

    port = SUSPICIONS

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.kind = str(config["reaction"])
        self.hold_ns = int(config["hold_ns"])
        self.factor = float(config.get("gap_factor", 2.0))
        self.rate = float(config.get("gap_rate_mps", 1.0))
        self.lane_offset_m = config.get("lane_offset_m")
        self.until = np.empty(0, np.int64)
        self.extra = np.empty(0)
        self.asked = np.empty(0, np.int64)

    def add(self, n: int) -> None:
        """Rows for new robots at the end."""
        self.until = np.concatenate([self.until, np.full(n, -1, np.int64)])
        self.extra = np.concatenate([self.extra, np.zeros(n)])
        self.asked = np.concatenate([self.asked, np.full(n, -(2**62), np.int64)])

    def keep(self, keep: np.ndarray) -> None:
        """Keeps the rows where ``keep`` is True."""
        self.until, self.extra, self.asked = self.until[keep], self.extra[keep], self.asked[keep]

    def hear(self, publications: Sequence[Mapping[str, np.ndarray]] | None, row_of_id: np.ndarray,
             pred_wanted: np.ndarray, leader_wanted: np.ndarray) -> None:
        """Suspicions since the last step: a row suspects when the sender is its predecessor or its leader."""
        for sus in publications or ():
            receiver = np.asarray(sus["receiver"], np.int64)
            inside = (receiver >= 0) & (receiver < len(row_of_id))
            rows = np.where(inside, row_of_id[np.where(inside, receiver, 0)], -1)
            ours = rows >= 0
            rows, sender, t_ns = rows[ours], np.asarray(sus["sender"], np.int64)[ours], \
                np.asarray(sus["t_ns"], np.int64)[ours]
            mine = (sender == pred_wanted[rows]) | (sender == leader_wanted[rows])
            np.maximum.at(self.until, rows[mine], t_ns[mine] + self.hold_ns)

    def suspects(self, t_ns: int) -> np.ndarray:
        """Per row: whether it suspects its platoon now."""
        return self.until > t_ns

    def gap(self, t_ns: int, rows: np.ndarray, desired_gap: np.ndarray, dt: float) -> np.ndarray:
        """open_gap: the extra distance of ``rows`` this step, ramped towards (factor - 1) x ``desired_gap`` while
        they suspect, towards 0 after. ``dt`` [s]: the time since these rows' last step (their controller's period,
        which may be a multiple of the federate's: the gap then moves that much further per call)."""
        target = np.where(self.until[rows] > t_ns, (self.factor - 1.0) * np.nan_to_num(desired_gap), 0.0)
        step = self.rate * dt
        self.extra[rows] = self.extra[rows] + np.clip(target - self.extra[rows], -step, step)
        return self.extra[rows]

    def leaves(self, t_ns: int, ids: np.ndarray, role: np.ndarray, state: np.ndarray, platoons: int
               ) -> list[Request]:
        """leave: a request for each suspecting follower that is idle and has not asked within ``hold_ns``."""
        rows = np.flatnonzero(self.suspects(t_ns) & (role == FOLLOWER) & (state == IDLE) &
                              (self.asked + self.hold_ns <= t_ns))
        self.asked[rows] = t_ns
        return [Request(index=REACTIVE_REQUESTS + int(ids[r]), at_ns=t_ns, type="leave", robot=int(ids[r]),
                        lane_offset_m=self.lane_offset_m, new_platoon=platoons + int(ids[r])) for r in rows]


def widen(pred: dict[str, np.ndarray], sensors: dict[str, np.ndarray], extra: np.ndarray, reference: str) -> None:
    """The predecessor seen ``extra`` [m] closer (no maneuvers: every follower's range sensor sees its
    predecessor): its pose moved back along its heading for a law on the rear-axle pose, a shorter range for a law
    on the range sensor."""
    if reference == "axle":
        pred["x"] = pred["x"] - extra * np.cos(pred["yaw"])
        pred["y"] = pred["y"] - extra * np.sin(pred["yaw"])
    else:
        sensors["gap_m"] = sensors["gap_m"] - extra
