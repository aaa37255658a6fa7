"""Compiled kernels of the C-V2X channel: the received power of a link, the receptions of a subframe (with what each
station heard, kept for its sensing) and, when those rings would take too much memory, what a station sensed
recomputed from the transmission history (``sense_window``). Every compiled helper lives in this file
(numba's on-disk cache checks only a kernel's own file).

A link's power in a subframe is ``tx - PL(d) + sigma(d) z + F``: the mean path loss of ``propagation``, log-normal
shadowing with ``z`` a standard normal and, optionally, a Nakagami fading gain ``F`` [dB] read from a quantile table
of its distance class. ``z`` and the fading's uniform number are hashes of (purpose key, sender id, receiver id,
subframe) (SplitMix64, as ``core.rng``), so the power a station sensed is exactly the power its reception had, and
no draw depends on which other stations exist.

Path-loss parameters are a float64 array ``PL = [kind, fc_ghz, h_m, min_d_m, d_bp_m, sigma_near_db,
sigma_far_db]`` followed by the distance-free terms of ``loss_constants``; kinds are ``WINNER_B1``,
``TR37885_HIGHWAY``, ``DUAL_SLOPE`` and ``FREE_SPACE``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

WINNER_B1, TR37885_HIGHWAY, DUAL_SLOPE, FREE_SPACE = 0, 1, 2, 3
FREE_SPACE_1M_DB = 47.86  # ITS-G5 model's free-space loss at 1 m, 5.9 GHz (comms_models.itsg5.radio)
RECEIVED, HALF_DUPLEX, SENSING, PROPAGATION, COLLISION = 0, 1, 2, 3, 4  # reception.LOSS_CAUSES
OWN_SLOT = (1 << 22) - 1  # the slot of a ring entry that marks the station's own transmission (history.Heard)
_GOLDEN = 0x9E3779B97F4A7C15


@njit(cache=True)
def _mix(x):  # pragma: no cover - compiled
    # SplitMix64 finaliser (Steele, Lea, Flood, OOPSLA 2014), as core.rng._splitmix64
    x = np.uint64(x)
    x = (x + np.uint64(_GOLDEN)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    return x ^ (x >> np.uint64(31))


@njit(cache=True)
def _u01(key, a, b, c):  # pragma: no cover - compiled
    """A uniform in [0, 1) that is a function of (key, a, b, c) only."""
    h = _mix(_mix(np.uint64(key) ^ _mix(np.uint64(a))) ^ np.uint64(c))
    h = _mix(h ^ _mix(np.uint64(b) + np.uint64(0x5851F42D4C957F2D)))
    return float(h >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def _normal(key, a, b, c):  # pragma: no cover - compiled
    """A standard normal of (key, a, b, c): Box-Muller on two keyed uniforms."""
    u1 = 1.0 - _u01(key, a, b, c)
    u2 = _u01(np.uint64(key) ^ np.uint64(_GOLDEN), a, b, c)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


@njit(cache=True)
def loss_constants(pl):  # pragma: no cover - compiled
    """The terms of ``_loss_db`` that do not depend on the distance, as ``PL[7:12]``: 20 log10 fc,
    2 x 17.3 log10 h, 2.7 log10 fc, 20 log10(fc / 5) and the dual slope's loss at its breakpoint (evaluated as the
    formulas did inline, so every loss stays the same to the bit)."""
    fc = pl[1]
    return np.array([20.0 * math.log10(fc), 2.0 * 17.3 * math.log10(pl[2]), 2.7 * math.log10(fc),
                     20.0 * math.log10(fc / 5.0), FREE_SPACE_1M_DB + 20.0 * math.log10(pl[4])])


@njit(cache=True)
def _loss_db(d, pl):  # pragma: no cover - compiled
    """Mean path loss [dB] at distance ``d`` [m] (see ``propagation``)."""
    kind = int(pl[0])
    d = max(d, pl[3])
    lg = math.log10(d)
    if kind == WINNER_B1:
        loss = 22.7 * lg + 27.0 + pl[7] if d < pl[4] else 40.0 * lg + 7.56 - pl[8] + pl[9]
        return max(loss, 20.0 * lg + 46.4 + pl[10])
    if kind == TR37885_HIGHWAY:
        return 32.4 + 20.0 * lg + pl[7]
    if kind == FREE_SPACE or d < pl[4]:
        return FREE_SPACE_1M_DB + 20.0 * lg
    return pl[11] + 40.0 * math.log10(d / pl[4])


@njit(cache=True)
def _sigma_db(d, pl):  # pragma: no cover - compiled
    """Shadowing std dev [dB] at distance ``d``."""
    kind = int(pl[0])
    if kind == FREE_SPACE:
        return 0.0
    if kind == DUAL_SLOPE:
        return pl[5] if d < pl[4] else pl[6]
    return pl[5]


@njit(cache=True)
def _power_dbm(d, sender, receiver, sf, tx_dbm, pl, shadow_key, fade_key, fade_lim, fade_db):  # pragma: no cover
    """Received power [dBm] of ``sender``'s transmission in subframe ``sf`` at ``receiver``, ``d`` metres away."""
    p = tx_dbm - _loss_db(d, pl)
    s = _sigma_db(d, pl)
    if s > 0.0:
        p += s * _normal(shadow_key, sender, receiver, sf)
    if fade_lim.shape[0] > 0:
        c = 0
        while c < fade_lim.shape[0] - 1 and d > fade_lim[c]:
            c += 1
        k = fade_db.shape[1]
        p += fade_db[c, min(int(_u01(fade_key, sender, receiver, sf) * k), k - 1)]
    return p


