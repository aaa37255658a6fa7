"""(a, w) <-> (v, delta) conversions at the guards: v -> 0, large curvature, limits; never NaN."""

from __future__ import annotations

import numpy as np
import pytest

from controllers.conversions import (
    MIN_SPEED_FOR_STEER_MPS,
    integrate_speed,
    steer_to_yaw_rate,
    yaw_rate_to_steer,
)

L = np.array([0.32])
MAX_STEER = np.array([0.6458])


def test_round_trip_inside_the_limits():
    v = np.array([0.5, 1.0, 2.0, 3.0])
    w = np.array([0.1, -0.3, 0.8, -1.2])
    delta = yaw_rate_to_steer(w, v, np.full(4, 0.32), np.full(4, 0.6458))
    assert np.allclose(steer_to_yaw_rate(delta, v, np.full(4, 0.32)), w)
    # the kinematic relation for a circle of radius R = v / w: delta = atan(L / R)
    assert delta[0] == pytest.approx(np.arctan(0.32 / 5.0))


@pytest.mark.parametrize("v", [0.0, 1e-12, -0.0, 1e-3])
def test_standstill_uses_the_guard_speed_and_stays_finite(v):
    delta = yaw_rate_to_steer(np.array([0.05]), np.array([v]), L, MAX_STEER)
    assert np.isfinite(delta).all()
    assert delta[0] == pytest.approx(np.arctan(0.05 * 0.32 / MIN_SPEED_FOR_STEER_MPS))


def test_large_curvature_clamps_to_the_steering_limit_with_its_sign():
    delta = yaw_rate_to_steer(np.array([50.0, -50.0, np.inf]), np.array([1.0, 1.0, 1.0]),
                              np.full(3, 0.32), np.full(3, 0.6458))
    assert delta.tolist() == [0.6458, -0.6458, 0.6458]


def test_speed_integral_never_negative_and_capped():
    v = integrate_speed(np.array([0.05, 1.0, 2.9]), np.array([-10.0, 0.5, 5.0]), 0.02, np.full(3, 3.0))
    assert v.tolist() == pytest.approx([0.0, 1.01, 3.0])
    assert np.isfinite(v).all()
