"""Kalman-filter residuals: a filter per (receiver, sender) pair tracks the sender from its CAMs, and a CAM whose
innovation is improbable under the sender's noise fails the check.

The Kalman checks of F2MD (Kamel et al., "Simulation framework for misbehavior detection in vehicular networks",
IEEE TVT 69(6), 2020) compare each beacon with a filter's prediction from the previous ones. Here, per axis of the
local frame, the state is (position, velocity) and the model a constant velocity driven by a known input: the
acceleration vector the previous CAM claims (its longitudinal acceleration along its heading plus v x yaw rate
across it), so that braking and turning are not model errors; what is left (jerk, noise on the claimed
acceleration) is white acceleration noise of ``accel_sigma_mps2`` over each interval (the discrete white-noise
acceleration model, Bar-Shalom, Li, Kirubarajan, "Estimation with applications to tracking and navigation", 2001,
sec. 6.3.3). A CAM measures position and velocity (speed along the heading); its noise is the sender's
(``position_sigma_m``, ``speed_sigma_mps``, ``heading_sigma_rad``: what a CAM's confidence fields would say, which
coopsim sends as unavailable). The normalised innovation squared of the two axes is chi-square with 4 degrees of
freedom for an honest sender; the gate is its ``1 - false_alarm`` quantile. A small persistent bias (a speed
offset of a few m/s, which the filter partly absorbs and the consecutive checks miss) shows in the sum of the last
``window`` NIS of the pair instead: the innovations of a consistent filter are white, so the sum is chi-square with
4 x window degrees of freedom (the time-average NIS test, Bar-Shalom et al. sec. 5.4.2), gated at the same
``false_alarm`` (and a CAM fails it only when its own NIS is above the mean, 4). A CAM beyond the single gate is an
outlier: it is not used to update the track, which coasts on its prediction; after ``max_misses`` outliers in a row
the track starts again from the newest CAM, so that one real jump (or the end of an offset) costs a few verdicts,
not the seconds a coasting track needs to take it in. Both axes share the same noise, so
they share one covariance per pair (3 numbers), and the whole step is a few vectorised array operations.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from pydantic import Field

from .base import Detector, DetectorParams
from .checks import bit
from .history import pair_keys

_STATE = ("gen", "px", "py", "vx", "vy", "ux", "uy", "p_pp", "p_pv", "p_vv", "filled", "nis", "misses")


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
        self.cols: dict[str, np.ndarray] = {name: np.empty(0, np.int64 if name in ("gen", "filled", "misses")
                                                            else np.float64) for name in _STATE}
        self.cols["nis"] = np.empty((0, params.window))  # the pair's last NIS, newest in column 0

    def forget(self, ids: np.ndarray) -> None:
        """Drop the tracks of which a station of ``ids`` is either end."""
        keep = ~(np.isin(self.keys >> 32, ids) | np.isin(self.keys & 0xFFFFFFFF, ids))
        self.keys = self.keys[keep]
        self.cols = {name: col[keep] for name, col in self.cols.items()}

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
        order = np.lexsort((gen, keys))
        sk = keys[order]
        start = np.r_[True, sk[1:] != sk[:-1]]
        rank = np.arange(n) - np.maximum.accumulate(np.where(start, np.arange(n), 0))
        meas = {"gen": gen, "x": np.asarray(x, np.float64), "y": np.asarray(y, np.float64),
                "yaw": np.asarray(yaw, np.float64), "v": np.asarray(v, np.float64), "a": np.asarray(a, np.float64),
                "w": np.asarray(yaw_rate, np.float64)}
        for r in range(int(rank.max()) + 1):  # a pair's CAMs of one step in turn (almost always one round)
            rows = order[rank == r]
            nis[rows], failed[rows] = self._round(keys[rows], {name: col[rows] for name, col in meas.items()})
        return nis, failed

    def _round(self, keys: np.ndarray, m: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """One CAM per pair (``keys`` unique): innovation against the prediction, then the update."""
        p = self.p
        pos = np.searchsorted(self.keys, keys)
        found = pos < len(self.keys)
        found[found] = self.keys[pos[found]] == keys[found]
        h = {name: col[np.minimum(pos, max(len(self.keys) - 1, 0))] if len(self.keys) else
             np.zeros((len(keys), *col.shape[1:]), col.dtype) for name, col in self.cols.items()}
        dt = (m["gen"] - h["gen"]) / 1e9
        tracked = found & (dt > 0) & (dt <= p.max_gap_s)
        dt = np.where(tracked, dt, 0.0)
        cos, sin = np.cos(m["yaw"]), np.sin(m["yaw"])
        zvx, zvy = m["v"] * cos, m["v"] * sin
        # prediction (per axis: F = [[1, dt], [0, 1]], input u over dt, Q of white acceleration)
        qa = p.accel_sigma_mps2**2
        px = h["px"] + h["vx"] * dt + 0.5 * h["ux"] * dt**2
        py = h["py"] + h["vy"] * dt + 0.5 * h["uy"] * dt**2
        vx, vy = h["vx"] + h["ux"] * dt, h["vy"] + h["uy"] * dt
        pp = h["p_pp"] + 2 * dt * h["p_pv"] + dt**2 * h["p_vv"] + qa * dt**4 / 4
        pv = h["p_pv"] + dt * h["p_vv"] + qa * dt**3 / 2
        vv = h["p_vv"] + qa * dt**2
        # innovation covariance S = P + R (the measurement is the state), its inverse in closed form
        r_p = p.position_sigma_m**2
        r_v = p.speed_sigma_mps**2 + (m["v"] * p.heading_sigma_rad) ** 2
        s_pp, s_pv, s_vv = pp + r_p, pv, vv + r_v
        det = s_pp * s_vv - s_pv**2
        ix, ivx, iy, ivy = m["x"] - px, zvx - vx, m["y"] - py, zvy - vy
        nis = (s_vv * (ix**2 + iy**2) - 2 * s_pv * (ix * ivx + iy * ivy) + s_pp * (ivx**2 + ivy**2)) / det
        nis = np.where(tracked, nis, np.nan)
        w = p.window
        with np.errstate(invalid="ignore"):
            outlier = tracked & (nis > self.gate)
        # the window holds each NIS up to the single gate: one outlier alone does not fail the next CAMs' sums
        window = np.where(tracked[:, None], np.concatenate([np.minimum(nis, self.gate)[:, None],
                                                            h["nis"][:, :w - 1]], axis=1), 0.0)
        filled = np.where(tracked, np.minimum(h["filled"] + 1, w), 0)
        # the bias gate flags a CAM that itself lies beyond the mean NIS (4): not the first honest CAMs after a bias
        # ended, whose window still holds it (under no attack this only lowers the false alarm rate)
        failed = outlier | (tracked & (filled == w) & (window.sum(axis=1) > self.window_gate) & (nis > 4.0))
        # update: K = P S^-1, state += K innovation, P = P - K P (symmetric); an outlier is not used: the track
        # coasts on its prediction (a validation gate), so one forged CAM does not drag it and fail the next one;
        # after max_misses outliers in a row it starts again from the newest CAM (as a new track, like a new pair)
        misses = np.where(outlier, h["misses"] + 1, 0)
        restart = outlier & (misses >= p.max_misses)
        outlier &= ~restart
        tracked &= ~restart
        misses[restart] = 0
        filled[restart] = 0
        use = tracked & ~outlier
        k_pp, k_pv = (pp * s_vv - pv * s_pv) / det, (pv * s_pp - pp * s_pv) / det
        k_vp, k_vv = (pv * s_vv - vv * s_pv) / det, (vv * s_pp - pv * s_pv) / det
        new = {
            "gen": m["gen"],
            "px": np.where(use, px + k_pp * ix + k_pv * ivx, np.where(outlier, px, m["x"])),
            "py": np.where(use, py + k_pp * iy + k_pv * ivy, np.where(outlier, py, m["y"])),
            "vx": np.where(use, vx + k_vp * ix + k_vv * ivx, np.where(outlier, vx, zvx)),
            "vy": np.where(use, vy + k_vp * iy + k_vv * ivy, np.where(outlier, vy, zvy)),
            "ux": np.where(outlier, h["ux"], m["a"] * cos - m["v"] * m["w"] * sin),  # the claimed acceleration
            "uy": np.where(outlier, h["uy"], m["a"] * sin + m["v"] * m["w"] * cos),  # drives the next interval
            "p_pp": np.where(use, pp - (k_pp * pp + k_pv * pv), np.where(outlier, pp, r_p)),
            "p_pv": np.where(use, pv - (k_pp * pv + k_pv * vv), np.where(outlier, pv, 0.0)),
            "p_vv": np.where(use, vv - (k_vp * pv + k_vv * vv), np.where(outlier, vv, r_v)),
            "filled": filled, "nis": window, "misses": misses,
        }
        for name in ("ux", "uy"):
            new[name] = np.nan_to_num(new[name])  # an unavailable acceleration or yaw rate drives nothing
        self._store(keys, pos, found, new)
        return nis, failed

    def _store(self, keys: np.ndarray, pos: np.ndarray, found: np.ndarray, new: dict[str, np.ndarray]) -> None:
        for name in _STATE:
            self.cols[name][pos[found]] = new[name][found]
        if (~found).any():
            merged = np.concatenate([self.keys, keys[~found]])
            order = np.argsort(merged, kind="stable")
            self.keys = merged[order]
            self.cols = {name: np.concatenate([self.cols[name], new[name][~found]])[order] for name in _STATE}


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
