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
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

INF_NS = np.iinfo(np.int64).max

# -- outcome codes: positions in comms_models.base.OUTCOMES --------------------------------------------------
SENT, RECEIVED, BELOW_SENSITIVITY, COLLISION, HALF_DUPLEX, DCC_DROPPED, JAMMED = 0, 1, 2, 3, 4, 5, 6

# -- kernel status -------------------------------------------------------------------------------------------
DONE, NEED_CHECK, NEED_LINKS, NEED_TX_OUT, NEED_RX_OUT, NEED_WIN_OUT, NEED_ACTIVE = 0, 1, 2, 3, 4, 5, 6

# -- per-station integer columns (SI64) ----------------------------------------------------------------------
# The kernel gets the station tables column by column: ``si[S_START, r]`` is station r's start (the channel keeps
# them as (stations, columns) views of the same memory). A frame's links visit their receivers in row order and read
# a few columns of each, so each column is a stream; and a table of any size, one station included, has the one
# memory layout numba compiles the kernel for.
S_PENDING = 0  # 1 when a frame waits in the queue
S_READY = 1  # [ns] when the waiting frame reached the MAC
S_ANCHOR = 2  # [ns] when the current backoff countdown started (ready/idle + AIFS)
S_START = 3  # [ns] when the countdown ends (INF_NS while frozen)
S_BO = 4  # backoff slots left
S_FRAME = 5  # serial number of the waiting frame
S_GEN = 6  # [ns] its generation time
S_AIR = 7  # [ns] its airtime
S_LF = 8  # 1 if it carries the low-frequency container
S_SENSE = 9  # number of frames on air sensed above the carrier-sense level (own included)
S_IDLE_SINCE = 10  # [ns] start of the current idle period
S_BUSY_SINCE = 11  # [ns] start of the busy period (clipped to the current window)
S_OWN_ACTIVE = 12  # 1 while transmitting
S_OWN_STARTED = 13  # number of transmissions started so far
S_NLINKS = 14  # links on air at this receiver (sensed or not)
S_MEAS_SINCE = 15  # [ns] when the station started measuring (spawn)
S_ID = 16  # robot id
S_KIND = 17  # message kind of the waiting frame (KIND_CAM, KIND_PM)
S_NEXT = 18  # 1 when a second frame (the other kind) waits behind it
S_N_READY = 19  # the second frame's S_READY, S_FRAME, S_GEN, S_AIR, S_LF, S_KIND and its drawn backoff
S_N_FRAME = 20
S_N_GEN = 21
S_N_AIR = 22
S_N_LF = 23
S_N_KIND = 24
S_N_BO = 25
N_SI64 = 26
# -- per-station float columns (SF64) ------------------------------------------------------------------------
F_CUR_POWER = 0  # [mW] total power of the frames (and jammers) on air at this receiver
F_CUM_POWER = 1  # [mW] sum of the powers of every frame that ever started at this receiver
F_BUSY_ACC = 2  # [ns] busy time in the current window
F_CONTENT = 3  # 6 columns: x, y, yaw, v, a, yaw_rate of the waiting frame (as the receivers decode them)
F_N_CONTENT = 9  # 6 columns: the content of the second frame
F_JAM_CUR = 15  # [mW] power of the jammers transmitting now at this receiver (part of F_CUR_POWER)
F_JAM_CUM = 16  # [mW] sum of every rise of that power (part of F_CUM_POWER)
N_SF64 = 17
N_CONTENT = 6
KIND_CAM, KIND_PM = 0, 1  # a PM's content columns: see comms_models.itsg5.pm.PM_CONTENT

# -- frames on air (TI64 / TF64) -----------------------------------------------------------------------------
T_ROW = 0  # sender's station row (-1 once despawned)
T_ID = 1  # sender's robot id
T_FRAME = 2
T_GEN = 3
T_START = 4
T_END = 5
T_LINK_LO = 6
T_LINK_HI = 7
T_LF = 8
T_KIND = 9
T_REACT = 10  # bit j: reactive jammer j transmits because of this frame
N_TI64 = 11
# -- links (LI64 / LF64) --------------------------------------------------------------------------------------
L_RX = 0  # receiver's station row (-1 once despawned)
L_HD0 = 1  # receiver was transmitting when the frame started
L_HD_COUNT = 2  # receiver's S_OWN_STARTED when the frame started
N_LI64 = 3
L_POWER = 0  # [mW] received power
L_ACTIVE = 1  # [mW] power of the other frames on air at the receiver when this one started
L_CUM0 = 2  # [mW] receiver's F_CUM_POWER when this frame started (before adding it)
L_JAM0 = 3  # [mW] receiver's F_JAM_CUR - F_JAM_CUM when this frame started: jammer power over the frame is
# L_JAM0 + F_JAM_CUM at its end
N_LF64 = 4

