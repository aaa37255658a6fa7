"""A frame at its receivers, for the access kernel (``access``): the carrier sense of a station, the links of a
frame that starts (each receiver's power drawn from the propagation tables, keyed by the link) and ends, and the
outcome of each link and its reception row, and the link buffer kept compact. Each link touches one receiver's row,
so the link loops may run on all threads (``threads``) with the same results.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from core import rng
from core.kernel_cache import depends_on
from core.rng import keyed_u01_from

from . import access_layout
from .access_layout import (
    BELOW_SENSITIVITY,
    C_ACTIVE,
    C_LINKS,
    COLLISION,
    F_BUSY_ACC,
    F_CUM_POWER,
    F_CUR_POWER,
    F_JAM_CUM,
    F_JAM_CUR,
    HALF_DUPLEX,
    INF_NS,
    JAMMED,
    L_ACTIVE,
    L_CUM0,
    L_HD0,
    L_HD_COUNT,
    L_JAM0,
    L_POWER,
    L_RX,
    N_CONTENT,
    N_LF64,
    N_LI64,
    RECEIVED,
    RX_END,
    RX_FRAME,
    RX_GEN,
    RX_INTEREST,
    RX_KIND,
    RX_OUTCOME,
    RX_ROW,
    RX_SENDER,
    RXF_POWER,
    S_ANCHOR,
    S_BO,
    S_BUSY_SINCE,
    S_IDLE_SINCE,
    S_NLINKS,
    S_OWN_ACTIVE,
    S_OWN_STARTED,
    S_PENDING,
    S_READY,
    S_SENSE,
    S_START,
    T_FRAME,
    T_GEN,
    T_ID,
    T_KIND,
    T_LINK_HI,
    T_LINK_LO,
)


@njit(cache=True, inline="always", error_model="numpy")
def _quantile(table: np.ndarray, row: int, u: float) -> float:
    # Inverse transform on a midpoint-tabulated quantile function with linear interpolation.
    k = table.shape[1]
    pos = u * k - 0.5
    if pos <= 0.0:
        return table[row, 0]
    i = int(pos)
    if i >= k - 1:
        return table[row, k - 1]
    f = pos - i
    return table[row, i] + f * (table[row, i + 1] - table[row, i])


@njit(cache=True, inline="always", error_model="numpy")
def sense_start(si: np.ndarray, r: int, t: np.int64, cca_ns: np.int64, slot_ns: np.int64) -> None:
    # The medium becomes busy at station r: freeze a countdown it has not finished yet.
    if si[S_SENSE, r] == 0:
        si[S_BUSY_SINCE, r] = t
        if si[S_PENDING, r] == 1 and si[S_START, r] != INF_NS and si[S_START, r] > t + cca_ns:
            anchor = si[S_ANCHOR, r]
            if t > anchor:
                done = (t - anchor) // slot_ns
                si[S_BO, r] = max(0, si[S_BO, r] - done)
            si[S_START, r] = INF_NS
    si[S_SENSE, r] += 1


@njit(cache=True, inline="always", error_model="numpy")
def sense_end(si: np.ndarray, sf: np.ndarray, r: int, t: np.int64, aifs_ns: np.int64, slot_ns: np.int64) -> None:
    si[S_SENSE, r] -= 1
    if si[S_SENSE, r] == 0:
        sf[F_BUSY_ACC, r] += t - si[S_BUSY_SINCE, r]
        si[S_IDLE_SINCE, r] = t
        if si[S_PENDING, r] == 1:
            anchor = max(si[S_READY, r], t) + aifs_ns
            si[S_ANCHOR, r] = anchor
            si[S_START, r] = anchor + si[S_BO, r] * slot_ns


@njit(cache=True, inline="always", error_model="numpy")
def _open_link(q: int, r: int, d2: float, frame: np.uint64, id_hash_of: np.ndarray, si: np.ndarray, sf: np.ndarray,
               li: np.ndarray, lf: np.ndarray, cls_lim2: np.ndarray, cls_coef: np.ndarray, cls_exp4: np.ndarray,
               gain_q: np.ndarray, tx_mw: float, min_d2: float, cs_mw: float, ts: np.int64, cca_ns: np.int64,
               slot_ns: np.int64) -> None:
    # Link q of a starting frame to receiver r at squared distance d2: touches only row q of the links and row r of
    # the stations.
    d2 = max(d2, min_d2)
    c = 0
    while d2 >= cls_lim2[c]:
        c += 1
    law = d2 * d2 if cls_exp4[c] == 1 else d2  # d^4 beyond the breakpoint, else d^2
    mean = tx_mw / (cls_coef[c] * law)
    # shadowing and fading of this frame on this link: keyed by (sender, receiver, generation time), so a station
    # that joins elsewhere never changes this link's draw
    pw = mean * _quantile(gain_q, c, keyed_u01_from(frame, id_hash_of[r]))
    li[q, L_RX] = r
    li[q, L_HD0] = si[S_OWN_ACTIVE, r]
    li[q, L_HD_COUNT] = si[S_OWN_STARTED, r]
    lf[q, L_POWER] = pw
    lf[q, L_ACTIVE] = sf[F_CUR_POWER, r]
    lf[q, L_CUM0] = sf[F_CUM_POWER, r]
    lf[q, L_JAM0] = sf[F_JAM_CUR, r] - sf[F_JAM_CUM, r]
    sf[F_CUR_POWER, r] += pw
    sf[F_CUM_POWER, r] += pw
    si[S_NLINKS, r] += 1
    if pw >= cs_mw:
        sense_start(si, r, ts, cca_ns, slot_ns)


@njit(cache=True, parallel=True, error_model="numpy")
def open_links(lo: np.int64, m: np.int64, cand: np.ndarray, cand_d2: np.ndarray, frame: np.uint64,
                id_hash_of: np.ndarray, si: np.ndarray, sf: np.ndarray, li: np.ndarray, lf: np.ndarray,
                cls_lim2: np.ndarray, cls_coef: np.ndarray, cls_exp4: np.ndarray, gain_q: np.ndarray, tx_mw: float,
                min_d2: float, cs_mw: float, ts: np.int64, cca_ns: np.int64, slot_ns: np.int64,
                par_min: np.int64) -> None:  # pragma: no cover - compiled
    # Each receiver appears once per frame, so the links are independent: any split over threads gives the same
    # arrays (no reduction, each link's draw is keyed). Few links do not pay for waking the threads.
    if m >= par_min:
        for k in prange(m):
            _open_link(lo + k, cand[k], cand_d2[k], frame, id_hash_of, si, sf, li, lf, cls_lim2, cls_coef,
                       cls_exp4, gain_q, tx_mw, min_d2, cs_mw, ts, cca_ns, slot_ns)
    else:
        for k in range(m):
            _open_link(lo + k, cand[k], cand_d2[k], frame, id_hash_of, si, sf, li, lf, cls_lim2, cls_coef,
                       cls_exp4, gain_q, tx_mw, min_d2, cs_mw, ts, cca_ns, slot_ns)


@njit(cache=True, inline="always", error_model="numpy")
def _close_link(q: int, te: np.int64, stamp: np.int64, si: np.ndarray, sf: np.ndarray, li: np.ndarray,
                lf: np.ndarray, scratch_code: np.ndarray, cs_mw: float, aifs_ns: np.int64, slot_ns: np.int64) -> None:
    # Link q of an ending frame leaves its receiver r (row r only); scratch_code[r] remembers the link.
    r = li[q, L_RX]
    if r < 0:
        return
    pw = lf[q, L_POWER]
    si[S_NLINKS, r] -= 1
    if si[S_NLINKS, r] == 0:
        sf[F_CUR_POWER, r] = sf[F_JAM_CUR, r]  # no drift of the running sum across busy periods
    else:
        sf[F_CUR_POWER, r] -= pw
    if pw >= cs_mw:
        sense_end(si, sf, r, te, aifs_ns, slot_ns)
    scratch_code[r] = (stamp << 32) | q


@njit(cache=True, parallel=True, error_model="numpy")
def close_links(lo: np.int64, m: np.int64, te: np.int64, stamp: np.int64, si: np.ndarray, sf: np.ndarray,
                 li: np.ndarray, lf: np.ndarray, scratch_code: np.ndarray, cs_mw: float, aifs_ns: np.int64,
                 slot_ns: np.int64, par_min: np.int64) -> None:  # pragma: no cover - compiled
    # As open_links: one receiver per link, so the split over threads cannot change a result.
    if m >= par_min:
        for k in prange(m):
            _close_link(lo + k, te, stamp, si, sf, li, lf, scratch_code, cs_mw, aifs_ns, slot_ns)
    else:
        for k in range(m):
            _close_link(lo + k, te, stamp, si, sf, li, lf, scratch_code, cs_mw, aifs_ns, slot_ns)


@njit(cache=True, inline="always", error_model="numpy")
def outcome(q: int, r: int, si: np.ndarray, sf: np.ndarray, li: np.ndarray, lf: np.ndarray, sens_mw: float,
             noise_mw: float, capture_lin: float) -> int:  # pragma: no cover - compiled
    # The outcome of closed link q at receiver r. What it reads (the receiver's transmissions started and the power
    # of every frame that started at it) changes only when a frame starts, so it is the same any time before the
    # next start.
    pw = lf[q, L_POWER]
    if li[q, L_HD0] == 1 or si[S_OWN_STARTED, r] > li[q, L_HD_COUNT]:
        return HALF_DUPLEX
    if pw < sens_mw:
        return BELOW_SENSITIVITY
    interference = lf[q, L_ACTIVE] + max(0.0, sf[F_CUM_POWER, r] - lf[q, L_CUM0] - pw)
    if pw >= capture_lin * (noise_mw + interference):
        return RECEIVED
    # lost: to jamming if the frames alone would have let it through
    jam = lf[q, L_JAM0] + sf[F_JAM_CUM, r]
    if jam > 0.0 and pw >= capture_lin * (noise_mw + max(0.0, interference - jam)):
        return JAMMED
    return COLLISION


@njit(cache=True, inline="always", error_model="numpy")
def emit(rx_out_i: np.ndarray, rx_out_f: np.ndarray, o: int, ti: np.ndarray, tf: np.ndarray, j: int, r: int,
          te: np.int64, code: int, interest: int, power: float) -> None:
    rx_out_i[o, RX_FRAME] = ti[j, T_FRAME]
    rx_out_i[o, RX_SENDER] = ti[j, T_ID]
    rx_out_i[o, RX_ROW] = r
    rx_out_i[o, RX_GEN] = ti[j, T_GEN]
    rx_out_i[o, RX_END] = te
    rx_out_i[o, RX_OUTCOME] = code
    rx_out_i[o, RX_INTEREST] = interest
    rx_out_i[o, RX_KIND] = ti[j, T_KIND]
    rx_out_f[o, RXF_POWER] = power
    for c in range(N_CONTENT):
        rx_out_f[o, 1 + c] = tf[j, c]


@njit(cache=True, error_model="numpy")
def compact_links(ti: np.ndarray, li: np.ndarray, lf: np.ndarray, ctr: np.ndarray) -> None:  # pragma: no cover
    # Move the links of the frames still on air to the front of the link buffer, in their order (each frame's links
    # stay contiguous and in link order).
    na = ctr[C_ACTIVE]
    if na == 0:
        ctr[C_LINKS] = 0
        return
    order = np.argsort(ti[:na, T_LINK_LO])
    dst = 0
    for k in range(na):
        j = order[k]
        lo = ti[j, T_LINK_LO]
        hi = ti[j, T_LINK_HI]
        if lo != dst:
            for q in range(hi - lo):
                for c in range(N_LI64):
                    li[dst + q, c] = li[lo + q, c]
                for c in range(N_LF64):
                    lf[dst + q, c] = lf[lo + q, c]
        ti[j, T_LINK_LO] = dst
        ti[j, T_LINK_HI] = dst + hi - lo
        dst += hi - lo
    ctr[C_LINKS] = dst



depends_on(globals(), access_layout, rng)
