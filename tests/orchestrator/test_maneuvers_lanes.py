"""Lanes as offsets from a reference path: projection, points on a lane, the lane-change ramp and pure pursuit onto
a lane, against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from controllers.maneuvers.lanes import LanePath, pursue_lane, quintic
from controllers.maneuvers.slot import in_slot, slot_accel, slot_error

SQUARE = LanePath(np.array([[0.0, 0.0], [10.0, 0.0], [10.0, 10.0], [0.0, 10.0]]), closed=True)
LINE = LanePath(np.array([[0.0, 0.0], [100.0, 0.0]]), closed=False)


def test_the_ramp_starts_and_ends_at_rest():
    assert quintic(np.array([-1.0, 0.0, 0.5, 1.0, 2.0])) == pytest.approx([0.0, 0.0, 0.5, 1.0, 1.0])
    h = 1e-4  # slope and curvature vanish at both ends: 10 h^3 is all that is left
    assert quintic(np.array([h]))[0] == pytest.approx(10 * h**3, rel=1e-3)
    assert 1.0 - quintic(np.array([1.0 - h]))[0] == pytest.approx(10 * h**3, rel=1e-3)


def test_projection_on_a_closed_and_an_open_path():
    along, offset = SQUARE.project(np.array([5.0, 11.0, 1.0]), np.array([1.0, 5.0, 9.0]))
    assert along == pytest.approx([5.0, 15.0, 29.0])  # east side, north side, west-going top side
    assert offset == pytest.approx([1.0, -1.0, 1.0])  # left of the direction of travel (inside the loop) is positive
    along, offset = LINE.project(np.array([-5.0, 150.0]), np.array([2.0, -3.5]))
    assert along == pytest.approx([-5.0, 150.0]) and offset == pytest.approx([2.0, -3.5])  # extended past the ends


def test_points_on_a_lane_wrap_around_a_closed_path():
    x, y = SQUARE.point(np.array([38.0, 5.0, 45.0]), np.array([0.0, 1.0, 0.5]))
    assert x == pytest.approx([0.0, 5.0, 5.0]) and y == pytest.approx([2.0, 1.0, 0.5])


def test_pure_pursuit_turns_towards_the_lane():
    kmax = np.full(3, np.inf)
    w, now = pursue_lane(LINE, np.array([10.0, 10.0, 10.0]), np.array([3.5, 0.0, -1.0]), np.zeros(3),
                         np.full(3, 25.0), np.zeros(3), 1.0, 0.5, kmax)
    assert now == pytest.approx([3.5, 0.0, -1.0])
    # look-ahead 25 m: target (35, 0); kappa = 2 y_l / d^2
    assert w == pytest.approx([25 * 2 * -3.5 / (25**2 + 3.5**2), 0.0, 25 * 2 * 1.0 / (25**2 + 1.0)])


def test_the_slot_law_closes_in_and_stops_in_the_slot():
    s = slot_error(np.array([0.0]), np.array([3.5]), np.array([30.0]), np.array([0.0]), np.array([0.0]),
                   np.array([20.0]))
    assert s == pytest.approx([10.0])  # 10 m behind its slot (the lateral offset does not count)
    a = slot_accel(np.array([10.0, 0.0, -100.0]), np.full(3, 25.0), np.full(3, 25.0), 0.3, 1.0, 1.5, 3.0)
    assert a == pytest.approx([1.5, 0.0, -3.0])  # 3 m/s wanted is clipped to 1.5; far ahead: the brake limit
    assert in_slot(np.array([0.5, 4.0]), np.full(2, 25.0), np.full(2, 25.5), np.full(2, 20.0)).tolist() == [True,
                                                                                                           False]
