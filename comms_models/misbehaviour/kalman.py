"""Kalman-filter residuals: a filter per (receiver, sender) pair tracks the sender from its CAMs, and a CAM whose
innovation is improbable under the sender's noise fails the check.

The Kalman checks of F2MD (Kamel et al., "Simulation framework for misbehavior detection in vehicular networks",
IEEE TVT 69(6), 2020) compare each beacon with a filter's prediction from the previous ones. Here, per axis of the
local frame, the state is (position, velocity) and the model a constant velocity driven by a known input: the
acceleration vector the previous CAM claims (its longitudinal acceleration along its heading plus v x yaw rate
across it), so that braking and turning are not model errors; what is left (jerk, noise on the claimed acceleration)
is white acceleration noise of ``accel_sigma_mps2`` over each interval (the discrete white-noise acceleration model,
Bar-Shalom, Li, Kirubarajan, "Estimation with applications to tracking and navigation", 2001, sec. 6.3.3). A CAM
measures position and velocity (speed along the heading); its noise is the sender's (``position_sigma_m``,
``speed_sigma_mps``, ``heading_sigma_rad``: what a CAM's confidence fields would say, which coopsim sends as
unavailable). The heading noise enters as (v sigma_h)^2 on both axes' velocity noise, not across the heading only
(where J diag(sigma_s^2, sigma_h^2) J^T puts it, J the Jacobian of v (cos h, sin h)): a covariance that holds the
true one, so that both axes share one. The normalised innovation squared of the two axes is then chi-square with 4
degrees of freedom for an honest sender without heading noise, and smaller with it (conservative: each gate's false
alarms stay below its nominal rate); the gate is its ``1 - false_alarm`` quantile. A small persistent bias (a speed
offset of a few m/s, which the filter partly absorbs and the consecutive checks miss) shows in the sum of the last
``window`` NIS of the pair instead: the innovations of a consistent filter are white, so the sum is chi-square with
4 x window degrees of freedom (the time-average NIS test, Bar-Shalom et al. sec. 5.4.2), gated at the same
``false_alarm`` (and a CAM fails it only when its own NIS is above the mean, 4). A CAM beyond the single gate is an
outlier: it is not used to update the track, which coasts on its prediction; after ``max_misses`` outliers in a row
the track starts again from the newest CAM, so that one real jump (or the end of an offset) costs a few verdicts,
not the seconds a coasting track needs to take it in. A CAM whose generation time is not after the track's newest
fails the check and leaves the track as it was: a station's generation times only increase (ETSI EN 302 637-2,
generationDeltaTime; the delayed-message faults of the VeReMi extension, Kamel et al., ICC 2020), and restarting the
track there would let one such CAM blind the check to an offset that follows it; only a second reception of the same
CAM (the same generation time and content) passes. Both axes share the same noise, so they share one covariance per
pair (3 numbers), and the whole step is a few vectorised array operations.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from numba import njit
from pydantic import Field

from .base import Detector, DetectorParams
from .checks import bit
from .history import pair_keys

# float state columns of a track; z*: the content of the pair's newest CAM (x, y, speed, heading), so that a second
# reception of it is told from a forged CAM under the same generation time
_F = ("px", "py", "vx", "vy", "ux", "uy", "p_pp", "p_pv", "p_vv", "zx", "zy", "zv", "zh")
_I = ("gen", "filled", "misses")  # integer state columns


class KalmanParams(DetectorParams):
    """The sender's noise, the model's and the gate."""

    position_sigma_m: float = Field(0.3, gt=0, description="[m] the sender's position noise (1 sigma, per axis)")
    speed_sigma_mps: float = Field(0.15, gt=0, description="[m/s] the sender's speed noise (1 sigma)")
    heading_sigma_rad: float = Field(0.02, ge=0, description="[rad] the sender's heading noise (1 sigma)")
    accel_sigma_mps2: float = Field(1.0, gt=0, description="[m/s^2] unmodelled acceleration beyond the claimed one "
                                    "(1 sigma, per axis and interval)")
    false_alarm: float = Field(1e-6, gt=0, lt=0.5, description="each gate: probability that an honest CAM fails it "
                               "(chi-square)")
    window: int = Field(10, ge=1, le=100, description="CAMs whose NIS are summed for the bias gate (1: no window)")
    max_gap_s: float = Field(3.0, gt=0, description="[s] a pair silent this long starts a new track (no verdict)")
    max_misses: int = Field(3, ge=1, le=100, description="outliers in a row after which the track starts again "
                            "from the newest CAM (a sender that really jumped, or whose offset stays)")


def chi2_survival(x: float, dof: int) -> float:
    """P(chi-square(dof) > x) for an even ``dof``: exp(-x/2) sum_{i < dof/2} (x/2)^i / i! (the Poisson sum)."""
    term = total = math.exp(-x / 2)
    for i in range(1, dof // 2):
        term *= (x / 2) / i
        total += term
    return total


def chi2_quantile(false_alarm: float, dof: int) -> float:
    """The x with P(chi-square(dof) > x) = ``false_alarm`` (``dof`` even), by bisection (the survival falls)."""
    lo, hi = 0.0, float(dof)
    while chi2_survival(hi, dof) > false_alarm:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if chi2_survival(mid, dof) > false_alarm else (lo, mid)
    return 0.5 * (lo + hi)


class KalmanTracks:
    """One track per (receiver, sender) pair, in a sorted key array (as ``history.PairHistory``)."""

    def __init__(self, params: KalmanParams) -> None:
        self.p = params
        self.gate = chi2_quantile(params.false_alarm, 4)
        self.window_gate = chi2_quantile(params.false_alarm, 4 * params.window)
        self.keys = np.empty(0, np.int64)
        self.f = np.empty((0, len(_F)))  # per track: ``_F``
        self.i = np.empty((0, len(_I)), np.int64)  # per track: ``_I``
        self.nis = np.empty((0, params.window))  # the pair's last NIS, newest in column 0

    def forget(self, ids: np.ndarray) -> None:
        """Drop the tracks of which a station of ``ids`` is either end."""
        keep = ~(np.isin(self.keys >> 32, ids) | np.isin(self.keys & 0xFFFFFFFF, ids))
        self.keys, self.f, self.i, self.nis = self.keys[keep], self.f[keep], self.i[keep], self.nis[keep]

    def judge(self, receiver: np.ndarray, sender: np.ndarray, gen: np.ndarray, x: np.ndarray, y: np.ndarray,
              yaw: np.ndarray, v: np.ndarray, a: np.ndarray, yaw_rate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per CAM (one row each, any order): its normalised innovation squared (NaN: no track yet) and whether it
        fails a gate (its own NIS, or the sum over the pair's last ``window``); every track is updated with its
        CAMs, oldest first."""
        n = len(receiver)
        nis = np.full(n, np.nan)
        failed = np.zeros(n, bool)
        if n == 0:
            return nis, failed
        keys = pair_keys(receiver, sender)
        gen = np.asarray(gen, np.int64)
        meas = np.ascontiguousarray(np.stack([np.asarray(c, np.float64) for c in (x, y, yaw, v, a, yaw_rate)]))
        sk = np.sort(keys)
        if n == 1 or (sk[1:] != sk[:-1]).all():  # the usual step: one CAM per pair
            nis[:], failed[:] = self._round(keys, gen, meas)
            return nis, failed
        order = np.lexsort((gen, keys))
        sk = keys[order]
        start = np.r_[True, sk[1:] != sk[:-1]]
        rank = np.arange(n) - np.maximum.accumulate(np.where(start, np.arange(n), 0))
        for r in range(int(rank.max()) + 1):  # a pair's CAMs of one step in turn
            rows = order[rank == r]
            nis[rows], failed[rows] = self._round(keys[rows], gen[rows], np.ascontiguousarray(meas[:, rows]))
        return nis, failed

    def _round(self, keys: np.ndarray, gen: np.ndarray, meas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One CAM per pair (``keys`` unique; ``meas``: x, y, yaw, v, a, yaw rate): innovation against the
        prediction, then the update (``_round_kernel``)."""
        p = self.p
        pos = np.searchsorted(self.keys, keys)
        found = pos < len(self.keys)
        found[found] = self.keys[pos[found]] == keys[found]
        k = len(keys)
        nis, failed = np.empty(k), np.empty(k, np.bool_)
        new_f, new_i, new_nis = np.empty((k, len(_F))), np.empty((k, len(_I)), np.int64), np.empty((k, p.window))
        _round_kernel(pos, found, gen, meas, self.f, self.i, self.nis, p.accel_sigma_mps2**2, p.position_sigma_m**2,
                      p.speed_sigma_mps**2, p.heading_sigma_rad, self.gate, self.window_gate,
                      round(p.max_gap_s * 1e9), p.max_misses, nis, failed, new_f, new_i, new_nis)
        at = pos[found]
        self.f[at], self.i[at], self.nis[at] = new_f[found], new_i[found], new_nis[found]
        if not found.all():
            merged = np.concatenate([self.keys, keys[~found]])
            order = np.argsort(merged, kind="stable")
            self.keys = merged[order]
            self.f = np.concatenate([self.f, new_f[~found]])[order]
            self.i = np.concatenate([self.i, new_i[~found]])[order]
            self.nis = np.concatenate([self.nis, new_nis[~found]])[order]
        return nis, failed


@njit(cache=True)
def _finite(value: float) -> float:  # pragma: no cover - compiled
    """NaN -> 0, +-inf -> the largest float (np.nan_to_num)."""
    if np.isnan(value):
        return 0.0
    if np.isinf(value):
        return 1.7976931348623157e308 if value > 0 else -1.7976931348623157e308
    return value


@njit(cache=True)
def _same(a: float, b: float) -> bool:  # pragma: no cover - compiled
    """Equal, or both NaN (an unavailable field)."""
    return a == b or (np.isnan(a) and np.isnan(b))


@njit(cache=True)
def _same_content(track: np.ndarray, x: float, y: float, v: float, yaw: float) -> bool:  # pragma: no cover
    """Whether a CAM says what the track's newest said (``zx``, ``zy``, ``zv``, ``zh``): a second reception of it."""
    return _same(x, track[9]) and _same(y, track[10]) and _same(v, track[11]) and _same(yaw, track[12])


@njit(cache=True)
def _round_kernel(pos, found, gen, meas, tf, ti, tnis, qa, r_p, r_s, sigma_h, gate, window_gate, max_gap_ns,
                  max_misses, out_nis, out_failed, new_f, new_i, new_nis):  # pragma: no cover - compiled
    """Per CAM k (one per pair): predict its track (row ``pos[k]`` where ``found[k]``) over the interval since the
    track's CAM (per axis F = [[1, dt], [0, 1]], the claimed acceleration as input, Q of white acceleration), its
    NIS against S = P + R (the measurement is the state; S inverted in closed form), the gates, then the update
    K = P S^-1 (an outlier coasts; ``max_misses`` of them in a row start the track again): the new track in row k
    of ``new_f``, ``new_i``, ``new_nis``. A CAM generated at or before the track's newest keeps the track and fails
    (no NIS), unless it is that CAM again."""
    w = tnis.shape[1]
    for k in range(len(pos)):
        x, y, yaw, v, a, wr = meas[0, k], meas[1, k], meas[2, k], meas[3, k], meas[4, k], meas[5, k]
        t = pos[k]
        h_px = h_py = h_vx = h_vy = h_ux = h_uy = h_pp = h_pv = h_vv = 0.0
        h_filled, h_misses, dt, tracked = 0, 0, 0.0, False
        if found[k]:
            h_px, h_py, h_vx, h_vy = tf[t, 0], tf[t, 1], tf[t, 2], tf[t, 3]
            h_ux, h_uy, h_pp, h_pv, h_vv = tf[t, 4], tf[t, 5], tf[t, 6], tf[t, 7], tf[t, 8]
            h_filled, h_misses = ti[t, 1], ti[t, 2]
            d_ns = gen[k] - ti[t, 0]
            if d_ns <= 0:  # repeated or backdated: the track stays, the CAM fails unless it is the newest again
                new_f[k, :], new_i[k, :], new_nis[k, :] = tf[t, :], ti[t, :], tnis[t, :]
                out_nis[k], out_failed[k] = np.nan, not (d_ns == 0 and _same_content(tf[t], x, y, v, yaw))
                continue
            tracked = d_ns <= max_gap_ns
            dt = d_ns / 1e9 if tracked else 0.0
        cos, sin = np.cos(yaw), np.sin(yaw)
        zvx, zvy = v * cos, v * sin
        px = h_px + h_vx * dt + 0.5 * h_ux * dt**2
        py = h_py + h_vy * dt + 0.5 * h_uy * dt**2
        vx, vy = h_vx + h_ux * dt, h_vy + h_uy * dt
        pp = h_pp + 2 * dt * h_pv + dt**2 * h_vv + qa * dt**4 / 4
        pv = h_pv + dt * h_vv + qa * dt**3 / 2
        vv = h_vv + qa * dt**2
        r_v = r_s + (v * sigma_h) ** 2  # the across-heading noise on both axes: conservative, see the module doc
        s_pp, s_pv, s_vv = pp + r_p, pv, vv + r_v
        det = s_pp * s_vv - s_pv**2
        ix, ivx, iy, ivy = x - px, zvx - vx, y - py, zvy - vy
        nis = (s_vv * (ix**2 + iy**2) - 2 * s_pv * (ix * ivx + iy * ivy) + s_pp * (ivx**2 + ivy**2)) / det
        if not tracked:
            nis = np.nan
        outlier = tracked and nis > gate
        # the window holds each NIS up to the single gate: one outlier alone does not fail the next CAMs' sums
        total = 0.0
        if tracked:
            new_nis[k, 0] = min(nis, gate)
            for j in range(1, w):
                new_nis[k, j] = tnis[t, j - 1]
            for j in range(w):
                total += new_nis[k, j]
        else:
            new_nis[k, :] = 0.0
        filled = min(h_filled + 1, w) if tracked else 0
        # the bias gate flags a CAM that itself lies beyond the mean NIS (4): not the first honest CAMs after a bias
        # ended, whose window still holds it
        out_failed[k] = outlier or (tracked and filled == w and total > window_gate and nis > 4.0)
        out_nis[k] = nis
        misses = h_misses + 1 if outlier else 0
        if outlier and misses >= max_misses:  # start again from the newest CAM, as a new track
            outlier = tracked = False
            misses = filled = 0
        use = tracked and not outlier
        if use:  # update: K = P S^-1, state += K innovation, P = P - K P (symmetric)
            k_pp, k_pv = (pp * s_vv - pv * s_pv) / det, (pv * s_pp - pp * s_pv) / det
            k_vp, k_vv = (pv * s_vv - vv * s_pv) / det, (vv * s_pp - pv * s_pv) / det
            f = (px + k_pp * ix + k_pv * ivx, py + k_pp * iy + k_pv * ivy, vx + k_vp * ix + k_vv * ivx,
                 vy + k_vp * iy + k_vv * ivy, pp - (k_pp * pp + k_pv * pv), pv - (k_pp * pv + k_pv * vv),
                 vv - (k_vp * pv + k_vv * vv))
        elif outlier:  # it coasts on its prediction
            f = (px, py, vx, vy, pp, pv, vv)
        else:  # a new track at the CAM
            f = (x, y, zvx, zvy, r_p, 0.0, r_v)
        new_f[k, 0], new_f[k, 1], new_f[k, 2], new_f[k, 3] = f[0], f[1], f[2], f[3]
        new_f[k, 6], new_f[k, 7], new_f[k, 8] = f[4], f[5], f[6]
        new_f[k, 9], new_f[k, 10], new_f[k, 11], new_f[k, 12] = x, y, v, yaw
        if outlier:
            new_f[k, 4], new_f[k, 5] = _finite(h_ux), _finite(h_uy)
        else:  # the claimed acceleration drives the next interval (unavailable: nothing)
            new_f[k, 4] = _finite(a * cos - v * wr * sin)
            new_f[k, 5] = _finite(a * sin + v * wr * cos)
        new_i[k, 0], new_i[k, 1], new_i[k, 2] = gen[k], filled, misses


class KalmanDetector(Detector):
    """The Kalman residual check alone (``kalman``): a CAM is misbehaving when its innovation fails the gate. The
    plausibility detector runs the same check beside the others when ``kalman`` is in its ``checks``."""

    Params = KalmanParams

    def __init__(self, params: KalmanParams, min_interval_s: float) -> None:
        super().__init__(params, min_interval_s)
        self.tracks = KalmanTracks(params)

    def despawn(self, ids: np.ndarray) -> None:
        self.tracks.forget(ids)

    def judge(self, t_ns: int, messages: Mapping[str, np.ndarray], own: Mapping[str, np.ndarray],
              sensor: Mapping[str, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
        failed = cam_residuals(self.tracks, messages)
        return np.where(failed, bit("kalman"), 0).astype(np.int64), failed


def cam_residuals(tracks: KalmanTracks, messages: Mapping[str, np.ndarray]) -> np.ndarray:
    """Per message: whether it is a CAM that fails the Kalman gate of ``tracks`` (which it updates)."""
    n = len(messages["receiver"])
    failed = np.zeros(n, bool)
    kind = messages.get("kind")
    rows = np.arange(n) if kind is None else np.flatnonzero(np.asarray(kind) == 0)
    if len(rows):
        m = {name: np.asarray(messages[name])[rows] for name in ("receiver", "sender", "generated_ns", "x", "y",
                                                                  "yaw", "v", "a", "yaw_rate")}
        failed[rows] = tracks.judge(m["receiver"], m["sender"], m["generated_ns"], m["x"], m["y"], m["yaw"], m["v"],
                                    m["a"], m["yaw_rate"])[1]
    return failed
