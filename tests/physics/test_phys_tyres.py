"""Tyre and actuator formulas against their textbook definitions, and the compiled versions against numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from federates.physics.models import dynamic_kernel as kernel
from federates.physics.models import tyres as ty
from federates.physics.presets import preset

C, MU, FZ = 80_000.0, 0.9, 5000.0


def fiala_reference(alpha: float, saturate: bool) -> float:
    """The brush model written out directly from its definition."""
    z = math.tan(abs(alpha))
    if saturate and abs(alpha) >= math.atan(3 * MU * FZ / C):
        return -math.copysign(MU * FZ, alpha)
    return -math.copysign(1.0, alpha) * (C * z - C**2 * z**2 / (3 * MU * FZ) + C**3 * z**3 / (27 * (MU * FZ) ** 2))


@pytest.mark.parametrize("saturate", [True, False])
def test_fiala_matches_formula(saturate: bool) -> None:
    alphas = np.linspace(-0.5, 0.5, 201)
    got = ty.fiala_lateral(alphas, C, MU, FZ, saturate=saturate)
    want = np.array([fiala_reference(a, saturate) for a in alphas])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)


def test_fiala_saturation_and_small_slip() -> None:
    limit = math.atan(3 * MU * FZ / C)
    assert ty.fiala_lateral(np.array([limit * 1.5]), C, MU, FZ)[0] == pytest.approx(-MU * FZ)
    # continuous at the limit, linear near zero
    assert ty.fiala_lateral(np.array([limit * (1 - 1e-9)]), C, MU, FZ)[0] == pytest.approx(-MU * FZ, rel=1e-6)
    assert ty.fiala_lateral(np.array([1e-5]), C, MU, FZ)[0] == pytest.approx(-C * 1e-5, rel=1e-3)
    # without saturation the cubic keeps growing beyond the limit
    assert abs(ty.fiala_lateral(np.array([limit * 1.5]), C, MU, FZ, saturate=False)[0]) > MU * FZ


def test_pacejka_matches_formula_and_peak() -> None:
    b, c, d, e = preset("mit_racecar_1to10")["pacejka_long"]
    x = np.linspace(-1, 1, 101)
    bx = b * x
    want = d * np.sin(c * np.arctan(bx - e * (bx - np.arctan(bx))))
    np.testing.assert_allclose(ty.pacejka(x, b, c, d, e), want, rtol=1e-13)
    # the MIT longitudinal table: peak of 19.06 N at the 13.7 N wheel load
    xs = np.linspace(0, 5, 50001)
    assert ty.pacejka_longitudinal(xs, b, c, d, e, 13.7).max() == pytest.approx(19.06, rel=1e-3)
    # lateral: opposes the slip angle, peak D * Fz
    bl, cl, dl, el = preset("mit_racecar_1to10")["pacejka_lat_front"]
    f = ty.pacejka_lateral(np.array([0.05, -0.05]), bl, cl, dl, el, 13.7)
    assert f[0] < 0 < f[1] and f[0] == pytest.approx(-f[1])


@pytest.mark.parametrize("model", ty.TYRE_MODELS.builtin_names())
def test_compiled_force_and_stiffness_match_numpy(model: str) -> None:
    pac = (8.0, 1.3, 0.95, -0.5)
    code = ty.tyre_code(model)
    for alpha in np.linspace(-0.4, 0.4, 81):
        f, k = kernel.lateral_force_stiffness(code, alpha, FZ, C, MU, *pac)
        assert f == pytest.approx(float(ty.lateral_force(model, np.array([alpha]), FZ, C, MU, pac)[0]), abs=1e-7)
        h = 1e-6
        fp = ty.lateral_force(model, np.array([alpha + h, alpha - h]), FZ, C, MU, pac)
        slope = -(fp[0] - fp[1]) / (2 * h)
        if model == "fiala" and abs(abs(alpha) - math.atan(3 * MU * FZ / C)) < 1e-3:
            continue  # kink at the sliding limit
        assert k == pytest.approx(slope, rel=1e-4, abs=1e-3 * C)


def test_magic_formula_inverse() -> None:
    b, c, d, e = preset("mit_racecar_1to10")["pacejka_long"]
    for x in (-0.5, -0.01, 0.0, 0.003, 0.2, 0.6):
        y = float(ty.pacejka(np.array([x]), b, c, d, e)[0])
        assert kernel.mf_inverse(y, b, c, d, e) == pytest.approx(x, abs=1e-9)


def test_friction_ellipse() -> None:
    fx, fy = ty.friction_ellipse(np.array([100.0, 300.0]), np.array([100.0, 400.0]), 500.0, 500.0)
    assert (fx[0], fy[0]) == (100.0, 100.0)  # inside: unchanged
    assert math.hypot(fx[1], fy[1]) == pytest.approx(500.0)  # outside: on the ellipse
    assert fy[1] / fx[1] == pytest.approx(400 / 300)  # direction kept


def test_unknown_tyre_lists_names() -> None:
    with pytest.raises(KeyError, match="allowed: fiala, fiala_unsaturated, linear, pacejka"):
        ty.tyre_code("slick")


def test_plexe_lag_and_limits() -> None:
    tau, dt = 0.5, 0.01
    alpha = dt / (tau + dt)
    a = 0.0
    for _ in range(100):
        want = alpha * 2.0 + (1 - alpha) * a
        a = kernel.accel_update(a, 2.0, 3.0, 6.0, tau, dt)
        assert a == pytest.approx(want, rel=1e-14)
    # after 1 s the first-order lag is at 1 - (1 - alpha)^100 of the command
    assert a == pytest.approx(2.0 * (1 - (1 - alpha) ** 100))
    assert kernel.accel_update(0.0, 50.0, 3.0, 6.0, 0.0, dt) == 3.0
    assert kernel.accel_update(0.0, -50.0, 3.0, 6.0, 0.0, dt) == -6.0


def test_steering_rate_and_angle_limits() -> None:
    s = 0.0
    for _ in range(5):
        s = kernel.steer_update(s, 1.0, 0.5, 2.0, 0.0, 0.01)
    assert s == pytest.approx(5 * 0.02)
    for _ in range(100):
        s = kernel.steer_update(s, 1.0, 0.5, 2.0, 0.0, 0.01)
    assert s == pytest.approx(0.5)


def test_road_loads_and_drivetrain() -> None:
    want = 0.01 * 1500 * 9.81 + 0.5 * 1.2 * 0.7 * 400
    assert kernel.resistance_force(20.0, 1500.0, 0.01, 0.7, 1.2) == pytest.approx(want)
    assert kernel.resistance_force(0.0, 1500.0, 0.01, 0.7, 1.2) == 0.0
    assert kernel.drive_force_limit(10_000.0, 20.0, 6000.0, 100_000.0) == pytest.approx(5000.0)
    assert kernel.drive_force_limit(10_000.0, 5.0, 6000.0, 100_000.0) == pytest.approx(6000.0)
    assert kernel.drive_force_limit(-9000.0, 5.0, 6000.0, 100_000.0) == -9000.0
