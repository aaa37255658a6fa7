"""What one station sensed over its sensing window (TS 36.213 14.1.1.6), read from what it heard (``history.Heard``:
the links the reception kernel resolved to it, with the powers they had; ``select_kernel.sense_heard``) or, once
those rings would take too much memory, recomputed from the transmission history with the same keyed draws and
positions (``sense``, ``kernels.sense_window``):

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
from .history import Heard, PositionSnapshots, TxHistory
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


class SenseState:
    """Where the stations' sensing is read from: the rings of what each heard (``history.Heard``) or, once those were
    dropped, the position snapshots the history's powers are recomputed at (``sense``); and the selection kernel's
    scratch. ``window`` in slots; snapshots are kept for ``keep_ns``."""

    def __init__(self, window: int, keep_ns: int) -> None:
        self.heard = Heard(window)
        self.scratch = SenseScratch()
        self.snaps = PositionSnapshots(keep_ns)
        self.snap = -1  # the snapshot of the step being advanced

    def spawn(self, n: int, slots: int) -> None:
        """Rows for ``n`` new stations, ``slots`` stations ever spawned."""
        self.heard.spawn(n, slots)
        self.scratch.grow(slots)
        self.snaps.spawn(n)

    def despawn(self, keep: np.ndarray) -> None:
        """Keep the rows of mask ``keep``."""
        self.heard.despawn(keep)
        self.snaps.despawn(keep)

    def take(self, t_ns: int, x: np.ndarray, y: np.ndarray) -> None:
        """The positions of the step ending at ``t_ns``."""
        self.snap = self.snaps.take(t_ns, x, y)


def sense(history: TxHistory, snaps: PositionSnapshots, prop: Propagation, row: int, station: int, n: int,
          window_ms: int, period_ms: int, n_subchannels: int, sensitivity_dbm: float, n_slots: int, rri: int) -> Sensed:
    """What station ``station`` (row ``row``) sensed in subframes [n - window_ms, n - 1], recomputed from the
    history; the S-RSSI is folded modulo ``period_ms``; ``n_slots`` bounds the history's sender slots; every
    reservation announced ``rri`` (0: a dynamic grant)."""
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
                  res_len=col["length"][at], res_rri=np.full(m, rri, np.int64), res_power_dbm=pick_p[:m].copy(),
                  rssi_mw=rssi * (period_ms / window_ms))
