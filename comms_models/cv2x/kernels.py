"""Compiled kernels of the C-V2X channel: the received power of a link, the receptions of a subframe and what a
station sensed over its sensing window. Every compiled helper lives in this file (numba's on-disk cache checks only
a kernel's own file).

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
def receive_subframe(tx_row, tx_id, tx_x0, tx_len, tx_noise_mw, tx_shift_db, sf, x, y, ids, radius2, tx_dbm, pl,
                     shadow_key, fade_key, fade_lim, fade_db, sens_dbm, bler_key, bler_x, bler_y, n_sub,
                     noise_sub_mw, cbr_mw, mw, out_t, out_r, out_p, out_cause, busy):  # pragma: no cover - compiled
    """Every transmission of subframe ``sf`` at every station within the radius: ``mw[t, r]`` the received power
    (0 beyond the radius and at the sender), the links ``out_*[:k]`` with their power and loss cause (see
    ``reception``), and ``busy[r]`` += the subchannels station r senses above ``cbr_mw`` (its own count busy).
    Returns k, the number of links."""
    n_tx = tx_row.shape[0]
    n = x.shape[0]
    transmitting = np.zeros(n, np.bool_)
    for t in range(n_tx):
        transmitting[tx_row[t]] = True
    k = 0
    for t in range(n_tx):
        xt = x[tx_row[t]]
        yt = y[tx_row[t]]
        for r in range(n):
            mw[t, r] = 0.0
            if r == tx_row[t]:
                continue
            d2 = (x[r] - xt) ** 2 + (y[r] - yt) ** 2
            if d2 > radius2:
                continue
            p = _power_dbm(math.sqrt(d2), tx_id[t], ids[r], sf, tx_dbm, pl, shadow_key, fade_key, fade_lim, fade_db)
            mw[t, r] = 10.0 ** (p / 10.0)
            out_t[k] = t
            out_r[k] = r
            out_p[k] = p
            k += 1
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
                interference += share[t, u] * mw[u, r]
            signal = mw[t, r]
            noise = tx_noise_mw[t]
            draw = _u01(bler_key, tx_id[t], ids[r], sf)
            if draw < _interp(10.0 * math.log10(signal / noise) - tx_shift_db[t], bler_x, bler_y):
                out_cause[j] = PROPAGATION
            elif draw < _interp(10.0 * math.log10(signal / (noise + interference)) - tx_shift_db[t], bler_x, bler_y):
                out_cause[j] = COLLISION
            else:
                out_cause[j] = RECEIVED
    for r in range(n):
        for c in range(n_sub):
            rssi = noise_sub_mw
            own = False
            for t in range(n_tx):
                if tx_x0[t] <= c < tx_x0[t] + tx_len[t]:
                    rssi += mw[t, r] / tx_len[t]
                    own = own or tx_row[t] == r
            if own or rssi > cbr_mw:
                busy[r] += 1
    return k


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