# -- outputs -----------------------------------------------------------------------------------------------------
TX_FRAME, TX_ID, TX_GEN, TX_START, TX_END, TX_LF, TX_ROW, TX_KIND = 0, 1, 2, 3, 4, 5, 6, 7
N_TXO = 8
RX_FRAME, RX_SENDER, RX_ROW, RX_GEN, RX_END, RX_OUTCOME, RX_INTEREST, RX_KIND = 0, 1, 2, 3, 4, 5, 6, 7
N_RXO_I = 8
RXF_POWER = 0  # then the 6 content columns
N_RXO_F = 7

# -- counters (C) --------------------------------------------------------------------------------------------------
C_ACTIVE = 0  # frames on air
C_LINKS = 1  # used rows of the link buffer
C_PAR_LEFT = 2  # frames the parallel loops may still open before the kernel returns NEED_CHECK
C_TX_OUT = 3
C_RX_OUT = 4
C_WIN_OUT = 5
C_WIN_END = 6  # [ns] end of the current CBR window
C_NPEND = 7  # stations in pend when the kernel handed back before DONE
C_RESUME = 8  # 1 after a status other than DONE: the next call resumes the loop as it was (same pend order)
C_NEXT = 9  # [ns] after DONE: the earliest event left (a frame's end or start, a window's end); the caller lowers it
# when it queues a frame, and need not call again before then
N_C = 10

# -- jammers (JI64: one row per jammer; their power at each station: jam_p[j, r] in mW) ---------------------------
J_MODE = 0  # JAM_CONSTANT, JAM_PERIODIC or JAM_REACTIVE
J_FROM = 1  # [ns] the attack's window [J_FROM, J_TO)
J_TO = 2
J_PERIOD = 3  # [ns] periodic: its period, on for J_ON_NS at the start of each
J_ON_NS = 4
J_TARGET = 5  # reactive: the robot id whose frames it jams
J_ON = 6  # 1 while transmitting
J_NEXT = 7  # [ns] when it next switches (INF_NS: never by itself; a reactive one follows its target's frames)
J_FRAMES = 8  # reactive: its target's frames on air that it jams
N_JI64 = 9
JAM_CONSTANT, JAM_PERIODIC, JAM_REACTIVE = 0, 1, 2
LINK_MASK = (1 << 32) - 1  # the link of a receiver's scratch_code (the frame's serial above it)



@njit(cache=True, inline="always")
def _mix64(x):  # pragma: no cover - compiled
    # SplitMix64 finaliser, as core.rng._splitmix64. Kept here on purpose: numba's on-disk cache of this
    # kernel does not notice edits to functions in other files; tests/orchestrator/test_rng.py keeps the two equal.
    x = np.uint64(x)  # int64 arguments (e.g. from Python) would otherwise mix into float64
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    return x ^ (x >> np.uint64(31))


@njit(cache=True, inline="always")
def frame_key(key, sender_id, generated_ns):  # pragma: no cover - compiled
    """``core.rng.event_key`` of one frame."""
    return _mix64(_mix64(np.uint64(key) ^ _mix64(np.uint64(sender_id))) ^ np.uint64(generated_ns))


