"""What one station sensed over its sensing window (TS 36.213 14.1.1.6), read from what it heard (``history.Heard``:
the links the reception kernel resolved to it, with the powers they had; ``select_kernel.sense_heard``):

- the subframes in which it transmitted itself (it could not sense them: half-duplex);
- the last SCI it decoded from each other station (its subframe, subchannels, reservation interval and the
  received power): the reservations the selection excludes;
- the S-RSSI of every subchannel averaged over the window's reservation periods, folded onto one period (the
  candidates' ranking metric).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sensed:
    """One station's view of its sensing window."""

    own_sf: np.ndarray  # int64: subframes it transmitted in
    res_sf: np.ndarray  # int64: per other station heard, the subframe of its last decoded SCI
    res_x0: np.ndarray  # int64: its first subchannel
    res_len: np.ndarray  # int64: its subchannel count
    res_rri: np.ndarray  # int64 [ms]: the reservation interval its SCI announced
    res_power_dbm: np.ndarray  # float64: the power it was received with
    rssi_mw: np.ndarray  # float64 (period, subchannel): S-RSSI without noise, averaged over the window's periods


class SenseScratch:
    """Arrays a sensing call fills, kept between calls: one entry per station slot ever spawned (``grow``)."""

    def __init__(self) -> None:
        self.last = np.empty(0, np.int64)  # per sender slot: ring position of its last decoded SCI, -1 none
        self.seen = np.empty(0, np.int64)  # the slots set in ``last``

    def grow(self, n_slots: int) -> None:
        """Room for ``n_slots`` slots."""
        if len(self.last) < n_slots:
            self.last = np.concatenate([self.last, np.full(n_slots - len(self.last), -1, np.int64)])
            self.seen = np.empty(len(self.last), np.int64)