@njit(cache=True)
def _interp(v, xs, ys):  # pragma: no cover - compiled
    """Piecewise-linear ``ys(xs)`` at ``v``, constant beyond the ends (``np.interp``)."""
    n = xs.shape[0]
    if v <= xs[0]:
        return ys[0]
    if v >= xs[n - 1]:
        return ys[n - 1]
    lo, hi = 0, n - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if xs[mid] <= v:
            lo = mid
        else:
            hi = mid
    w = (v - xs[lo]) / (xs[hi] - xs[lo])
    return ys[lo] + w * (ys[hi] - ys[lo])


@njit(cache=True)
def loss_db_array(d, pl):  # pragma: no cover - compiled
    """``_loss_db`` of every distance of ``d``."""
    out = np.empty(d.shape[0])
    for i in range(d.shape[0]):
        out[i] = _loss_db(d[i], pl)
    return out


@njit(cache=True)
def sigma_db_array(d, pl):  # pragma: no cover - compiled
    """``_sigma_db`` of every distance of ``d``."""
    out = np.empty(d.shape[0])
    for i in range(d.shape[0]):
        out[i] = _sigma_db(d[i], pl)
    return out


@njit(cache=True)
def power_dbm_array(d, sender, receiver, sf, tx_dbm, pl, shadow_key, fade_key, fade_lim, fade_db):  # pragma: no cover
    """``_power_dbm`` of every link (one row of ``d, sender, receiver, sf`` each)."""
    out = np.empty(d.shape[0])
    for i in range(d.shape[0]):
        out[i] = _power_dbm(d[i], sender[i], receiver[i], sf[i], tx_dbm, pl, shadow_key, fade_key, fade_lim,
                            fade_db)
    return out


@njit(cache=True)
def _near(x, y, xt, yt, radius2, grid, g_start, g_items, cand):  # pragma: no cover - compiled
    """Rows within ``radius2`` of (xt, yt), ascending, into ``cand``; returns their count. ``grid`` = (x0, y0,
    cell, ncx, ncy) of a uniform grid whose cells are at least the radius wide (``itsg5.grid.build_grid``)."""
    x0, y0, cell, ncx, ncy = grid[0], grid[1], grid[2], int(grid[3]), int(grid[4])
    cx = min(max(int((xt - x0) / cell), 0), ncx - 1)
    cy = min(max(int((yt - y0) / cell), 0), ncy - 1)
    m = 0
    for gy in range(max(cy - 1, 0), min(cy + 2, ncy)):
        for gx in range(max(cx - 1, 0), min(cx + 2, ncx)):
            c = gy * ncx + gx
            for i in range(g_start[c], g_start[c + 1]):
                r = g_items[i]
                if (x[r] - xt) ** 2 + (y[r] - yt) ** 2 <= radius2:
                    cand[m] = r
                    m += 1
    cand[:m].sort()  # row order, as a scan of every station would visit them
    return m