@njit(cache=True, inline="always")
def link_u01(frame, receiver_hash):  # pragma: no cover - compiled
    """``core.rng.keyed_u01_from``: the uniform of one (frame, receiver) link."""
    return float(_mix64(np.uint64(frame) ^ np.uint64(receiver_hash)) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


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
def _sense_start(si: np.ndarray, r: int, t: np.int64, cca_ns: np.int64, slot_ns: np.int64) -> None:
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
def _sense_end(si: np.ndarray, sf: np.ndarray, r: int, t: np.int64, aifs_ns: np.int64, slot_ns: np.int64) -> None:
    si[S_SENSE, r] -= 1
    if si[S_SENSE, r] == 0:
        sf[F_BUSY_ACC, r] += t - si[S_BUSY_SINCE, r]
        si[S_IDLE_SINCE, r] = t
        if si[S_PENDING, r] == 1:
            anchor = max(si[S_READY, r], t) + aifs_ns
            si[S_ANCHOR, r] = anchor
            si[S_START, r] = anchor + si[S_BO, r] * slot_ns


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
def _compact_links(ti: np.ndarray, li: np.ndarray, lf: np.ndarray, ctr: np.ndarray) -> None:  # pragma: no cover
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
        _compact_links(ti, li, lf, ctr)
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
                _sense_end(si, sf, src, te, aifs_ns, slot_ns)
            lo = ti[je, T_LINK_LO]
            # each linked receiver's link lands in scratch_code as (frame serial << 32) | link: a stale entry of an
            # earlier frame never matches, so nothing has to be cleared afterwards; outcomes are worked out only
            # for the receptions reported (the interest pairs, or every link with emit_all)
            stamp = ti[je, T_FRAME]
            _close_links(lo, ti[je, T_LINK_HI] - lo, te, stamp, si, sf, li, lf, scratch_code, cs_mw, aifs_ns,
                         slot_ns, par_min)
            if emit_all:  # in link order, whatever the number of threads
                for q in range(lo, ti[je, T_LINK_HI]):
                    r = li[q, L_RX]
                    if r >= 0:
                        o = ctr[C_RX_OUT]
                        code = _outcome(q, r, si, sf, li, lf, sens_mw, noise_mw, capture_lin)
                        _emit(rx_out_i, rx_out_f, o, ti, tf, je, r, te, code, 0, lf[q, L_POWER])
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
                        code = _outcome(q, r, si, sf, li, lf, sens_mw, noise_mw, capture_lin)
                        _emit(rx_out_i, rx_out_f, o, ti, tf, je, r, te, code, 1, lf[q, L_POWER])
                    else:  # beyond the cut-off radius: nothing arrives
                        _emit(rx_out_i, rx_out_f, o, ti, tf, je, r, te, BELOW_SENSITIVITY, 1, 0.0)
                    ctr[C_RX_OUT] = o + 1
            react = ti[je, T_REACT]
            if react != 0:  # the reactive jammers that followed this frame stop with it (unless another holds them)
                for g in range(jam_i.shape[0]):
                    if (react >> g) & 1:
                        jam_i[g, J_FRAMES] -= 1
                        if jam_i[g, J_FRAMES] == 0:
                            _jam_set(g, False, te, jam_i, jam_p, jam_s, si, sf, cs_mw, cca_ns, slot_ns, aifs_ns)
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
            _jam_set(jn, jam_i[jn, J_ON] == 0, tj, jam_i, jam_p, jam_s, si, sf, cs_mw, cca_ns, slot_ns, aifs_ns)
            jam_i[jn, J_NEXT] = _jam_next(jam_i, jn, tj)

        elif ps >= 0 and ts <= t_now:
            # ---- a frame starts ---------------------------------------------------------------------------------
            src = pend[ps]
            if ctr[C_LINKS] + n > li.shape[0]:
                # links of frames that ended are dead: a burst of frames in one step fits in the links of the
                # frames on air, so the buffer stays a few frames long instead of a step's worth; it grows when
                # the live links fill a quarter of it, so a link is moved a third of a time on average
                _compact_links(ti, li, lf, ctr)
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
            _sense_start(si, src, ts, cca_ns, slot_ns)
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
            frame = frame_key(radio_key if kind == KIND_CAM else pm_radio_key, ids[src], ti[j, T_GEN])
            _open_links(lo, m, cand, cand_d2, frame, id_hash_of, si, sf, li, lf, cls_lim2, cls_coef,
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
                        _jam_set(g, True, ts, jam_i, jam_p, jam_s, si, sf, cs_mw, cca_ns, slot_ns, aifs_ns)
        else:
            ctr[C_NEXT] = min(te, ts, tw, tj)  # all after t_now here
            return DONE


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
    pw = mean * _quantile(gain_q, c, link_u01(frame, id_hash_of[r]))
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
        _sense_start(si, r, ts, cca_ns, slot_ns)


@njit(cache=True, parallel=True, error_model="numpy")
def _open_links(lo: np.int64, m: np.int64, cand: np.ndarray, cand_d2: np.ndarray, frame: np.uint64,
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
        _sense_end(si, sf, r, te, aifs_ns, slot_ns)
    scratch_code[r] = (stamp << 32) | q


@njit(cache=True, parallel=True, error_model="numpy")
def _close_links(lo: np.int64, m: np.int64, te: np.int64, stamp: np.int64, si: np.ndarray, sf: np.ndarray,
                 li: np.ndarray, lf: np.ndarray, scratch_code: np.ndarray, cs_mw: float, aifs_ns: np.int64,
                 slot_ns: np.int64, par_min: np.int64) -> None:  # pragma: no cover - compiled
    # As _open_links: one receiver per link, so the split over threads cannot change a result.
    if m >= par_min:
        for k in prange(m):
            _close_link(lo + k, te, stamp, si, sf, li, lf, scratch_code, cs_mw, aifs_ns, slot_ns)
    else:
        for k in range(m):
            _close_link(lo + k, te, stamp, si, sf, li, lf, scratch_code, cs_mw, aifs_ns, slot_ns)


@njit(cache=True, inline="always", error_model="numpy")
def _outcome(q: int, r: int, si: np.ndarray, sf: np.ndarray, li: np.ndarray, lf: np.ndarray, sens_mw: float,
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
def _emit(rx_out_i: np.ndarray, rx_out_f: np.ndarray, o: int, ti: np.ndarray, tf: np.ndarray, j: int, r: int,
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


# -- jammers --------------------------------------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _jam_set(j: int, on: bool, t: np.int64, jam_i: np.ndarray, jam_p: np.ndarray, jam_s: np.ndarray, si: np.ndarray,
             sf: np.ndarray, cs_mw: float, cca_ns: np.int64, slot_ns: np.int64,
             aifs_ns: np.int64) -> None:  # pragma: no cover - compiled
    # Jammer j starts (stops) transmitting at t: its power at every station it reaches joins (leaves) the power on
    # air there, as interference of every frame it overlaps; where it is above the carrier-sense level the medium
    # is busy (backoffs freeze, the CBR counts it) as for a frame.
    jam_i[j, J_ON] = 1 if on else 0
    for r in range(jam_p.shape[1]):
        p = jam_p[j, r]
        if p <= 0.0:
            continue
        if on:
            sf[F_CUR_POWER, r] += p
            sf[F_CUM_POWER, r] += p
            sf[F_JAM_CUR, r] += p
            sf[F_JAM_CUM, r] += p
            if p >= cs_mw:
                _sense_start(si, r, t, cca_ns, slot_ns)
                jam_s[j, r] = 1
        else:
            sf[F_JAM_CUR, r] = max(0.0, sf[F_JAM_CUR, r] - p)
            sf[F_CUR_POWER, r] = sf[F_JAM_CUR, r] if si[S_NLINKS, r] == 0 else sf[F_CUR_POWER, r] - p
            if jam_s[j, r] == 1:
                _sense_end(si, sf, r, t, aifs_ns, slot_ns)
                jam_s[j, r] = 0


@njit(cache=True, inline="always")
def _jam_next(jam_i: np.ndarray, j: int, t: np.int64) -> np.int64:  # pragma: no cover - compiled
    # When jammer j, having switched at t, switches next by its own schedule (a reactive one never does).
    mode = jam_i[j, J_MODE]
    if mode == JAM_REACTIVE:
        return INF_NS
    start, end = jam_i[j, J_FROM], jam_i[j, J_TO]
    if mode == JAM_CONSTANT:
        return end if jam_i[j, J_ON] == 1 else INF_NS
    period = jam_i[j, J_PERIOD]
    k = (t - start) // period  # the period t is in
    if jam_i[j, J_ON] == 1:
        return min(start + k * period + jam_i[j, J_ON_NS], end)
    following = start + (k + 1) * period
    return following if following < end else INF_NS


@njit(cache=True, error_model="numpy")
def jam_refresh(t: np.int64, jam_i: np.ndarray, jam_p: np.ndarray, new_p: np.ndarray, jam_s: np.ndarray,
                si: np.ndarray, sf: np.ndarray, cs_mw: float, cca_ns: np.int64, slot_ns: np.int64,
                aifs_ns: np.int64) -> None:  # pragma: no cover - compiled
    """The jammers' power at each station becomes ``new_p`` (this step's positions) at ``t``: for those
    transmitting, the power on air changes by the difference (a rise counts as new interference of the frames on
    air) and stations start or stop sensing them busy."""
    for j in range(jam_p.shape[0]):
        on = jam_i[j, J_ON] == 1
        for r in range(jam_p.shape[1]):
            old = jam_p[j, r]
            new = new_p[j, r]
            jam_p[j, r] = new
            if not on:
                continue
            d = new - old
            if d != 0.0:
                sf[F_JAM_CUR, r] = max(0.0, sf[F_JAM_CUR, r] + d)
                sf[F_CUR_POWER, r] = sf[F_JAM_CUR, r] if si[S_NLINKS, r] == 0 else sf[F_CUR_POWER, r] + d
                if d > 0.0:
                    sf[F_CUM_POWER, r] += d
                    sf[F_JAM_CUM, r] += d
            heard = new > 0.0 and new >= cs_mw
            if heard and jam_s[j, r] == 0:
                _sense_start(si, r, t, cca_ns, slot_ns)
                jam_s[j, r] = 1
            elif not heard and jam_s[j, r] == 1:
                _sense_end(si, sf, r, t, aifs_ns, slot_ns)
                jam_s[j, r] = 0
