"""Compiled kernels of the C-V2X channel: the received power of a link, the receptions of a subframe (with what each
station heard, kept for its sensing) and the reservations a station sensed. Every compiled helper lives in this file
(numba's on-disk cache checks only a kernel's own file).

A link's power in a subframe is ``tx - PL(d) + sigma(d) z + F``: the mean path loss of ``propagation``, log-normal
shadowing with ``z`` a standard normal and, optionally, a Nakagami fading gain ``F`` [dB] read from a quantile table
of its distance class. ``z`` and the fading's uniform number are hashes of (purpose key, sender id, receiver id,
subframe) (SplitMix64, as ``core.rng``), so the power a station sensed is exactly the power its reception had, and
no draw depends on which other stations exist.

Path-loss parameters are a float64 array ``PL = [kind, fc_ghz, h_m, min_d_m, d_bp_m, sigma_near_db,
sigma_far_db]``; kinds are ``WINNER_B1``, ``TR37885_HIGHWAY``, ``DUAL_SLOPE`` and ``FREE_SPACE``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

WINNER_B1, TR37885_HIGHWAY, DUAL_SLOPE, FREE_SPACE = 0, 1, 2, 3
FREE_SPACE_1M_DB = 47.86  # ITS-G5 model's free-space loss at 1 m, 5.9 GHz (comms_models.itsg5.radio)
RECEIVED, HALF_DUPLEX, SENSING, PROPAGATION, COLLISION = 0, 1, 2, 3, 4  # reception.LOSS_CAUSES
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
def _loss_db(d, pl):  # pragma: no cover - compiled
    """Mean path loss [dB] at distance ``d`` [m] (see ``propagation``)."""
    kind = int(pl[0])
    fc = pl[1]
    d = max(d, pl[3])
    if kind == WINNER_B1:
        if d < pl[4]:
            loss = 22.7 * math.log10(d) + 27.0 + 20.0 * math.log10(fc)
        else:
            loss = 40.0 * math.log10(d) + 7.56 - 2.0 * 17.3 * math.log10(pl[2]) + 2.7 * math.log10(fc)
        return max(loss, 20.0 * math.log10(d) + 46.4 + 20.0 * math.log10(fc / 5.0))
    if kind == TR37885_HIGHWAY:
        return 32.4 + 20.0 * math.log10(d) + 20.0 * math.log10(fc)
    if kind == FREE_SPACE or d < pl[4]:
        return FREE_SPACE_1M_DB + 20.0 * math.log10(d)
    return FREE_SPACE_1M_DB + 20.0 * math.log10(pl[4]) + 40.0 * math.log10(d / pl[4])


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
def _hear(h_sf, h_slot, h_x0, h_len, h_p, h_head, h_count, r, sf, slot, x0, length, p):  # pragma: no cover
    """Append an entry to row ``r``'s ring (``history.Heard``; room was reserved)."""
    cap = h_sf.shape[1]
    at = (h_head[r] + h_count[r]) % cap
    h_sf[r, at] = sf
    h_slot[r, at] = slot
    h_x0[r, at] = x0
    h_len[r, at] = length
    h_p[r, at] = p
    h_count[r] += 1


@njit(cache=True)
def forget_heard(h_sf, h_head, h_count, first_sf):  # pragma: no cover - compiled
    """Drop the ring entries before subframe ``first_sf`` (``history.Heard``)."""
    cap = h_sf.shape[1]
    for r in range(h_count.shape[0]):
        while h_count[r] > 0 and h_sf[r, h_head[r]] < first_sf:
            h_head[r] = (h_head[r] + 1) % cap
            h_count[r] -= 1


@njit(cache=True)
def _links(tx_row, tx_id, sf, x, y, ids, radius2, tx_dbm, pl, shadow_key, fade_key, fade_lim, fade_db, grid,
           g_start, g_items, cand, out_t, out_r, out_p):  # pragma: no cover - compiled
    """Every (transmission, station) pair within the radius but the sender itself, transmission-major and in row
    order, with its received power [dBm]; returns their count."""
    k = 0
    for t in range(tx_row.shape[0]):
        xt = x[tx_row[t]]
        yt = y[tx_row[t]]
        m = _near(x, y, xt, yt, radius2, grid, g_start, g_items, cand)
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
def _busy(tx_row, tx_x0, tx_len, n_sub, noise_sub_mw, cbr_mw, loc, touched, m, transmitting, mw,
          busy):  # pragma: no cover - compiled
    """``busy[r]`` += the subchannels station r senses above ``cbr_mw`` in this subframe (its own count busy): the
    stations without a link hear the noise alone."""
    n_tx = tx_row.shape[0]
    if noise_sub_mw > cbr_mw:
        for r in range(busy.shape[0]):
            if loc[r] < 0 and not transmitting[r]:
                busy[r] += n_sub
    for t in range(n_tx + m):  # the transmitters, then every station with a link
        r = tx_row[t] if t < n_tx else touched[t - n_tx]
        if t >= n_tx and transmitting[r]:
            continue  # counted as a transmitter
        j = loc[r]
        for c in range(n_sub):
            rssi = noise_sub_mw
            own = False
            for u in range(n_tx):
                if tx_x0[u] <= c < tx_x0[u] + tx_len[u]:
                    rssi += (mw[u, j] if j >= 0 else 0.0) / tx_len[u]
                    own = own or tx_row[u] == r
            if own or rssi > cbr_mw:
                busy[r] += 1


