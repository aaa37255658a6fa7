"""What one station sensed over its sensing window (TS 36.213 14.1.1.6), reconstructed from the transmission history
with the powers its receptions had (``propagation.Propagation.rx_dbm``, keyed by sender, receiver and subframe):

- the subframes in which it transmitted itself (it could not sense them: half-duplex);
- the last SCI it decoded from each other station (its subframe, subchannels, reservation interval and the
  received power), the reservations the selection excludes;
- the S-RSSI of every subchannel averaged over the window's reservation periods, folded onto one period (the
  candidates' ranking metric).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
          window_ms: int, period_ms: int, n_subchannels: int, sensitivity_dbm: float) -> Sensed:
    """What station ``station`` (row ``row``) sensed in subframes [n - window_ms, n - 1]; the S-RSSI is folded
    modulo ``period_ms``."""
    ints, floats = history.window(n - window_ms, n)
    sf, sender, x0, length, rri, snap = (ints[:, k] for k in range(6))
    mine = sender == station
    own_sf = np.unique(sf[mine])
    heard = ~mine & ~np.isin(sf, own_sf)  # half-duplex: nothing is sensed while transmitting
    rx, ry = snaps.at(snap[heard], row)
    d = np.hypot(floats[heard, 0] - rx, floats[heard, 1] - ry)
    near = d <= prop.radius_m  # False for NaN (the station was not there yet)
    idx = np.flatnonzero(heard)[near]
    power = prop.rx_dbm(d[near], sender[idx], np.full(len(idx), station, np.int64), sf[idx])
    # S-RSSI: each transmission's power spread evenly over its subchannels, summed per (phase, subchannel)
    share = 10.0 ** (power / 10.0) / length[idx]
    reps = length[idx]
    cell = np.repeat((sf[idx] % period_ms) * n_subchannels + x0[idx], reps) + _ramp(reps)
    rssi = np.bincount(cell, weights=np.repeat(share, reps), minlength=period_ms * n_subchannels)
    rssi = rssi.reshape(period_ms, n_subchannels) * (period_ms / window_ms)
    # the last decoded SCI of each other station (rows are in subframe order: the last occurrence is the newest)
    ok = power >= sensitivity_dbm
    dec = idx[ok]
    last = len(dec) - 1 - np.unique(sender[dec][::-1], return_index=True)[1]
    pick = dec[last]
    return Sensed(own_sf=own_sf, res_sf=sf[pick], res_x0=x0[pick], res_len=length[pick], res_rri=rri[pick],
                  res_power_dbm=power[ok][last], rssi_mw=rssi)


def _ramp(reps: np.ndarray) -> np.ndarray:
    """0, 1, ..., r - 1 for each r of ``reps``, concatenated."""
    total = int(reps.sum())
    if total == 0:
        return np.empty(0, np.int64)
    starts = np.repeat(np.cumsum(reps) - reps, reps)
    return np.arange(total, dtype=np.int64) - starts
