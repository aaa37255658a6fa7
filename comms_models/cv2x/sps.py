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
           u: float, tie: np.ndarray, phase: int = PHASE_MS) -> Selection:
    """A resource of ``length`` subchannels for a packet that arrived in subframe ``n`` (see the module docstring);
    ``u`` in [0, 1) picks among the best candidates, ``tie`` (one uniform number per candidate, window-major) orders
    candidates of equal S-RSSI (the standard leaves it open; an order by time would crowd every station that
    selects at about the same time into the same early subframes). Times are in slots of which ``phase`` make
    100 ms (1 ms subframes: 100)."""
    ys, nx, keep, threshold, total, need = _candidates(n, length, rri_ms, rri_ms, cfg, n_subchannels, sensed, phase)
    period = min(phase, rri_ms)
    rssi = sensed.rssi_mw if period == phase else _fold(sensed.rssi_mw, period)
    cells = rssi[ys % period]  # (window, subchannel)
    metric = sum(cells[:, k:k + nx] for k in range(length)) / length
    flat = np.flatnonzero(keep.ravel())
    order = flat[np.lexsort((tie[flat], metric.ravel()[flat]))]
    best = order[:max(1, min(need, len(order)))]
    pick = int(best[min(int(u * len(best)), len(best) - 1)])
    return Selection(sf=int(ys[pick // nx]), x0=pick % nx, threshold_dbm=threshold, candidates=total,
                     remaining=int(keep.sum()))


def select_nr(n: int, length: int, rri_slots: int, cfg: SpsParams, n_subchannels: int, sensed: Sensed,
              u: np.ndarray, phase: int, dynamic: bool) -> list[Selection]:
    """NR-V2X mode 2 (TS 38.214 8.1.4, TS 38.321 5.22.1.1): the same exclusions as ``select`` (``phase`` slots make
    100 ms), then the MAC picks uniformly at random among all the remaining candidates (no S-RSSI ranking), one per
    uniform number of ``u``, each in a slot none of the earlier picks uses; returned in time order (the first is
    the initial transmission, the others its blind retransmissions). ``dynamic``: the resource is not reserved
    again, so only its own slot is checked against others' reservations (and the half-duplex exclusion takes the
    100 ms period)."""
    own = phase if dynamic else rri_slots
    ys, nx, keep, threshold, total, _ = _candidates(n, length, own, 1 << 40 if dynamic else rri_slots, cfg,
                                                    n_subchannels, sensed, phase)
    free = keep.copy()
    picks = []
    for v in np.atleast_1d(u):
        flat = np.flatnonzero(free.ravel())
        if len(flat) == 0:
            break
        pick = int(flat[min(int(v * len(flat)), len(flat) - 1)])
        picks.append(Selection(sf=int(ys[pick // nx]), x0=pick % nx, threshold_dbm=threshold, candidates=total,
                               remaining=int(keep.sum())))
        free[pick // nx] = False
    return sorted(picks, key=lambda s: s.sf)


def _candidates(n: int, length: int, rri_own: int, rri_tx: int, cfg: SpsParams, n_subchannels: int, sensed: Sensed,
                phase: int) -> tuple[np.ndarray, int, np.ndarray, float, int, int]:
    """The window's slots ``ys``, the candidate positions per slot ``nx``, the mask (slot, position) of those left
    after the half-duplex and reservation exclusions (the threshold raised until ``min_candidates`` remain), the
    threshold, the number of candidates and the number that must remain."""
    t2 = min(cfg.t2_ms, cfg.delay_budget_ms)
    ys = n + np.arange(cfg.t1_ms, t2 + 1, dtype=np.int64)
    nx = n_subchannels - length + 1
    total = len(ys) * nx
    free = ~_own_subframes(ys, sensed.own_sf, rri_own, phase)[:, None] & np.ones((len(ys), nx), bool)
    power = _reserved_power(ys, sensed, rri_tx, n_subchannels, length, phase)
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
    return ys, nx, keep, threshold, total, need


def _own_subframes(ys: np.ndarray, own_sf: np.ndarray, rri_ms: int, phase: int = PHASE_MS) -> np.ndarray:
    """Window subframes the station cannot use: it did not sense the subframe a period before (half-duplex)."""
    if len(own_sf) == 0:
        return np.zeros(len(ys), bool)
    out = np.isin(ys % phase, own_sf % phase)
    if rri_ms < phase:
        gap = ys[:, None] - own_sf[None, :]
        out |= ((gap % rri_ms == 0) & (gap > 0) & (gap <= phase)).any(axis=1)
    return out


def _reserved_power(ys: np.ndarray, sensed: Sensed, rri_ms: int, n_subchannels: int, length: int,
                    phase: int = PHASE_MS) -> np.ndarray:
    """(window, candidate) the strongest received power of a sensed reservation the candidate (or one of its own
    later occurrences) overlaps; -inf where none (``kernels.reserved_power``)."""
    out = np.empty((len(ys), n_subchannels - length + 1))
    kn.reserved_power(sensed.res_sf, sensed.res_x0, sensed.res_len, sensed.res_rri, sensed.res_power_dbm,
                      int(ys[0]), int(ys[-1]), rri_ms, length, phase, np.empty((len(ys), n_subchannels)), out)
    return out


def _fold(rssi: np.ndarray, phase: int) -> np.ndarray:
    """The S-RSSI folded onto a shorter period (reservation intervals of 20 or 50 ms)."""
    return rssi.reshape(-1, phase, rssi.shape[1]).mean(axis=0)