@njit(cache=True)
def _hear(ring, ring_p, h_head, h_count, r, first_sf, sf, slot, x0, length, p):  # pragma: no cover - compiled
    """Append an entry to row ``r``'s ring (``history.Heard``: room was reserved; ``reserve`` forgets the old
    entries, so an append touches one cache line)."""
    cap = ring.shape[1]
    at = (h_head[r] + h_count[r]) % cap
    ring[r, at, 0] = (sf << 32) | (slot << 10) | (x0 << 5) | length
    ring_p[r, at, 1] = p
    h_count[r] += 1


@njit(cache=True)
def forget_heard(ring, h_head, h_count, first_sf):  # pragma: no cover - compiled
    """Drop the ring entries before subframe ``first_sf`` (``history.Heard``)."""
    cap = ring.shape[1]
    for r in range(h_count.shape[0]):
        while h_count[r] > 0 and (ring[r, h_head[r], 0] >> 32) < first_sf:
            h_head[r] = (h_head[r] + 1) % cap
            h_count[r] -= 1


@njit(cache=True)
def _links(tx_row, tx_id, sf, x, y, ids, radius2, tx_dbm, pl, shadow_key, fade_key, fade_lim, fade_db, grid,
           g_start, g_items, cand, out_t, out_r, out_p):  # pragma: no cover - compiled
    """Every (transmission, station) pair within the radius but the sender itself, transmission-major and in row
    order, with its received power [dBm]; returns their count, or -1 when they do not fit in ``out_*``."""
    k = 0
    cap = out_t.shape[0]
    for t in range(tx_row.shape[0]):
        xt = x[tx_row[t]]
        yt = y[tx_row[t]]
        m = _near(x, y, xt, yt, radius2, grid, g_start, g_items, cand)
        if k + m > cap:
            return -1
        for i in range(m):
            r = cand[i]
            if r == tx_row[t]:
                continue
            d2 = (x[r] - xt) ** 2 + (y[r] - yt) ** 2
            out_t[k] = t
            out_r[k] = r
            out_p[k] = _power_dbm(math.sqrt(d2), tx_id[t], ids[r], sf, tx_dbm, pl, shadow_key, fade_key, fade_lim,
                                  fade_db)
            k += 1
    return k


@njit(cache=True)
def _by_receiver(out_r, k, loc):  # pragma: no cover - compiled
    """The links of each station they reach, in CSR form over the stations numbered as first linked (``loc[r]``
    set, -1 elsewhere): ``(touched, m, start, order)``; each station's links keep their (transmission) order."""
    touched = np.empty(k, np.int64)
    m = 0
    for j in range(k):
        r = out_r[j]
        if loc[r] < 0:
            loc[r] = m
            touched[m] = r
            m += 1
    start = np.zeros(m + 1, np.int64)
    for j in range(k):
        start[loc[out_r[j]] + 1] += 1
    for i in range(m):
        start[i + 1] += start[i]
    fill = start[:m].copy()
    order = np.empty(k, np.int64)
    for j in range(k):
        i = loc[out_r[j]]
        order[fill[i]] = j
        fill[i] += 1
    return touched, m, start, order


