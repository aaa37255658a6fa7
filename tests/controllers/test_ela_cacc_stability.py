"""The closed forms of controllers.ela_cacc_stability against their own definitions and the AuNa numbers. The
simulation is checked against them in tests/orchestrator/test_fidelity_theory.py (frequency responses)."""

from __future__ import annotations

import numpy as np
import pytest

from controllers.ela_cacc_stability import (
    lateral_gain,
    lateral_peak_gain,
    lateral_string_stable,
    longitudinal_gain,
    max_stable_lateral_gain,
    min_lateral_stable_speed,
)

OMEGA = np.logspace(-3, 3, 2000)


@pytest.mark.parametrize(("k2", "r", "h", "v"), [(3.5, 1.0, 0.2, 1.0), (1.0, 1.0, 0.2, 1.0), (1.0, 1.0, 1.0, 0.5),
                                                 (0.9, 1.0, 0.2, 0.5), (2.0, 5.0, 0.5, 20.0)])
def test_sign_of_the_amplification_does_not_depend_on_frequency(k2, r, h, v):
    """(S3): |Gamma_lat|^2 - 1 = tau^2 w^4 (k2^2 tau^2 / 4 - 1) / ((w^2 + k2^2)(1 + tau^2 w^2))."""
    tau = (r + h * v) / v
    gain = lateral_gain(OMEGA, k2, r, h, v)
    closed = tau**2 * OMEGA**4 * (k2**2 * tau**2 / 4 - 1) / ((OMEGA**2 + k2**2) * (1 + tau**2 * OMEGA**2))
    np.testing.assert_allclose(gain**2 - 1, closed, atol=1e-12, rtol=1e-9)
    stable = lateral_string_stable(k2, r, h, v)
    assert stable == bool(np.all(gain <= 1 + 1e-12))
    assert lateral_peak_gain(k2, r, h, v) == pytest.approx(max(1.0, float(gain.max())), rel=1e-3)
    assert np.all(np.diff(gain) >= 0) if not stable else np.all(np.diff(gain) <= 0)


def test_the_auna_theory_parameters_need_2_69_mps():
    # k2 = 3.5, r = 1 m, h = 0.2 s: v >= k2 r / (2 - k2 h) = 3.5 / 1.3
    v_min = min_lateral_stable_speed(3.5, 1.0, 0.2)
    assert v_min == pytest.approx(2.6923, abs=1e-4)
    assert lateral_string_stable(3.5, 1.0, 0.2, v_min + 1e-9)
    assert not lateral_string_stable(3.5, 1.0, 0.2, v_min - 1e-6)
    assert lateral_peak_gain(3.5, 1.0, 0.2, 1.0) == pytest.approx(2.1)
    assert max_stable_lateral_gain(1.0, 0.2, 1.0) == pytest.approx(2.0 / 1.2)
    # AuNa's full-simulation parameters (1.0, r = 1 m, h = 1 s) sit exactly on the bound at 1 m/s
    assert min_lateral_stable_speed(1.0, 1.0, 1.0) == pytest.approx(1.0)
    assert min_lateral_stable_speed(2.0, 1.0, 1.0) == float("inf")


def test_feeding_the_curvature_rate_forward_would_amplify_at_every_frequency():
    # the disturbance cancelled exactly is the k2 -> infinity limit of the filter k2 / (s + k2) in (S2)
    assert np.all(lateral_gain(OMEGA, 1e12, 1.0, 0.2, 1.0) > 1.0)


def test_longitudinal_gain_is_the_time_gap_low_pass():
    assert longitudinal_gain(0.0, 0.2) == pytest.approx(1.0)
    assert longitudinal_gain(1 / 0.2, 0.2) == pytest.approx(1 / np.sqrt(2))
    assert np.all(np.diff(longitudinal_gain(OMEGA, 1.0)) < 0)
