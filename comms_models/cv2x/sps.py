"""Sensing-based resource selection of sidelink transmission mode 4 (3GPP TS 36.213 14.1.1.6) for one station.

Candidates are the single-subframe resources of L adjacent subchannels in the selection window
[n + T1, n + min(T2, delay budget)] (M of them). Then, from what the station sensed (``sensing.Sensed``):

1. **Half-duplex** (step 5): exclude the candidates of every subframe the station could not sense because it
   transmitted (subframe t_z), for the reservation periods a pool allows: y = t_z + k * 100 (periods of 100..1000
   ms), and y = t_z + q * P for q <= 100 / P with the station's own P when it is 20 or 50 ms.
2. **Reservations** (step 6): exclude a candidate that overlaps the reservation another station announced in the
   last SCI it decoded (subframe t_m + q * P_rsvp_RX, q = 1 for P >= 100 ms, q <= 100 / P below; the candidate's
   own later occurrences y + j * P_rsvp_TX included) when that transmission was received above the RSRP threshold.
3. **Threshold** (step 7): while fewer than 20 % of M remain, raise the threshold by 3 dB and repeat 2.
4. **Ranking** (step 8-10): move the remaining candidates with the lowest S-RSSI averaged over the sensing window
   (the subframes y - k * P, P = min(100, P_rsvp_TX)) into the best list until it holds 20 % of M, and pick one of
   those uniformly at random (one keyed uniform number).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import kernels as kn
from .params import SpsParams
from .sensing import Sensed

PHASE_MS = 100  # P_step: the period the S-RSSI of a candidate is averaged over (reservation intervals >= 100 ms)


@dataclass(frozen=True)
class Selection:
    """The chosen resource and how the choice went."""

    sf: int  # subframe of the first transmission on it
    x0: int  # first subchannel
    threshold_dbm: float  # RSRP threshold in force when enough candidates remained
    candidates: int  # M: every single-subframe resource of the window
    remaining: int  # after the exclusions


def select(n: int, length: int, rri_ms: int, cfg: SpsParams, n_subchannels: int, sensed: Sensed,
           u: float, tie: np.ndarray) -> Selection:
    """A resource of ``length`` subchannels for a packet that arrived in subframe ``n`` (see the module docstring);
    ``u`` in [0, 1) picks among the best candidates, ``tie`` (one uniform number per candidate, window-major) orders
    candidates of equal S-RSSI (the standard leaves it open; an order by time would crowd every station that
    selects at about the same time into the same early subframes)."""
    t2 = min(cfg.t2_ms, cfg.delay_budget_ms)
    ys = n + np.arange(cfg.t1_ms, t2 + 1, dtype=np.int64)
    nx = n_subchannels - length + 1
    total = len(ys) * nx
    free = ~_own_subframes(ys, sensed.own_sf, rri_ms)[:, None] & np.ones((len(ys), nx), bool)
    power = _reserved_power(ys, sensed, rri_ms, n_subchannels, length)
    need = math.ceil(cfg.min_candidates * total)
    threshold = cfg.rsrp_threshold_dbm
    top = float(power.max(initial=-np.inf))
    while True:
        keep = free & ~(power > threshold)
        if keep.sum() >= need or threshold > top:
            break
        threshold += cfg.rsrp_step_db
    if not keep.any():  # nothing left at all (every subframe half-duplex excluded): the whole window
        keep = np.ones_like(keep)
    phase = min(PHASE_MS, rri_ms)
    rssi = sensed.rssi_mw if phase == PHASE_MS else _fold(sensed.rssi_mw, phase)
    cells = rssi[ys % phase]  # (window, subchannel)
    metric = sum(cells[:, k:k + nx] for k in range(length)) / length
    flat = np.flatnonzero(keep.ravel())
    order = flat[np.lexsort((tie[flat], metric.ravel()[flat]))]
    best = order[:max(1, min(need, len(order)))]
    pick = int(best[min(int(u * len(best)), len(best) - 1)])
    return Selection(sf=int(ys[pick // nx]), x0=pick % nx, threshold_dbm=threshold, candidates=total,
                     remaining=int(keep.sum()))


def _own_subframes(ys: np.ndarray, own_sf: np.ndarray, rri_ms: int) -> np.ndarray:
    """Window subframes the station cannot use: it did not sense the subframe a period before (half-duplex)."""
    if len(own_sf) == 0:
        return np.zeros(len(ys), bool)
    out = np.isin(ys % PHASE_MS, own_sf % PHASE_MS)
    if rri_ms < PHASE_MS:
        gap = ys[:, None] - own_sf[None, :]
        out |= ((gap % rri_ms == 0) & (gap > 0) & (gap <= PHASE_MS)).any(axis=1)
    return out


def _reserved_power(ys: np.ndarray, sensed: Sensed, rri_ms: int, n_subchannels: int, length: int) -> np.ndarray:
    """(window, candidate) the strongest received power of a sensed reservation the candidate (or one of its own
    later occurrences) overlaps; -inf where none (``kernels.reserved_power``)."""
    out = np.empty((len(ys), n_subchannels - length + 1))
    kn.reserved_power(sensed.res_sf, sensed.res_x0, sensed.res_len, sensed.res_rri, sensed.res_power_dbm,
                      int(ys[0]), int(ys[-1]), rri_ms, length, PHASE_MS, np.empty((len(ys), n_subchannels)), out)
    return out


def _fold(rssi: np.ndarray, phase: int) -> np.ndarray:
    """The S-RSSI folded onto a shorter period (reservation intervals of 20 or 50 ms)."""
    return rssi.reshape(-1, phase, rssi.shape[1]).mean(axis=0)
