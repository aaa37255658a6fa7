"""Extended look-ahead CACC (Bayuwindra, Ploeg, Lefeber, Nijmeijer, IEEE TCST 28(3), 2020).

Follower i steers its look-ahead point p_i = x_i + D_i e(th_i) onto its predecessor's extended point
x_{i-1} + s n(th_{i-1}). Both vehicles are unicycles at the rear axle (x' = v e(th), th' = w, v' = a).
Notation: e(th) = [cos th, sin th], n(th) = [sin th, -cos th], K = diag(k1, k2) on the world-frame errors
(E5), as in the reference: with k1 != k2 the law is not rotation invariant, so platoons that do not drive along
x should use k1 = k2. String stability along the chain: controllers.ela_cacc_stability.

(E1) D = r + h v_i                                       spacing policy (standstill distance r, time gap h)
(E2) k = w_{i-1} / v_{i-1}                               predecessor curvature, 0 below ``min_speed_mps``
(E3) s = k D^2 / (1 + sqrt(1 + k^2 D^2))                 extension; safe form of (sqrt(1 + k^2 D^2) - 1) / k
(E4) alpha = atan(k D)                                   steady-state heading offset th_i = th_{i-1} - alpha
(E5) z1 = x_{i-1} + s sin th_{i-1} - x_i - D cos th_i,   z2 = y_{i-1} - s cos th_{i-1} - y_i - D sin th_i
     z3 = v_{i-1} cos th_{i-1} - v_i cos(th_i + alpha),  z4 = v_{i-1} sin th_{i-1} - v_i sin(th_i + alpha)
(E6) G = [[h (cos th_i - sin alpha sin th_{i-1}), -D sin th_i],
          [h (sin th_i + sin alpha cos th_{i-1}),  D cos th_i]]     from d/dt of p_i with dD/dv = h, ds/dD = sin alpha
     det G = h D (1 - sin alpha sin(th_{i-1} - th_i)) > 0
(E7) q1 = k1 z1 + ( cos alpha z3 + sin alpha z4) + (1 - cos alpha) v_{i-1} cos th_{i-1}
          - sin alpha v_{i-1} sin th_{i-1} + s w_{i-1} cos th_{i-1}
     q2 = k2 z2 + (-sin alpha z3 + cos alpha z4) + sin alpha v_{i-1} cos th_{i-1}
          + (1 - cos alpha) v_{i-1} sin th_{i-1} + s w_{i-1} sin th_{i-1}
(E8) [a_i, w_i] = G^-1 [q1, q2]

The velocity terms of (E7) add up to v_{i-1} e(th_{i-1}) - v_i e(th_i), so the closed loop is z' = -K z up to
the predecessor's curvature rate, which is not fed forward. The input matrix uses sin(alpha), not sin(s), and
q2 carries -sin(alpha) z3; with those two terms otherwise, a residual error never settles in curves.
Wrapper (small robots): below ``min_speed_mps`` of the predecessor the follower stops and holds its yaw rate;
below it of its own speed, a >= 0. Speed and steering commands follow in ``controllers.conversions``.
With ``extended: false`` s = 0 and alpha = 0: the classic look-ahead controller, which cuts corners by about
D^2 / (2R).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit
from pydantic import Field

from .base import Arrays, Controller, ControllerParams
from .columns import LazyColumns

_EGO = ("x", "y", "yaw", "v")
_PRED = ("x", "y", "yaw", "v", "yaw_rate")


class ElaCaccParams(ControllerParams):
    """Gains and spacing policy of the extended look-ahead CACC."""

    k1: float = Field(1.0, gt=0, le=1e3,
                      description="gain on the x component of the look-ahead error (E5, world frame) [1/s]")
    k2: float = Field(1.0, gt=0, le=1e3,
                      description="gain on the y component of the look-ahead error (E5, world frame); "
                      "laterally string stable iff k2 (r + h v) <= 2 v [1/s]")
    standstill_m: float = Field(1.0, gt=0, le=100, description="r: look-ahead distance at standstill [m]")
    time_gap_s: float = Field(1.0, gt=0, le=10, description="h: time gap of the spacing policy [s]")
    extended: bool = Field(True, description="use the extension s (false: classic look-ahead, cuts corners)")
    min_speed_mps: float = Field(0.1, ge=0, le=10,
                                 description="below this predecessor speed: stop and hold yaw rate [m/s]")


@njit(cache=True)
def ela_cacc_kernel(  # pragma: no cover - compiled
    xi, yi, thi, vi, xp, yp, thp, vp, wp, k1, k2, r, h, extended, v_thr, out_a, out_w, out_stop
):
    """Fills ``out_a`` (m/s^2), ``out_w`` (rad/s) and ``out_stop`` (predecessor slower than ``v_thr``) for every
    follower row."""
    rows = np.arange(out_a.shape[0])
    ela_cacc_rows_kernel(xi, yi, thi, vi, rows, xp, yp, thp, vp, wp, rows, k1, k2, r, h, extended, v_thr, out_a,
                         out_w, out_stop)


@njit(cache=True)
def ela_cacc_rows_kernel(  # pragma: no cover - compiled
    xi, yi, thi, vi, ego_rows, xp, yp, thp, vp, wp, pred_rows, k1, k2, r, h, extended, v_thr, out_a, out_w,
    out_stop
):
    """``ela_cacc_kernel`` reading follower j's state at ``ego_rows[j]`` and its predecessor's sample at
    ``pred_rows[j]`` of the given arrays (no gathered copies)."""
    for j in range(out_a.shape[0]):
        e = ego_rows[j]
        q = pred_rows[j]
        out_a[j], out_w[j], out_stop[j] = _ela_row(xi[e], yi[e], thi[e], vi[e], xp[q], yp[q], thp[q], vp[q], wp[q],
                                                   k1, k2, r, h, extended, v_thr)


@njit(cache=True)
def ela_cacc_param_rows_kernel(  # pragma: no cover - compiled
    xi, yi, thi, vi, ego_rows, xp, yp, thp, vp, wp, pred_rows, k1, k2, r, h, extended, v_thr, out_a, out_w,
    out_stop
):
    """``ela_cacc_rows_kernel`` with the gains and the spacing policy per row: ``k1``, ``k2``, ``r``, ``h`` are
    arrays over the output rows (``Controller.row_params``)."""
    for j in range(out_a.shape[0]):
        e = ego_rows[j]
        q = pred_rows[j]
        out_a[j], out_w[j], out_stop[j] = _ela_row(xi[e], yi[e], thi[e], vi[e], xp[q], yp[q], thp[q], vp[q], wp[q],
                                                   k1[j], k2[j], r[j], h[j], extended, v_thr)


@njit(cache=True, inline="always")
def _ela_row(x_i, y_i, th_i, v_i, x_p, y_p, th_p, v_p, w_p, k1, k2, r, h, extended, v_thr
             ):  # pragma: no cover - compiled
    """(E1)-(E8) for one follower: its acceleration, yaw rate and whether its predecessor is slower than
    ``v_thr``."""
    D = r + h * v_i  # (E1)
    k = w_p / v_p if v_p > v_thr else 0.0  # (E2)
    if extended:
        kD = k * D
        s = k * D * D / (1.0 + np.sqrt(1.0 + kD * kD))  # (E3)
        # atan(+-0) is +-0 exactly: a straight predecessor (the common case) skips the call
        alpha = kD if kD == 0.0 else np.arctan(kD)  # (E4)
    else:
        s = 0.0
        alpha = 0.0
    # cos(+-0) = 1 and sin(+-0) = +-0 exactly: headings along x (common on straight roads) skip the calls
    ci, si = (1.0, th_i) if th_i == 0.0 else (np.cos(th_i), np.sin(th_i))
    cp, sp = (1.0, th_p) if th_p == 0.0 else (np.cos(th_p), np.sin(th_p))
    if alpha == 0.0:
        # cos(+-0) = 1, sin(+-0) = +-0 and th_i + (+-0) = th_i exactly unless th_i is +-0 (then the sum is a
        # zero whose sine is itself): the general branch's values without four trigonometric calls
        ca, sa = 1.0, alpha
        cia = ci
        sia = si if th_i != 0.0 else th_i + alpha
    else:
        ca, sa = np.cos(alpha), np.sin(alpha)
        cia = np.cos(th_i + alpha)
        sia = np.sin(th_i + alpha)
    z1 = x_p + s * sp - x_i - D * ci  # (E5)
    z2 = y_p - s * cp - y_i - D * si
    z3 = v_p * cp - v_i * cia
    z4 = v_p * sp - v_i * sia
    q1 = k1 * z1 + (ca * z3 + sa * z4) + (1.0 - ca) * v_p * cp - sa * v_p * sp + s * w_p * cp
    q2 = k2 * z2 + (-sa * z3 + ca * z4) + sa * v_p * cp + (1.0 - ca) * v_p * sp + s * w_p * sp
    g11 = h * (ci - sa * sp)  # (E6)
    g12 = -D * si
    g21 = h * (si + sa * cp)
    g22 = D * ci
    det = g11 * g22 - g12 * g21  # = h D (1 - sin(alpha) sin(th_p - th_i)) > 0 for |alpha| < pi/2
    a = (g22 * q1 - g12 * q2) / det  # (E8)
    w = (-g21 * q1 + g11 * q2) / det
    if v_i < v_thr and a < 0.0:  # own speed near zero: never command reversing
        a = 0.0
    return a, w, v_p < v_thr  # stop as pred["v"] < min_speed_mps (NaN: False)


class ElaCacc(Controller):
    """Extended look-ahead CACC; outputs acceleration and yaw rate for each follower."""

    Params = ElaCaccParams
    steers = True
    pure_desired_gap = True
    row_params = ("k1", "k2", "standstill_m", "time_gap_s")  # the kernels' order

    def compute(self, ego: Arrays, pred: Arrays, leader: Arrays, sensors: Arrays, dt: float) -> dict[str, np.ndarray]:
        """Acceleration and yaw-rate commands; rows whose predecessor is slower than ``min_speed_mps`` get
        ``stop`` = True (the wrapper commands speed 0 and holds the yaw rate)."""
        p: ElaCaccParams = self.params  # type: ignore[assignment]
        n = len(ego["v"])
        out_a = np.empty(n)
        out_w = np.empty(n)
        out_stop = np.empty(n, np.bool_)
        ego_src = ego.source_of(_EGO) if isinstance(ego, LazyColumns) else None
        pred_src = pred.source_of(_PRED) if isinstance(pred, LazyColumns) else None
        if ego_src is not None and pred_src is not None:  # read the rows in place: no gathered copies
            (ego_cols, ego_rows), (pred_cols, pred_rows) = ego_src, pred_src
        else:
            rows = np.arange(n)
            ego_cols = tuple(np.asarray(ego[name], np.float64) for name in _EGO)
            pred_cols = tuple(np.asarray(pred[name], np.float64) for name in _PRED)
            ego_rows = pred_rows = rows
        kernel = ela_cacc_param_rows_kernel if self.row_values else ela_cacc_rows_kernel
        kernel(*ego_cols, ego_rows, *pred_cols, pred_rows, *(self.param(name) for name in self.row_params),
               p.extended, p.min_speed_mps, out_a, out_w, out_stop)
        return {"accel": out_a, "yaw_rate": out_w, "stop": out_stop}

    def spacing_error(self, ego: Arrays, pred: Arrays, dims: Any = None, pred_dims: Any = None) -> np.ndarray:
        """The longitudinal component of the look-ahead error, z . e(th_i) (the error the law drives to zero
        along the follower's heading), from true states; with ``row_values``, one state per row of the group."""
        p: ElaCaccParams = self.params  # type: ignore[assignment]
        self._rows_asked(np.size(ego["v"]))
        D = self.param("standstill_m") + self.param("time_gap_s") * ego["v"]
        k = np.where(pred["v"] > p.min_speed_mps, pred["yaw_rate"] / np.maximum(pred["v"], p.min_speed_mps), 0.0)
        s = k * D * D / (1.0 + np.sqrt(1.0 + (k * D) ** 2)) if p.extended else np.zeros_like(D)
        z1 = pred["x"] + s * np.sin(pred["yaw"]) - ego["x"] - D * np.cos(ego["yaw"])
        z2 = pred["y"] - s * np.cos(pred["yaw"]) - ego["y"] - D * np.sin(ego["yaw"])
        return z1 * np.cos(ego["yaw"]) + z2 * np.sin(ego["yaw"])

    def desired_gap(self, v: np.ndarray, curvature: np.ndarray | None = None) -> np.ndarray:
        """Rear-axle distance the law settles at: D = r + h v on a straight; on an arc of curvature k the extended
        look-ahead puts the follower on the predecessor's circle at the arc angle alpha = atan(k D), i.e. at the
        chord 2 sin(alpha / 2) / k (-> D as k -> 0). The classic law (s = 0) settles at the chord D, inside the
        circle. With ``row_values``, one speed per row of the group (``at_rows`` for fewer)."""
        p: ElaCaccParams = self.params  # type: ignore[assignment]
        self._rows_asked(np.size(v))
        r, h = self.param("standstill_m"), self.param("time_gap_s")
        if curvature is None or not p.extended:
            return r + h * v
        v = np.ascontiguousarray(v, np.float64)
        D, k, kD = np.empty_like(v), np.empty_like(v), np.empty_like(v)
        terms = _gap_terms_rows if self.row_values else _gap_terms
        terms(v, np.ascontiguousarray(curvature, np.float64), r, h, D, k, kD)
        # atan and sin stay numpy's: compiled code may round them differently in the last bit
        half = np.arctan(kD)
        half *= 0.5
        sin_half = np.sin(half, out=half)
        _chord(D, k, kD, sin_half, kD)
        return kD


_MAX_FLOAT = float(np.finfo(np.float64).max)


@njit(cache=True)
def _gap_terms(v, curvature, r, h, D, k, kD):  # pragma: no cover - compiled
    """D = r + h v, k = |curvature| (NaN as 0, +-inf as +-the largest float, as numpy's nan_to_num) and k D."""
    for j in range(v.shape[0]):
        D[j], k[j], kD[j] = _gap_row(v[j], curvature[j], r, h)


@njit(cache=True)
def _gap_terms_rows(v, curvature, r, h, D, k, kD):  # pragma: no cover - compiled
    """``_gap_terms`` with ``r`` and ``h`` per row."""
    for j in range(v.shape[0]):
        D[j], k[j], kD[j] = _gap_row(v[j], curvature[j], r[j], h[j])


@njit(cache=True, inline="always")
def _gap_row(v, c, r, h):  # pragma: no cover - compiled
    d = r + h * v
    if np.isnan(c):
        c = 0.0
    elif np.isinf(c):
        c = _MAX_FLOAT if c > 0.0 else -_MAX_FLOAT
    c = abs(c)
    return d, c, c * d


@njit(cache=True)
def _chord(D, k, kD, sin_half, out):  # pragma: no cover - compiled
    """The chord 2 sin(alpha / 2) / k where k D > 1e-9, else D (written in place: ``out`` may be ``kD``)."""
    for j in range(D.shape[0]):
        out[j] = 2.0 * sin_half[j] / max(k[j], 1e-300) if kD[j] > 1e-9 else D[j]