@njit(cache=True)
def _busy(tx_row, tx_x0, tx_len, n_sub, noise_sub_mw, cbr_mw, loc, touched, m, start, order, out_t, mw, tx_of,
          busy):  # pragma: no cover - compiled
    """``busy[r]`` += the subchannels station r senses above ``cbr_mw`` in this subframe (its own count busy): the
    noise plus each transmission reaching it spread over its subchannels, summed in transmission order (a station
    without a link hears the noise alone). ``tx_of[r]``: 1 + the transmission of row r, 0 none."""
    n_tx = tx_row.shape[0]
    if noise_sub_mw > cbr_mw:
        for r in range(busy.shape[0]):
            if loc[r] < 0 and tx_of[r] == 0:
                busy[r] += n_sub
    rssi = np.empty(n_sub)
    for q in range(n_tx + m):  # the transmitters, then every other station with a link
        r = tx_row[q] if q < n_tx else touched[q - n_tx]
        if q >= n_tx and tx_of[r] > 0:
            continue
        rssi[:] = noise_sub_mw
        if loc[r] >= 0:
            for i in range(start[loc[r]], start[loc[r] + 1]):
                j = order[i]
                t = out_t[j]
                v = mw[j] / tx_len[t]
                for c in range(tx_x0[t], tx_x0[t] + tx_len[t]):
                    rssi[c] += v
        own = tx_of[r] - 1
        for c in range(n_sub):
            if (own >= 0 and tx_x0[own] <= c < tx_x0[own] + tx_len[own]) or rssi[c] > cbr_mw:
                busy[r] += 1


@njit(cache=True)
def receive_subframe(tx_row, tx_id, tx_slot, tx_x0, tx_len, tx_noise_mw, tx_shift_db, sf, x, y, ids, radius2, tx_dbm,
                     pl, shadow_key, fade_key, fade_lim, fade_db, sens_dbm, bler_key, bler_x, bler_y, n_sub,
                     noise_sub_mw, cbr_mw, grid, g_start, g_items, loc, tx_of, cand, out_t, out_r, out_p,
                     out_cause, busy, ring, ring_p, h_head, h_count, first_sf):  # pragma: no cover - compiled
    """Every transmission of subframe ``sf`` at every station within the radius (found on the grid ``grid,
    g_start, g_items``): the links ``out_*[:k]`` with their power and loss cause (see ``reception``), in
    transmission-major, row order; ``busy[r]`` += the subchannels station r senses above ``cbr_mw`` (its own count
    busy); every link and transmission enters the rings of ``history.Heard`` (``ring*``, ``h_*``), whose entries before
    ``first_sf`` are forgotten. ``loc`` (-1 everywhere) and ``tx_of`` (0) are scratch of a row each, left as found.
    Returns k, the number of links, or -1 (nothing changed) when they do not fit in ``out_*``."""
    n_tx = tx_row.shape[0]
    k = _links(tx_row, tx_id, sf, x, y, ids, radius2, tx_dbm, pl, shadow_key, fade_key, fade_lim, fade_db, grid,
               g_start, g_items, cand, out_t, out_r, out_p)
    if k < 0:
        return k
    for t in range(n_tx):
        tx_of[tx_row[t]] = t + 1
    mw = np.empty(k)
    for j in range(k):
        mw[j] = 10.0 ** (out_p[j] / 10.0)
    touched, m, start, order = _by_receiver(out_r, k, loc)
    # the share of transmission u's power that falls on t's subchannels (power spread evenly over u's)
    share = np.zeros((n_tx, n_tx))
    for t in range(n_tx):
        for u in range(n_tx):
            if u != t:
                lo = max(tx_x0[t], tx_x0[u])
                hi = min(tx_x0[t] + tx_len[t], tx_x0[u] + tx_len[u])
                if hi > lo:
                    share[t, u] = (hi - lo) / tx_len[u]
    for j in range(k):
        t = out_t[j]
        r = out_r[j]
        if tx_of[r] > 0:
            out_cause[j] = HALF_DUPLEX
        elif out_p[j] < sens_dbm:
            out_cause[j] = SENSING
        else:
            interference = 0.0  # in transmission order, over the transmissions that reach r (the others add 0)
            for i in range(start[loc[r]], start[loc[r] + 1]):
                interference += share[t, out_t[order[i]]] * mw[order[i]]
            signal = mw[j]
            noise = tx_noise_mw[t]
            draw = _u01(bler_key, tx_id[t], ids[r], sf)
            if draw < _interp(10.0 * math.log10(signal / noise) - tx_shift_db[t], bler_x, bler_y):
                out_cause[j] = PROPAGATION
            elif draw < _interp(10.0 * math.log10(signal / (noise + interference)) - tx_shift_db[t], bler_x, bler_y):
                out_cause[j] = COLLISION
            else:
                out_cause[j] = RECEIVED
    _busy(tx_row, tx_x0, tx_len, n_sub, noise_sub_mw, cbr_mw, loc, touched, m, start, order, out_t, mw, tx_of, busy)
    if ring.shape[0] > 0:  # the rings are kept (``history.Heard``; empty once sensing recomputes)
        _remember(tx_row, tx_slot, tx_x0, tx_len, sf, out_t, out_r, out_p, k, ring, ring_p, h_head, h_count,
                  first_sf)
    for i in range(m):
        loc[touched[i]] = -1
    for t in range(n_tx):
        tx_of[tx_row[t]] = 0
    return k


