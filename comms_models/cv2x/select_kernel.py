"""Compiled resource selection: what a station sensed (from its ring of what it heard, ``history.Heard``), the
candidates its exclusions leave (TS 36.213 14.1.1.6 steps 5-7) and its pick (LTE: among the fifth with the lowest
S-RSSI, steps 8-10; NR: uniformly), for every station of a subframe that reselects, in one call
(``reselect_rows``). ``sps`` documents the procedure and keeps the single-selection API; ``sensing`` the view.
Every compiled helper lives in this file (numba's on-disk cache checks only a kernel's own file).

The random numbers are ``core.rng.KeyedDraws``' values, computed here from the same hashes (SplitMix64): the pick's
by (station, copy, subframe) and the order of equal candidates by (station, candidate, subframe), under their
purpose keys (salted as ``KeyedDraws.random`` salts them).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

OWN_SLOT = (1 << 22) - 1  # kernels.OWN_SLOT: a ring entry marking the station's own transmission
_MASK = 0xFFFFFFFFFFFFFFFF


def salted(key: np.uint64) -> np.uint64:
    """The key ``KeyedDraws(key, ...).random`` hashes with (salt 1)."""
    return np.uint64((int(key) ^ 0x9E3779B97F4A7C15) & _MASK)


@njit(cache=True)
def _mix(x):  # pragma: no cover - compiled
    # SplitMix64 finaliser (Steele, Lea, Flood, OOPSLA 2014), as core.rng._splitmix64
    x = np.uint64(x)
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(_MASK)
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & np.uint64(_MASK)
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & np.uint64(_MASK)
    return x ^ (x >> np.uint64(31))


@njit(cache=True)
def _u01(key, a, b, c):  # pragma: no cover - compiled
    """``core.rng.keyed_u01(key, a, b, c)``."""
    event = _mix(_mix(np.uint64(key) ^ _mix(np.uint64(a))) ^ np.uint64(c))
    h = _mix(np.uint64(event) ^ _mix(np.uint64(b) + np.uint64(0x5851F42D4C957F2D)))
    return float(h >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def sense_heard(ring, ring_p, h_head, h_count, row, first_sf, n, period, sens_dbm, own, rssi, last, seen, res_sf,
                res_x0, res_len, res_p):  # pragma: no cover - compiled
    """From row ``row``'s ring (``history.Heard``), oldest first, the entries of subframes [first_sf, n):
    ``own[s - first_sf]`` its own transmissions; ``rssi[phase, subchannel]`` += the power of every link it heard,
    spread over the sender's subchannels and folded modulo ``period`` (half-duplex: nothing in its own subframes);
    ``res_*[:m]`` the last SCI it decoded (power at least ``sens_dbm``) from each sender, by ascending sender slot.
    ``last`` (-1 everywhere) is left as found. Returns m."""
    cap = ring.shape[1]
    head, count = h_head[row], h_count[row]
    for i in range(count):
        e = ring[row, (head + i) % cap, 0]
        s = e >> 32
        if ((e >> 10) & OWN_SLOT) == OWN_SLOT and first_sf <= s < n:
            own[s - first_sf] = True
    m = 0
    for i in range(count):
        at = (head + i) % cap
        e = ring[row, at, 0]
        s = e >> 32
        slot = (e >> 10) & OWN_SLOT
        if slot == OWN_SLOT or s < first_sf or s >= n or own[s - first_sf]:
            continue
        x0 = (e >> 5) & 31
        length = e & 31
        p = ring_p[row, at, 1]
        share = 10.0 ** (p / 10.0) / length
        ph = s % period
        for c in range(x0, x0 + length):
            rssi[ph, c] += share
        if p >= sens_dbm:
            if last[slot] < 0:
                seen[m] = slot
                m += 1
            last[slot] = at
    slots = np.sort(seen[:m])
    for j in range(m):
        at = last[slots[j]]
        e = ring[row, at, 0]
        res_sf[j] = e >> 32
        res_x0[j] = (e >> 5) & 31
        res_len[j] = e & 31
        res_p[j] = ring_p[row, at, 1]
        last[slots[j]] = -1
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


@njit(cache=True)
def candidates(n, length, rri_own, rri_tx, t1, t2, min_candidates, threshold_dbm, step_db, n_sub, phase, own_sf,
               res_sf, res_x0, res_len, res_rri, res_p, keep):  # pragma: no cover - compiled
    """``keep[w, x]`` (window slots n + t1 .. n + t2, first subchannels 0 .. n_sub - length): the candidates left
    after the half-duplex exclusion (slots a period of 100 ms, or ``rri_own`` below it, after one of ``own_sf``) and
    the reservations received above the threshold, raised by ``step_db`` until ``min_candidates`` of them remain;
    all of them when nothing remains. Returns (threshold, need, remaining)."""
    w_n = t2 - t1 + 1
    nx = n_sub - length + 1
    total = w_n * nx
    own_phase = np.zeros(phase, np.bool_)
    for o in own_sf:
        own_phase[o % phase] = True
    free = np.ones(w_n, np.bool_)
    for w in range(w_n):
        y = n + t1 + w
        if own_sf.shape[0] == 0:
            continue
        excluded = own_phase[y % phase]
        if rri_own < phase:
            for o in own_sf:
                gap = y - o
                if gap > 0 and gap <= phase and gap % rri_own == 0:
                    excluded = True
        free[w] = not excluded
    power = np.empty((w_n, nx))
    reserved_power(res_sf, res_x0, res_len, res_rri, res_p, n + t1, n + t2, rri_tx, length, phase,
                   np.empty((w_n, n_sub)), power)
    need = math.ceil(min_candidates * total)
    top = -np.inf
    for w in range(w_n):
        for x in range(nx):
            top = max(top, power[w, x])
    threshold = threshold_dbm
    while True:
        count = 0
        for w in range(w_n):
            for x in range(nx):
                keep[w, x] = free[w] and not (power[w, x] > threshold)
                count += keep[w, x]
        if count >= need or threshold > top:
            break
        threshold += step_db
    if count == 0:  # nothing left at all (every slot half-duplex excluded): the whole window
        keep[:w_n, :nx] = True
        count = total
    return threshold, need, count


@njit(cache=True)
def rank_pick(n, length, t1, need, rri, phase, rssi, keep, tie, u):  # pragma: no cover - compiled
    """LTE steps 8-10: among the kept candidates (``keep[w, x]``) the ``need`` with the lowest S-RSSI of ``rssi``
    (folded onto min(phase, rri)) averaged over the candidate's subchannels, ties by ``tie[w * nx + x]`` then
    window order; the one at ``u`` of them. Returns (slot, first subchannel)."""
    w_n, nx = keep.shape
    period = min(phase, rri)
    folded = rssi
    if period != phase:  # the mean over the 100 ms's shorter periods, summed in order
        chunks = phase // period
        folded = rssi[:period].copy()
        for i in range(1, chunks):
            folded += rssi[i * period:(i + 1) * period]
        folded = folded / chunks
    flat = np.empty(w_n * nx, np.int64)
    metric = np.empty(w_n * nx)
    ties = np.empty(w_n * nx)
    f = 0
    for w in range(w_n):
        cells = folded[(n + t1 + w) % period]
        for x in range(nx):
            if keep[w, x]:
                value = 0.0
                for k in range(length):
                    value += cells[x + k]
                flat[f] = w * nx + x
                metric[f] = value / length
                ties[f] = tie[w * nx + x]
                f += 1
    by_tie = np.argsort(ties[:f], kind="mergesort")
    order = by_tie[np.argsort(metric[:f][by_tie], kind="mergesort")]
    best = max(1, min(need, f))
    pick = flat[order[min(int(u * best), best - 1)]]
    return n + t1 + pick // nx, pick % nx


@njit(cache=True)
def uniform_picks(n, t1, keep, u, out_sf, out_x0):  # pragma: no cover - compiled
    """NR: one kept candidate per number of ``u``, uniformly among those in slots no earlier pick took (in window
    order), into ``out_*`` in time order. Returns how many."""
    w_n, nx = keep.shape
    free = keep.copy()
    k = 0
    for v in u:
        count = 0
        for w in range(w_n):
            for x in range(nx):
                count += free[w, x]
        if count == 0:
            break
        target = min(int(v * count), count - 1)
        for w in range(w_n):
            for x in range(nx):
                if free[w, x]:
                    if target == 0:
                        out_sf[k] = n + t1 + w
                        out_x0[k] = x
                    target -= 1
        free[out_sf[k] - n - t1, :] = False
        k += 1
    order = np.argsort(out_sf[:k])
    sfs, x0s = out_sf[:k][order], out_x0[:k][order]
    out_sf[:k] = sfs
    out_x0[:k] = x0s
    return k


@njit(cache=True)
def reselect_rows(rows, stations, lengths, n, ring, ring_p, h_head, h_count, last, seen, window, phase, n_sub,
                  sens_dbm, rri_heard, rri_own, rri_tx, rri, t1, t2, min_candidates, threshold_dbm, step_db, nr,
                  copies, pick_key, tie_key, out_sf, out_x0, out_count):  # pragma: no cover - compiled
    """A selection for each station of ``rows`` whose packet arrived in slot ``n``: what it sensed in [n - window,
    n - 1] (reservations announced with ``rri_heard``), the candidates (``candidates``) and its pick: LTE
    (``nr`` False) by ``rank_pick``, NR by ``uniform_picks`` (``copies`` of them). ``out_sf[i, :out_count[i]]``,
    ``out_x0[i, ...]``: the slots and first subchannels of row i's picks, in time order."""
    own = np.zeros(window, np.bool_)
    rssi = np.zeros((phase, n_sub))
    cap = seen.shape[0]
    res_sf, res_x0, res_len, res_p = (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64),
                                      np.empty(cap))
    keep = np.zeros((t2 - t1 + 1, n_sub), np.bool_)
    first = n - window
    scale = phase / window
    for i in range(rows.shape[0]):
        row, station, length = rows[i], stations[i], lengths[i]
        own[:] = False
        rssi[:, :] = 0.0
        m = sense_heard(ring, ring_p, h_head, h_count, row, first, n, phase, sens_dbm, own, rssi, last, seen,
                        res_sf, res_x0, res_len, res_p)
        own_sf = first + np.flatnonzero(own)
        nx = n_sub - length + 1
        kept = keep[:, :nx]
        _, need, _ = candidates(n, length, rri_own, rri_tx, t1, t2, min_candidates, threshold_dbm,
                                step_db, n_sub, phase, own_sf, res_sf[:m], res_x0[:m], res_len[:m],
                                np.full(m, rri_heard, np.int64), res_p[:m], kept)
        if nr:
            u = np.empty(copies)
            for c in range(copies):
                u[c] = _u01(pick_key, station, c, n)
            out_count[i] = uniform_picks(n, t1, kept, u, out_sf[i], out_x0[i])
            continue
        tie = np.empty(kept.shape[0] * nx)
        for w in range(kept.shape[0]):
            for x in range(nx):
                if kept[w, x]:
                    tie[w * nx + x] = _u01(tie_key, station, w * nx + x, n)
        out_sf[i, 0], out_x0[i, 0] = rank_pick(n, length, t1, need, rri, phase, rssi * scale, kept, tie,
                                               _u01(pick_key, station, 0, n))
        out_count[i] = 1
