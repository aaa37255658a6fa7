"""The look-ahead CACC kernel skips atan, cos and sin where the predecessor drives straight (alpha = +-0): it must
give, bit for bit and zero signs included, what the general formulas (E4)-(E8) give."""

from __future__ import annotations

import itertools

import numpy as np
from numba import njit

from controllers.ela_cacc import ela_cacc_rows_kernel


@njit(cache=False)
def _general(xi, yi, thi, vi, xp, yp, thp, vp, wp, k1, k2, r, h, extended, v_thr, out_a, out_w):  # pragma: no cover
    """(E1)-(E8) with every trigonometric call made, row by row (the reference)."""
    for j in range(out_a.shape[0]):
        x_i, y_i, th_i, v_i = xi[j], yi[j], thi[j], vi[j]
        x_p, y_p, th_p, v_p, w_p = xp[j], yp[j], thp[j], vp[j], wp[j]
        D = r + h * v_i
        k = w_p / v_p if v_p > v_thr else 0.0
        if extended:
            kD = k * D
            s = k * D * D / (1.0 + np.sqrt(1.0 + kD * kD))
            alpha = np.arctan(kD)
        else:
            s = 0.0
            alpha = 0.0
        ci, si = np.cos(th_i), np.sin(th_i)
        cp, sp = np.cos(th_p), np.sin(th_p)
        ca, sa = np.cos(alpha), np.sin(alpha)
        z1 = x_p + s * sp - x_i - D * ci
        z2 = y_p - s * cp - y_i - D * si
        cia = np.cos(th_i + alpha)
        sia = np.sin(th_i + alpha)
        z3 = v_p * cp - v_i * cia
        z4 = v_p * sp - v_i * sia
        q1 = k1 * z1 + (ca * z3 + sa * z4) + (1.0 - ca) * v_p * cp - sa * v_p * sp + s * w_p * cp
        q2 = k2 * z2 + (-sa * z3 + ca * z4) + sa * v_p * cp + (1.0 - ca) * v_p * sp + s * w_p * sp
        g11 = h * (ci - sa * sp)
        g12 = -D * si
        g21 = h * (si + sa * cp)
        g22 = D * ci
        det = g11 * g22 - g12 * g21
        a = (g22 * q1 - g12 * q2) / det
        w = (-g21 * q1 + g11 * q2) / det
        if v_i < v_thr and a < 0.0:
            a = 0.0
        out_a[j] = a
        out_w[j] = w


def _crafted() -> tuple[np.ndarray, ...]:
    """Rows crossing zero and non-zero headings (both zero signs, NaN), straight (+0, -0 yaw rate), curved and
    slow predecessors, and follower speeds at and below the threshold."""
    th_i = [0.0, -0.0, 0.3, -2.9, np.nan]
    w_p = [0.0, -0.0, 0.2, -0.7]
    v_p = [2.0, 0.05]
    v_i = [1.5, 0.0]
    th_p = [0.0, -0.0, 0.15]
    rows = list(itertools.product(th_i, w_p, v_p, v_i, th_p))
    rng = np.random.default_rng(7)
    n = len(rows)
    thi, wp, vp, vi, thp = (np.array(c, np.float64) for c in zip(*rows, strict=True))
    xi, yi = rng.normal(size=n), rng.normal(size=n)
    xp, yp = xi + 1.0 + rng.random(n), yi + rng.normal(scale=0.1, size=n)
    yp[::4] = yi[::4]  # some rows exactly in line: zero lateral errors, where zero signs could show
    # and some settled exactly (origin, predecessor at D = r + h v ahead at the same speed): zero errors, so the
    # outputs are zeros whose signs come from those of the headings' sines
    settled = slice(1, None, 4)
    xi[settled], yi[settled] = 0.0, np.where(np.arange(n)[settled] % 8 == 1, -0.0, 0.0)
    xp[settled], yp[settled] = 1.0 + 0.6 * vi[settled], -yi[settled]
    vp[settled] = np.where(vp[settled] > 0.1, vi[settled], vp[settled])
    return xi, yi, thi, vi, xp, yp, thp, vp, wp


def test_the_straight_path_shortcut_equals_the_general_formulas_bit_for_bit() -> None:
    xi, yi, thi, vi, xp, yp, thp, vp, wp = _crafted()
    n = len(xi)
    rows = np.arange(n, dtype=np.int64)
    for extended, (k1, k2) in itertools.product((True, False), ((1.0, 1.0), (0.8, 1.7))):
        want_a, want_w, got_a, got_w = (np.empty(n) for _ in range(4))
        got_stop = np.empty(n, np.bool_)
        _general(xi, yi, thi, vi, xp, yp, thp, vp, wp, k1, k2, 1.0, 0.6, extended, 0.1, want_a, want_w)
        ela_cacc_rows_kernel(xi, yi, thi, vi, rows, xp, yp, thp, vp, wp, rows, k1, k2, 1.0, 0.6, extended, 0.1,
                             got_a, got_w, got_stop)
        np.testing.assert_array_equal(got_stop, vp < 0.1)  # the law's stop flag, as numpy compares
        np.testing.assert_array_equal(got_a, want_a)
        np.testing.assert_array_equal(got_w, want_w)
        assert np.array_equal(np.signbit(got_a), np.signbit(want_a))  # -0 and +0 told apart
        assert np.array_equal(np.signbit(got_w), np.signbit(want_w))
        assert np.isfinite(got_a).sum() > n // 2  # the crafted rows mostly give numbers, not NaN everywhere


def test_the_shortcut_rows_are_those_of_a_straight_predecessor() -> None:
    # a straight predecessor right ahead on the same heading: no yaw rate asked, the gap error drives a
    xi, yi, thi, vi = np.array([0.0]), np.array([0.0]), np.array([0.0]), np.array([1.0])
    xp, yp, thp, vp, wp = np.array([3.0]), np.array([0.0]), np.array([0.0]), np.array([1.0]), np.array([0.0])
    a, w, stop = np.empty(1), np.empty(1), np.empty(1, np.bool_)
    rows = np.zeros(1, np.int64)
    ela_cacc_rows_kernel(xi, yi, thi, vi, rows, xp, yp, thp, vp, wp, rows, 1.0, 1.0, 1.0, 1.0, True, 0.1, a, w,
                         stop)
    assert not stop[0]
    # D = 2, z1 = 1, z3 = z4 = 0, G = diag(h, D): a = k1 z1 / h = 1, w = 0
    assert a[0] == 1.0 and w[0] == 0.0