@njit(cache=True)
def _remember(tx_row, tx_slot, tx_x0, tx_len, sf, out_t, out_r, out_p, k, ring, ring_p, h_head, h_count,
              first_sf):  # pragma: no cover - compiled
    """The subframe's transmissions (marks: slot ``OWN_SLOT``) and links enter the rings of ``history.Heard``."""
    for t in range(tx_row.shape[0]):
        _hear(ring, ring_p, h_head, h_count, tx_row[t], first_sf, sf, OWN_SLOT, tx_x0[t], tx_len[t], 0.0)
    for j in range(k):
        t = out_t[j]
        _hear(ring, ring_p, h_head, h_count, out_r[j], first_sf, sf, tx_slot[t], tx_x0[t], tx_len[t], out_p[j])


@njit(cache=True)
def sense_window(h_sf, h_sender, h_slot, h_x0, h_len, h_snap, h_sx, h_sy, snap_x, snap_y, newest_snap, row, station,
                 first_sf, window, period, radius2, tx_dbm, pl, shadow_key, fade_key, fade_lim, fade_db, sens_dbm,
                 n_slots, own, rssi, pick, pick_p):  # pragma: no cover - compiled
    """What station ``station`` (row ``row`` of the position snapshots) sensed from the history rows ``h_*``
    (subframes ``first_sf`` .. ``first_sf + window - 1``, in order): ``own[s - first_sf]`` its own transmissions;
    ``rssi[phase, subchannel]`` += the power of every other transmission it heard, spread over its subchannels and
    folded modulo ``period`` (half-duplex: nothing in its own subframes); ``pick[:m]`` the history row of the last
    SCI it decoded from each other station (slot), ``pick_p[:m]`` its power. Returns m."""
    n = h_sf.shape[0]
    depth = snap_x.shape[0]
    for i in range(n):
        if h_sender[i] == station:
            own[h_sf[i] - first_sf] = True
    last = np.full(n_slots, -1, np.int64)
    power = np.empty(n)
    for i in range(n):
        if h_sender[i] == station or own[h_sf[i] - first_sf] or h_snap[i] <= newest_snap - depth:
            continue
        slot = h_snap[i] % depth
        rx = snap_x[slot, row]
        ry = snap_y[slot, row]
        if math.isnan(rx):
            continue
        d2 = (h_sx[i] - rx) ** 2 + (h_sy[i] - ry) ** 2
        if d2 > radius2:
            continue
        p = _power_dbm(math.sqrt(d2), h_sender[i], station, h_sf[i], tx_dbm, pl, shadow_key, fade_key, fade_lim,
                       fade_db)
        share = 10.0 ** (p / 10.0) / h_len[i]
        ph = h_sf[i] % period
        for c in range(h_x0[i], h_x0[i] + h_len[i]):
            rssi[ph, c] += share
        if p >= sens_dbm:
            last[h_slot[i]] = i
            power[i] = p
    m = 0
    for s in range(n_slots):
        if last[s] >= 0:
            pick[m] = last[s]
            pick_p[m] = power[last[s]]
            m += 1
    return m
