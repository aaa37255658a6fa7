"""Channel access and reception: EDCA best effort, half duplex, SINR capture, busy time for the CBR.

One compiled, event-driven kernel advances the shared medium from the previous channel step to ``t_now``.
Events are taken in time order (ends of frames, then CBR window boundaries, then starts of frames at equal
times):

- A frame that reaches the MAC waits for AIFS of idle medium, then counts down a backoff of U{0..CW} slots; the
  countdown freezes while the station senses the medium busy (some frame received above the carrier-sense level,
  or its own transmission) and resumes after AIFS of idle medium (IEEE 802.11-2016, 10.22.2; EN 302 663). A
  broadcast is sent once: no acknowledgement, no retry, the contention window never doubles. The backoff is drawn
  for every frame, also on an idle medium. A station keeps one frame in its queue: a newer CAM replaces one still
  waiting. Stations whose countdown ends within ``cca_time`` of another start cannot have detected it and send
  too. With the platooning message on, a frame of the other kind (CAM / PM) waits behind the head of the queue
  (one of each kind at most, a newer one replacing its own kind) and starts its own AIFS and backoff, drawn when it
  was queued, once the head has left (post-transmission backoff).
- When a frame starts, every station within the cut-off radius (uniform grid index, cell = radius) gets a
  received power drawn from the propagation model (``radio.PropagationTables``); the link is kept until the frame
  ends.
- When a frame ends, each link is resolved: ``half_duplex`` if the receiver transmitted at any time during the
  frame, ``below_sensitivity`` if the power is below the sensitivity, ``collision`` if
  ``P / (noise + sum of the powers of all other frames overlapping it at that receiver)`` is below the capture
  threshold, else ``received``.
- Jammers (``jamming``, the attacks ``jamming_*``) add their power at every station within their reach while they
  transmit: as interference in every link's SINR and, above the carrier-sense level, as a busy medium. A link
  lost only because of that power is ``jammed`` rather than ``collision``.
- Busy time per station (own transmissions included: the channel is occupied, and a lone station's CBR is its
  duty cycle) is accumulated into windows aligned to multiples of the window length; each closed window yields
  one CBR row.

The kernel returns a status when an output buffer or the link buffer runs short, or (``NEED_CHECK``) after
``C_PAR_LEFT`` frames on the parallel loops, so that the caller can time them (``threads``); the caller grows the
buffer or re-chooses and calls again, and the kernel resumes where it stopped (all state lives in the arrays).

The frame at its receivers (carrier sense, links, outcomes) is compiled from ``links``, the jammers from ``jamming``;
the arrays' columns are ``access_layout``'s. The module names all three in ``depends_on`` for numba's cache.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from core import rng
from core.kernel_cache import depends_on
from core.rng import event_key

from . import access_layout, jamming, links
from .access_layout import (
    BELOW_SENSITIVITY,
    C_ACTIVE,
    C_LINKS,
    C_NEXT,
    C_NPEND,
    C_PAR_LEFT,
    C_RESUME,
    C_RX_OUT,
    C_TX_OUT,
    C_WIN_END,
    C_WIN_OUT,
    DONE,
    F_BUSY_ACC,
    F_CONTENT,
    F_N_CONTENT,
    INF_NS,
    J_FRAMES,
    J_FROM,
    J_MODE,
    J_NEXT,
    J_ON,
    J_TARGET,
    J_TO,
    JAM_REACTIVE,
    KIND_CAM,
    L_POWER,
    L_RX,
    LINK_MASK,
    N_CONTENT,
    NEED_ACTIVE,
    NEED_CHECK,
    NEED_LINKS,
    NEED_RX_OUT,
    NEED_TX_OUT,
    NEED_WIN_OUT,
    RX_INTEREST,
    S_AIR,
    S_BO,
    S_BUSY_SINCE,
    S_FRAME,
    S_GEN,
    S_ID,
    S_KIND,
    S_LF,
    S_MEAS_SINCE,
    S_N_AIR,
    S_N_BO,
    S_N_FRAME,
    S_N_GEN,
    S_N_KIND,
    S_N_LF,
    S_N_READY,
    S_NEXT,
    S_OWN_ACTIVE,
    S_OWN_STARTED,
    S_PENDING,
    S_READY,
    S_SENSE,
    S_START,
    T_END,
    T_FRAME,
    T_GEN,
    T_ID,
    T_KIND,
    T_LF,
    T_LINK_HI,
    T_LINK_LO,
    T_REACT,
    T_ROW,
    T_START,
    TX_END,
    TX_FRAME,
    TX_GEN,
    TX_ID,
    TX_KIND,
    TX_LF,
    TX_ROW,
    TX_START,
)
from .jamming import jam_next, jam_set
from .links import close_links, compact_links, emit, open_links, outcome, sense_end, sense_start


@njit(cache=True, inline="always")
def _promote(si: np.ndarray, sf: np.ndarray, r: int) -> None:  # pragma: no cover - compiled
    # The second frame becomes the head of station r's queue, frozen until the medium is sensed idle.
    si[S_PENDING, r] = 1
    si[S_READY, r] = si[S_N_READY, r]
    si[S_FRAME, r] = si[S_N_FRAME, r]
    si[S_GEN, r] = si[S_N_GEN, r]
    si[S_AIR, r] = si[S_N_AIR, r]
    si[S_LF, r] = si[S_N_LF, r]
    si[S_KIND, r] = si[S_N_KIND, r]
    si[S_BO, r] = si[S_N_BO, r]
    si[S_START, r] = INF_NS
    si[S_NEXT, r] = 0
    for c in range(N_CONTENT):
        sf[F_CONTENT + c, r] = sf[F_N_CONTENT + c, r]


@njit(cache=True, inline="always")
def _suspend(ctr: np.ndarray, npend: int, status: int) -> int:  # pragma: no cover - compiled
    # Hand back mid-step: the next call resumes the loop with the same order of pend (ties between equal start times
    # follow it), so where a buffer ran short, or how often the threads are timed, never changes a result.
    ctr[C_NPEND] = npend
    ctr[C_RESUME] = 1
    return status


@njit(cache=True, error_model="numpy")
def advance(
    t_now: np.int64, si: np.ndarray, sf: np.ndarray, x: np.ndarray, y: np.ndarray,
    ti: np.ndarray, tf: np.ndarray, li: np.ndarray, lf: np.ndarray, ctr: np.ndarray, radio_key: np.uint64,
    pm_radio_key: np.uint64, ids: np.ndarray, id_hash_of: np.ndarray,
    grid_x0: float, grid_y0: float, cell_m: float, ncx: np.int64, ncy: np.int64,
    cell_start: np.ndarray, cell_items: np.ndarray,
    int_ptr: np.ndarray, int_rx: np.ndarray, pend: np.ndarray,
    tx_out: np.ndarray, rx_out_i: np.ndarray, rx_out_f: np.ndarray, win_out: np.ndarray, win_t: np.ndarray,
    scratch_code: np.ndarray, scratch_row: np.ndarray,
    cls_lim2: np.ndarray, cls_coef: np.ndarray, cls_exp4: np.ndarray, gain_q: np.ndarray,
    tx_mw: float, min_d2: float, radius2: float,
    sens_mw: float, cs_mw: float, noise_mw: float, capture_lin: float,
    aifs_ns: np.int64, slot_ns: np.int64, cca_ns: np.int64, window_ns: np.int64, emit_all: bool,
    par_min: np.int64, jam_i: np.ndarray, jam_p: np.ndarray, jam_s: np.ndarray,
) -> int:
    """Advance the medium to ``t_now``; returns ``DONE`` or what ran short (see module docstring). A frame with at
    least ``par_min`` links opens and resolves them on all threads (the results do not depend on it)."""
    n = si.shape[1]
    cand = np.empty(n, np.int64)  # receivers of the frame starting
    cand_d2 = np.empty(n, np.float64)  # their squared distances to the sender
    if ctr[C_RESUME] == 1:  # back after a status other than DONE: the loop carries on exactly where it stopped
        ctr[C_RESUME] = 0
        npend = ctr[C_NPEND]
    else:
        compact_links(ti, li, lf, ctr)
        # Stations with a waiting frame.
        npend = 0
        for i in range(n):
            if si[S_PENDING, i] == 1:
                pend[npend] = i
                npend += 1

    while True:
        # Next end, window boundary, start (ties in that order).
        te = INF_NS
        je = -1
        for j in range(ctr[C_ACTIVE]):
            if ti[j, T_END] < te:
                te = ti[j, T_END]
                je = j
        ts = INF_NS
        ps = -1
        for p in range(npend):
            s = si[S_START, pend[p]]
            if s < ts:
                ts = s
                ps = p
        tw = ctr[C_WIN_END]
        tj = INF_NS
        jn = -1
        for g in range(jam_i.shape[0]):
            if jam_i[g, J_NEXT] < tj:
                tj = jam_i[g, J_NEXT]
                jn = g

        if je >= 0 and te <= t_now and te <= tw and te <= ts and te <= tj:
            # ---- a frame ends: resolve its links --------------------------------------------------------------
            need = ti[je, T_LINK_HI] - ti[je, T_LINK_LO]
            src = ti[je, T_ROW]
            if src >= 0:
                need += int_ptr[src + 1] - int_ptr[src]
            if ctr[C_RX_OUT] + need > rx_out_i.shape[0]:
                return _suspend(ctr, npend, NEED_RX_OUT)
            if src >= 0:
                si[S_OWN_ACTIVE, src] = 0
                sense_end(si, sf, src, te, aifs_ns, slot_ns)
            lo = ti[je, T_LINK_LO]
            # each linked receiver's link lands in scratch_code as (frame serial << 32) | link: a stale entry of an
            # earlier frame never matches, so nothing has to be cleared afterwards; outcomes are worked out only
            # for the receptions reported (the interest pairs, or every link with emit_all)
            stamp = ti[je, T_FRAME]
            close_links(lo, ti[je, T_LINK_HI] - lo, te, stamp, si, sf, li, lf, scratch_code, cs_mw, aifs_ns,
                         slot_ns, par_min)
            if emit_all:  # in link order, whatever the number of threads
                for q in range(lo, ti[je, T_LINK_HI]):
                    r = li[q, L_RX]
                    if r >= 0:
                        o = ctr[C_RX_OUT]
                        code = outcome(q, r, si, sf, li, lf, sens_mw, noise_mw, capture_lin)
                        emit(rx_out_i, rx_out_f, o, ti, tf, je, r, te, code, 0, lf[q, L_POWER])
                        scratch_row[r] = o
                        ctr[C_RX_OUT] = o + 1
            if src >= 0:
                for k in range(int_ptr[src], int_ptr[src + 1]):
                    r = int_rx[k]
                    linked = (scratch_code[r] >> 32) == stamp
                    if linked and emit_all:  # already emitted above
                        rx_out_i[scratch_row[r], RX_INTEREST] = 1
                        continue
                    o = ctr[C_RX_OUT]
                    if linked:
                        q = scratch_code[r] & LINK_MASK
                        code = outcome(q, r, si, sf, li, lf, sens_mw, noise_mw, capture_lin)
                        emit(rx_out_i, rx_out_f, o, ti, tf, je, r, te, code, 1, lf[q, L_POWER])
                    else:  # beyond the cut-off radius: nothing arrives
                        emit(rx_out_i, rx_out_f, o, ti, tf, je, r, te, BELOW_SENSITIVITY, 1, 0.0)
                    ctr[C_RX_OUT] = o + 1
            react = ti[je, T_REACT]
            if react != 0:  # the reactive jammers that followed this frame stop with it (unless another holds them)
                for g in range(jam_i.shape[0]):
                    if (react >> g) & 1:
                        jam_i[g, J_FRAMES] -= 1
                        if jam_i[g, J_FRAMES] == 0:
                            jam_set(g, False, te, jam_i, jam_p, jam_s, si, sf, cs_mw, cca_ns, slot_ns, aifs_ns)
            last = ctr[C_ACTIVE] - 1
            if je != last:
                ti[je, :] = ti[last, :]
                tf[je, :] = tf[last, :]
            ctr[C_ACTIVE] = last

        elif tw <= t_now and tw <= ts and tw <= tj:
            # ---- a CBR window closes --------------------------------------------------------------------------
            w = ctr[C_WIN_OUT]
            if w >= win_out.shape[0]:
                return _suspend(ctr, npend, NEED_WIN_OUT)
            w_start = tw - window_ns
            for i in range(n):
                if si[S_SENSE, i] > 0:
                    sf[F_BUSY_ACC, i] += tw - si[S_BUSY_SINCE, i]
                    si[S_BUSY_SINCE, i] = tw
                span = tw - max(w_start, si[S_MEAS_SINCE, i])
                win_out[w, i] = sf[F_BUSY_ACC, i] / span if span > 0 else np.nan
                sf[F_BUSY_ACC, i] = 0.0
            win_t[w] = tw
            ctr[C_WIN_OUT] = w + 1
            ctr[C_WIN_END] = tw + window_ns

        elif jn >= 0 and tj <= t_now and tj <= ts:
            # ---- a jammer switches on or off by its schedule ------------------------------------------------------
            jam_set(jn, jam_i[jn, J_ON] == 0, tj, jam_i, jam_p, jam_s, si, sf, cs_mw, cca_ns, slot_ns, aifs_ns)
            jam_i[jn, J_NEXT] = jam_next(jam_i, jn, tj)

        elif ps >= 0 and ts <= t_now:
            # ---- a frame starts ---------------------------------------------------------------------------------
            src = pend[ps]
            if ctr[C_LINKS] + n > li.shape[0]:
                # links of frames that ended are dead: a burst of frames in one step fits in the links of the
                # frames on air, so the buffer stays a few frames long instead of a step's worth; it grows when
                # the live links fill a quarter of it, so a link is moved a third of a time on average
                compact_links(ti, li, lf, ctr)
                if 4 * (ctr[C_LINKS] + n) > li.shape[0]:
                    return _suspend(ctr, npend, NEED_LINKS)
            if ctr[C_ACTIVE] >= ti.shape[0]:
                return _suspend(ctr, npend, NEED_ACTIVE)
            if ctr[C_TX_OUT] >= tx_out.shape[0]:
                return _suspend(ctr, npend, NEED_TX_OUT)
            if ctr[C_PAR_LEFT] <= 0 and par_min < n:
                return _suspend(ctr, npend, NEED_CHECK)
            npend -= 1
            pend[ps] = pend[npend]
            si[S_PENDING, src] = 0
            si[S_START, src] = INF_NS
            j = ctr[C_ACTIVE]
            ctr[C_ACTIVE] = j + 1
            end = ts + si[S_AIR, src]
            ti[j, T_ROW] = src
            ti[j, T_ID] = si[S_ID, src]
            ti[j, T_FRAME] = si[S_FRAME, src]
            ti[j, T_GEN] = si[S_GEN, src]
            ti[j, T_START] = ts
            ti[j, T_END] = end
            ti[j, T_LF] = si[S_LF, src]
            ti[j, T_KIND] = si[S_KIND, src]
            ti[j, T_REACT] = 0
            for c in range(N_CONTENT):
                tf[j, c] = sf[F_CONTENT + c, src]
            o = ctr[C_TX_OUT]
            tx_out[o, TX_FRAME] = si[S_FRAME, src]
            tx_out[o, TX_ID] = si[S_ID, src]
            tx_out[o, TX_GEN] = si[S_GEN, src]
            tx_out[o, TX_START] = ts
            tx_out[o, TX_END] = end
            tx_out[o, TX_LF] = si[S_LF, src]
            tx_out[o, TX_ROW] = src
            tx_out[o, TX_KIND] = si[S_KIND, src]
            ctr[C_TX_OUT] = o + 1
            si[S_OWN_ACTIVE, src] = 1
            si[S_OWN_STARTED, src] += 1
            sense_start(si, src, ts, cca_ns, slot_ns)
            kind = si[S_KIND, src]
            if si[S_NEXT, src] == 1:
                # the frame behind moves up; it counts down once the medium is idle again (after this frame)
                _promote(si, sf, src)
                pend[npend] = src
                npend += 1
            # Links to every station within the cut-off radius: the receivers in the 3x3 cells, in grid order.
            m = 0
            xs = x[src]
            ys = y[src]
            cx = min(max(int((xs - grid_x0) / cell_m), 0), ncx - 1)
            cy = min(max(int((ys - grid_y0) / cell_m), 0), ncy - 1)
            for gy in range(max(cy - 1, 0), min(cy + 2, ncy)):
                for gx in range(max(cx - 1, 0), min(cx + 2, ncx)):
                    cell = gy * ncx + gx
                    for k in range(cell_start[cell], cell_start[cell + 1]):
                        r = cell_items[k]
                        dx = x[r] - xs
                        dy = y[r] - ys
                        d2 = dx * dx + dy * dy
                        if r != src and d2 <= radius2:
                            cand[m] = r
                            cand_d2[m] = d2  # the link's power needs it again
                            m += 1
            lo = ctr[C_LINKS]
            # hashed once per frame; a PM has its own key (a CAM and a PM of one instant fade independently)
            frame = event_key(radio_key if kind == KIND_CAM else pm_radio_key, ids[src], ti[j, T_GEN])
            open_links(lo, m, cand, cand_d2, frame, id_hash_of, si, sf, li, lf, cls_lim2, cls_coef,
                        cls_exp4, gain_q, tx_mw, min_d2, cs_mw, ts, cca_ns, slot_ns, par_min)
            if m >= par_min:
                ctr[C_PAR_LEFT] -= 1
            nl = lo + m
            ctr[C_LINKS] = nl
            ti[j, T_LINK_LO] = lo
            ti[j, T_LINK_HI] = nl
            for g in range(jam_i.shape[0]):  # reactive jammers whose target this is transmit while it is on air
                if jam_i[g, J_MODE] == JAM_REACTIVE and jam_i[g, J_TARGET] == ti[j, T_ID] and \
                        jam_i[g, J_FROM] <= ts < jam_i[g, J_TO]:
                    ti[j, T_REACT] |= np.int64(1) << np.int64(g)
                    jam_i[g, J_FRAMES] += 1
                    if jam_i[g, J_FRAMES] == 1:
                        jam_set(g, True, ts, jam_i, jam_p, jam_s, si, sf, cs_mw, cca_ns, slot_ns, aifs_ns)
        else:
            ctr[C_NEXT] = min(te, ts, tw, tj)  # all after t_now here
            return DONE


depends_on(globals(), access_layout, links, jamming, rng)
