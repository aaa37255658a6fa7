"""The kinematic bicycle's step skips tan, sin, cos and atan2 where their values are exact or shared (no steering,
a straight step, a zero heading): it must give, bit for bit and zero signs included, what the general step gives."""

from __future__ import annotations

import itertools

import numpy as np
from numba import njit

from federates.physics.models.kinematic import _step_kernel


@njit(cache=False)
def _general(x, y, yaw, v, a, yaw_rate, steer, cmd_speed, cmd_steer, p, dt, ds_out, dth_out):  # pragma: no cover
    """The step with every trigonometric call made (the reference)."""
    for i in range(x.shape[0]):
        wheelbase, max_steer, max_rate = p[i, 0], p[i, 1], p[i, 2]
        max_speed, max_acc, max_dec = p[i, 3], p[i, 4], p[i, 5]
        target = min(max(cmd_steer[i], -max_steer), max_steer)
        d_max = max_rate * dt
        delta = steer[i] + min(max(target - steer[i], -d_max), d_max)
        v_target = min(max(cmd_speed[i], 0.0), max_speed)
        v0 = v[i]
        v1 = v0 + min(max(v_target - v0, -max_dec * dt), max_acc * dt)
        v_mean = 0.5 * (v0 + v1)
        w = v_mean * np.tan(delta) / wheelbase
        th0 = yaw[i]
        dth = w * dt
        if abs(dth) > 1e-9:
            radius = v_mean / w
            x[i] += radius * (np.sin(th0 + dth) - np.sin(th0))
            y[i] += radius * (np.cos(th0) - np.cos(th0 + dth))
        else:
            x[i] += v_mean * dt * np.cos(th0 + 0.5 * dth)
            y[i] += v_mean * dt * np.sin(th0 + 0.5 * dth)
        th1 = th0 + dth
        yaw[i] = np.arctan2(np.sin(th1), np.cos(th1))
        a[i] = (v1 - v0) / dt
        v[i] = v1
        yaw_rate[i] = v1 * np.tan(delta) / wheelbase
        steer[i] = delta
        ds_out[i] = v_mean * dt
        dth_out[i] = dth


def _crafted() -> tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """Rows crossing headings (both zeros, small, large, NaN), steering (both zeros, tiny, turning), positions at
    both zeros and speeds at rest and moving."""
    yaw = [0.0, -0.0, 1e-12, 0.7, -3.1, np.nan]
    steer = [0.0, -0.0, 1e-13, -1e-13, 0.2, -0.2]
    cmd_steer = [0.0, -0.0, -1e-13, 0.3]
    speed = [0.0, 1.5]
    xy = [0.0, -0.0, 2.5]
    rows = list(itertools.product(yaw, steer, cmd_steer, speed, xy))
    yaw_, steer_, cmd_steer_, v_, xy_ = (np.array(c, np.float64) for c in zip(*rows, strict=True))
    n = len(rows)
    state = [xy_.copy(), xy_[::-1].copy(), yaw_, v_, np.zeros(n), np.zeros(n), steer_]
    p = np.tile([0.3, 0.5, 2.0, 2.0, 1.0, 2.0], (n, 1))
    cmd_speed = np.where(np.arange(n) // 6 % 2 == 0, 0.0, 1.8)  # at rest and moving, across every other factor
    return state, cmd_speed, cmd_steer_, p


def test_the_straight_step_shortcuts_equal_the_general_step_bit_for_bit() -> None:
    state, cmd_speed, cmd_steer, p = _crafted()
    n = len(cmd_speed)
    want = [c.copy() for c in state] + [np.empty(n), np.empty(n)]
    got = [c.copy() for c in state] + [np.empty(n), np.empty(n)]
    for step in range(5):  # several steps: headings and steering move off their zeros on the turning rows
        commands = (cmd_speed, cmd_steer if step < 3 else np.zeros(n))
        _general(*want[:7], *commands, p, 0.01, *want[7:])
        _step_kernel(*got[:7], *commands, p, 0.01, *got[7:])
        for w, g in zip(want, got, strict=True):
            np.testing.assert_array_equal(g, w)
            assert np.array_equal(np.signbit(g), np.signbit(w))  # -0 and +0 told apart
    assert np.isfinite(got[0]).sum() > n // 2 and np.any(got[2] != 0.0)  # rows moved and some turned


def test_a_straight_step_along_x_moves_by_the_mean_speed() -> None:
    x, y, yaw, v, a, w, steer = (np.zeros(1) for _ in range(7))
    v[0] = 1.0
    p = np.array([[0.3, 0.5, 2.0, 2.0, 1.0, 2.0]])
    ds, dth = np.empty(1), np.empty(1)
    _step_kernel(x, y, yaw, v, a, w, steer, np.array([2.0]), np.zeros(1), p, 0.1, ds, dth)
    # accelerates at 1 m/s^2 for 0.1 s: v 1 -> 1.1, x += 1.05 * 0.1 along x, heading and yaw rate stay zero
    assert v[0] == 1.1 and x[0] == 0.5 * (1.0 + 1.1) * 0.1 and y[0] == 0.0 and yaw[0] == 0.0 and w[0] == 0.0