@njit(cache=True)
def receive_subframe(tx_row, tx_id, tx_slot, tx_x0, tx_len, tx_noise_mw, tx_shift_db, sf, x, y, ids, radius2, tx_dbm,
                     pl, shadow_key, fade_key, fade_lim, fade_db, sens_dbm, bler_key, bler_x, bler_y, n_sub,
                     noise_sub_mw, cbr_mw, grid, g_start, g_items, loc, transmitting, cand, out_t, out_r, out_p,
                     out_cause, busy, h_sf, h_slot, h_x0, h_len, h_p, h_head, h_count,
                     first_sf):  # pragma: no cover - compiled
    """Every transmission of subframe ``sf`` at every station within the radius (found on the grid ``grid,
    g_start, g_items``): the links ``out_*[:k]`` with their power and loss cause (see ``reception``), in
    transmission-major, row order; ``busy[r]`` += the subchannels station r senses above ``cbr_mw`` (its own count
    busy); every link and transmission enters the rings of ``history.Heard`` (``h_*``), whose entries before
    ``first_sf`` are forgotten. ``loc`` (-1 everywhere) and ``transmitting`` (False) are scratch of a row each, left
    as found. Returns k, the number of links."""
    n_tx = tx_row.shape[0]
    for t in range(n_tx):
        transmitting[tx_row[t]] = True
    k = _links(tx_row, tx_id, sf, x, y, ids, radius2, tx_dbm, pl, shadow_key, fade_key, fade_lim, fade_db, grid,
               g_start, g_items, cand, out_t, out_r, out_p)
    # received powers [mW] by transmission and linked station (0: no link), stations numbered as first linked
    touched = np.empty(k, np.int64)
    m = 0
    for j in range(k):
        r = out_r[j]
        if loc[r] < 0:
            loc[r] = m
            touched[m] = r
            m += 1
    mw = np.zeros((n_tx, m))
    for j in range(k):
        mw[out_t[j], loc[out_r[j]]] = 10.0 ** (out_p[j] / 10.0)
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
        if transmitting[r]:
            out_cause[j] = HALF_DUPLEX
        elif out_p[j] < sens_dbm:
            out_cause[j] = SENSING
        else:
            interference = 0.0
            for u in range(n_tx):
                interference += share[t, u] * mw[u, loc[r]]
            signal = mw[t, loc[r]]
            noise = tx_noise_mw[t]
            draw = _u01(bler_key, tx_id[t], ids[r], sf)
            if draw < _interp(10.0 * math.log10(signal / noise) - tx_shift_db[t], bler_x, bler_y):
                out_cause[j] = PROPAGATION
            elif draw < _interp(10.0 * math.log10(signal / (noise + interference)) - tx_shift_db[t], bler_x, bler_y):
                out_cause[j] = COLLISION
            else:
                out_cause[j] = RECEIVED
    _busy(tx_row, tx_x0, tx_len, n_sub, noise_sub_mw, cbr_mw, loc, touched, m, transmitting, mw, busy)
    _remember(tx_row, tx_slot, tx_x0, tx_len, sf, out_t, out_r, out_p, k, h_sf, h_slot, h_x0, h_len, h_p, h_head,
              h_count, first_sf)
    for i in range(m):
        loc[touched[i]] = -1
    for t in range(n_tx):
        transmitting[tx_row[t]] = False
    return k


@njit(cache=True)
def _remember(tx_row, tx_slot, tx_x0, tx_len, sf, out_t, out_r, out_p, k, h_sf, h_slot, h_x0, h_len, h_p, h_head,
              h_count, first_sf):  # pragma: no cover - compiled
    """The subframe's transmissions (marks, slot -1) and links enter the rings of ``history.Heard``."""
    cap = h_sf.shape[1]
    for t in range(tx_row.shape[0]):
        r = tx_row[t]
        while h_count[r] > 0 and h_sf[r, h_head[r]] < first_sf:
            h_head[r] = (h_head[r] + 1) % cap
            h_count[r] -= 1
        _hear(h_sf, h_slot, h_x0, h_len, h_p, h_head, h_count, r, sf, -1, tx_x0[t], tx_len[t], 0.0)
    for j in range(k):
        r = out_r[j]
        while h_count[r] > 0 and h_sf[r, h_head[r]] < first_sf:
            h_head[r] = (h_head[r] + 1) % cap
            h_count[r] -= 1
        t = out_t[j]
        _hear(h_sf, h_slot, h_x0, h_len, h_p, h_head, h_count, r, sf, tx_slot[t], tx_x0[t], tx_len[t], out_p[j])


@njit(cache=True)
def reserved_power(res_sf, res_x0, res_len, res_rri, res_p, lo, hi, rri_tx, length, phase_ms, grid,
                   out):  # pragma: no cover - compiled
    """``out[y - lo, x]``: the strongest power of a sensed reservation that the candidate of ``length`` subchannels
    from x in subframe y (or one of its later occurrences y + j rri_tx) overlaps; -inf where none. A reservation
    announced in subframe s with interval P occupies s + q P, q = 1 (q <= phase_ms / P for P < phase_ms); P = 0
    (a dynamic grant) nothing.
    ``grid`` (window, subchannels) is scratch."""
    grid[:, :] = -np.inf
    for r in range(res_sf.shape[0]):
        rri = res_rri[r]
        if rri <= 0:  # a dynamic grant: its SCI reserves nothing ahead
            continue
        q_max = phase_ms // rri if rri < phase_ms else 1
        for q in range(1, q_max + 1):
            proj = res_sf[r] + q * rri
            j = 0
            while proj - j * rri_tx >= lo:
                y = proj - j * rri_tx
                if y <= hi:
                    for c in range(res_x0[r], res_x0[r] + res_len[r]):
                        if res_p[r] > grid[y - lo, c]:
                            grid[y - lo, c] = res_p[r]
                j += 1
    nx = out.shape[1]
    for w in range(out.shape[0]):
        for x in range(nx):
            best = -np.inf
            for k in range(length):
                best = max(best, grid[w, x + k])
            out[w, x] = best
