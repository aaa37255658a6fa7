"""What one station sensed over its sensing window (TS 36.213 14.1.1.6), read from what it heard (``history.Heard``:
the links the reception kernel resolved to it, with the powers they had):

- the subframes in which it transmitted itself (it could not sense them: half-duplex);
- the last SCI it decoded from each other station (its subframe, subchannels, reservation interval and the
  received power): the reservations the selection excludes;
- the S-RSSI of every subchannel averaged over the window's reservation periods, folded onto one period (the
  candidates' ranking metric).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .history import Heard


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


def sense(heard: Heard, scratch: SenseScratch, row: int, n: int, window_ms: int, period_ms: int, n_subchannels: int,
          sensitivity_dbm: float, rri: int) -> Sensed:
    """What the station of row ``row`` sensed in subframes [n - window_ms, n - 1]; the S-RSSI is folded modulo
    ``period_ms``; every reservation it heard announced ``rri`` (0: a dynamic grant)."""
    own = np.zeros(window_ms, bool)
    rssi = np.zeros((period_ms, n_subchannels))
    cap = len(scratch.seen)
    res_sf, res_x0, res_len = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64)
    res_p = np.empty(cap)
    m = sense_heard(*heard.arrays, row, n - window_ms, n, period_ms, sensitivity_dbm, own, rssi, scratch.last,
                    scratch.seen, res_sf, res_x0, res_len, res_p)
    return Sensed(own_sf=n - window_ms + np.flatnonzero(own), res_sf=res_sf[:m], res_x0=res_x0[:m],
                  res_len=res_len[:m], res_rri=np.full(m, rri, np.int64), res_power_dbm=res_p[:m],
                  rssi_mw=rssi * (period_ms / window_ms))


@njit(cache=True)
def sense_heard(ring, ring_p, h_head, h_count, row, first_sf, n, period, sens_dbm, own, rssi, last, seen, res_sf,
                res_x0, res_len, res_p):  # pragma: no cover - compiled
    """From row ``row``'s ring (``history.Heard``), oldest first, the entries of subframes [first_sf, n):
    ``own[s - first_sf]`` its own transmissions; ``rssi[phase, subchannel]`` += the power of every link it heard,
    spread over the sender's subchannels and folded modulo ``period`` (half-duplex: nothing in its own subframes);
    ``res_*[:m]`` the last SCI it decoded (power at least ``sens_dbm``) from each sender, by ascending sender slot.
    ``last`` (-1 everywhere) is left as found. Returns m."""
    cap = ring.shape[1]
    head, count = h_head[row], h_count[row]
    own_slot = (1 << 22) - 1
    for i in range(count):
        e = ring[row, (head + i) % cap, 0]
        s = e >> 32
        if ((e >> 10) & own_slot) == own_slot and first_sf <= s < n:
            own[s - first_sf] = True
    m = 0
    for i in range(count):
        at = (head + i) % cap
        e = ring[row, at, 0]
        s = e >> 32
        slot = (e >> 10) & own_slot
        if slot == own_slot or s < first_sf or s >= n or own[s - first_sf]:
            continue
        x0 = (e >> 5) & 31
        length = e & 31
        p = ring_p[row, at, 1]
        share = 10.0 ** (p / 10.0) / length
        ph = s % period
        for c in range(x0, x0 + length):
            rssi[ph, c] += share
        if p >= sens_dbm:
            if last[slot] < 0:
                seen[m] = slot
                m += 1
            last[slot] = at
    slots = np.sort(seen[:m])
    for j in range(m):
        at = last[slots[j]]
        e = ring[row, at, 0]
        res_sf[j] = e >> 32
        res_x0[j] = (e >> 5) & 31
        res_len[j] = e & 31
        res_p[j] = ring_p[row, at, 1]
        last[slots[j]] = -1
    return m
