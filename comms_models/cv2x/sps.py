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

from dataclasses import dataclass

import numpy as np

from core.rng import KeyedDraws

from . import select_kernel as sk
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
    100 ms (1 ms subframes: 100). The channel selects with the same compiled steps (``select_kernel``)."""
    keep, threshold, need, remaining = _candidates(n, length, rri_ms, rri_ms, cfg, n_subchannels, sensed, phase)
    sf, x0 = sk.rank_pick(n, length, cfg.t1_ms, need, rri_ms, phase, np.ascontiguousarray(sensed.rssi_mw), keep,
                          np.asarray(tie, np.float64), float(u))
    return Selection(sf=int(sf), x0=int(x0), threshold_dbm=threshold, candidates=keep.size, remaining=remaining)


def select_nr(n: int, length: int, rri_slots: int, cfg: SpsParams, n_subchannels: int, sensed: Sensed,
              u: np.ndarray, phase: int, dynamic: bool) -> list[Selection]:
    """NR-V2X mode 2 (TS 38.214 8.1.4, TS 38.321 5.22.1.1): the same exclusions as ``select`` (``phase`` slots make
    100 ms), then the MAC picks uniformly at random among all the remaining candidates (no S-RSSI ranking), one per
    uniform number of ``u``, each in a slot none of the earlier picks uses; returned in time order (the first is
    the initial transmission, the others its blind retransmissions). ``dynamic``: the resource is not reserved
    again, so only its own slot is checked against others' reservations (and the half-duplex exclusion takes the
    100 ms period)."""
    own = phase if dynamic else rri_slots
    keep, threshold, _, remaining = _candidates(n, length, own, 1 << 40 if dynamic else rri_slots, cfg,
                                                   n_subchannels, sensed, phase)
    u = np.atleast_1d(np.asarray(u, np.float64))
    out_sf, out_x0 = np.full(len(u), -1, np.int64), np.full(len(u), -1, np.int64)
    k = sk.uniform_picks(n, cfg.t1_ms, keep, u, out_sf, out_x0)
    return [Selection(sf=int(out_sf[i]), x0=int(out_x0[i]), threshold_dbm=threshold, candidates=keep.size,
                      remaining=remaining) for i in range(k)]


def select_station(n: int, length: int, station: int, cfg: SpsParams, n_subchannels: int, sensed: Sensed,
                   pick_key: np.uint64, tie_key: np.uint64, phase: int, nr_copies: int,
                   dynamic: bool) -> list[Selection]:
    """The selection of station ``station`` for its packet of slot ``n``, with its keyed draws (the pick by
    (station, copy, n), the order of equal candidates by (station, candidate, n)): ``select_nr`` with ``nr_copies``
    picks, or ``select`` when that is 0 (LTE). ``select_kernel.reselect_rows`` draws the same numbers."""
    if nr_copies:
        u = KeyedDraws(pick_key, np.full(nr_copies, station), np.arange(nr_copies), np.full(nr_copies, n))
        return select_nr(n, length, cfg.rri_ms, cfg, n_subchannels, sensed, u.random(nr_copies), phase, dynamic)
    u = float(KeyedDraws(pick_key, np.array([station]), None, np.array([n])).random(1)[0])
    cells = (min(cfg.t2_ms, cfg.delay_budget_ms) - cfg.t1_ms + 1) * (n_subchannels - length + 1)
    tie = KeyedDraws(tie_key, np.full(cells, station), np.arange(cells), np.full(cells, n)).random(cells)
    return [select(n, length, cfg.rri_ms, cfg, n_subchannels, sensed, u, tie, phase)]


def _candidates(n: int, length: int, rri_own: int, rri_tx: int, cfg: SpsParams, n_subchannels: int, sensed: Sensed,
                phase: int) -> tuple[np.ndarray, float, int, int]:
    """The mask (slot, position) of the candidates left after the half-duplex and reservation exclusions (the
    threshold raised until ``min_candidates`` remain), the threshold, how many must remain and how many do
    (``select_kernel.candidates``)."""
    t2 = min(cfg.t2_ms, cfg.delay_budget_ms)
    keep = np.zeros((t2 - cfg.t1_ms + 1, n_subchannels - length + 1), np.bool_)
    as_i = lambda a: np.ascontiguousarray(a, np.int64)  # noqa: E731
    threshold, need, remaining = sk.candidates(
        n, length, rri_own, rri_tx, cfg.t1_ms, t2, cfg.min_candidates, cfg.rsrp_threshold_dbm, cfg.rsrp_step_db,
        n_subchannels, phase, as_i(sensed.own_sf), as_i(sensed.res_sf), as_i(sensed.res_x0), as_i(sensed.res_len),
        as_i(sensed.res_rri), np.ascontiguousarray(sensed.res_power_dbm, np.float64), keep)
    return keep, float(threshold), int(need), int(remaining)
