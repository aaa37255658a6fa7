"""What one station sensed over its sensing window (TS 36.213 14.1.1.6), reconstructed from the transmission history
with the powers its receptions had (``kernels.sense_window``: the same keyed draws, sender and receiver positions of
the channel step of each transmission):

- the subframes in which it transmitted itself (it could not sense them: half-duplex);
- the last SCI it decoded from each other station (its subframe, subchannels, reservation interval and the
  received power): the reservations the selection excludes;
- the S-RSSI of every subchannel averaged over the window's reservation periods, folded onto one period (the
  candidates' ranking metric).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import kernels as kn
from .history import PositionSnapshots, TxHistory
from .propagation import Propagation


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


def sense(history: TxHistory, snaps: PositionSnapshots, prop: Propagation, row: int, station: int, n: int,
          window_ms: int, period_ms: int, n_subchannels: int, sensitivity_dbm: float, n_slots: int) -> Sensed:
    """What station ``station`` (row ``row``) sensed in subframes [n - window_ms, n - 1]; the S-RSSI is folded
    modulo ``period_ms``; ``n_slots`` bounds the history's sender slots."""
    col = history.window(n - window_ms, n)
    own = np.zeros(window_ms, bool)
    rssi = np.zeros((period_ms, n_subchannels))
    pick = np.empty(n_slots, np.int64)
    pick_p = np.empty(n_slots)
    m = kn.sense_window(col["sf"], col["sender"], col["slot"], col["x0"], col["length"], col["snap"],
                        col["sx"], col["sy"], snaps.x, snaps.y,
                        snaps.serial, row, station, n - window_ms, window_ms, period_ms, prop.radius_m**2,
                        *prop.kernel_args(), sensitivity_dbm, n_slots, own, rssi, pick, pick_p)
    at = pick[:m]
    return Sensed(own_sf=n - window_ms + np.flatnonzero(own), res_sf=col["sf"][at], res_x0=col["x0"][at],
                  res_len=col["length"][at], res_rri=col["rri"][at], res_power_dbm=pick_p[:m].copy(),
                  rssi_mw=rssi * (period_ms / window_ms))
