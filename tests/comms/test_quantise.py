"""SI <-> ETSI conversion against TS 102 894-2 v1.3.1: units, signs, wrapping, clamping, unavailable values."""

from __future__ import annotations

import numpy as np
import pytest

from comms_models.itsg5 import quantise as q
from tests.timing import best_times


def arr(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float64)


class TestToEtsi:
    def test_speed_units_clamp_and_unavailable(self) -> None:
        # SpeedValue: 0.01 m/s; 16382 for >= 163.82 m/s; 16383 unavailable.
        np.testing.assert_array_equal(q.speed(arr(0.0, 12.34, 163.82, 200.0, np.inf, np.nan)),
                                      [0, 1234, 16382, 16382, 16382, 16383])  # fmt: skip

    def test_negative_speed_is_magnitude_plus_backward(self) -> None:
        etsi = q.to_etsi({"v": arr(-1.5, 1.5, np.nan)})
        np.testing.assert_array_equal(etsi["speed"], [150, 150, 16383])
        np.testing.assert_array_equal(etsi["drive_direction"], [1, 0, 0])
        np.testing.assert_array_equal(q.from_etsi(etsi)["v"], arr(-1.5, 1.5, np.nan))

    def test_heading_is_clockwise_from_north(self) -> None:
        # yaw is CCW from east (REP-103); HeadingValue is CW from north in 0.1 deg: east = 900.
        yaw = arr(0.0, np.pi / 2, np.pi, -np.pi / 2, -np.pi, np.deg2rad(45.0), np.deg2rad(-45.0))
        np.testing.assert_array_equal(q.heading(yaw), [900, 0, 2700, 1800, 2700, 450, 1350])

    def test_heading_wraps_3600_to_0(self) -> None:
        # 359.96 deg clockwise rounds to 3600, which is not a valid HeadingValue: it must become 0.
        yaw = np.deg2rad(arr(90.04, -269.96, 90.0 + 720.0, 90.0 - 1e-9))
        np.testing.assert_array_equal(q.heading(yaw), [0, 0, 0, 0])
        many = q.heading(np.linspace(-20.0, 20.0, 100_001))
        assert many.min() == 0 and many.max() == 3599

    def test_heading_unavailable(self) -> None:
        np.testing.assert_array_equal(q.heading(arr(np.nan, np.inf, -np.inf)), [3601, 3601, 3601])

    def test_yaw_rate_keeps_sign_and_centidegrees(self) -> None:
        # YawRateValue: 0.01 deg/s, + counter-clockwise. 0.001 rad/s = 0.0573 deg/s must not round to 0.
        out = q.yaw_rate(arr(0.1, -0.1, 0.001, -0.001, 10.0, -10.0, np.nan))
        np.testing.assert_array_equal(out, [573, -573, 6, -6, 32766, -32766, 32767])

    def test_curvature_keeps_sign_and_clamps(self) -> None:
        # CurvatureValue: 1/10000 1/m, + left; -1023..1022 out of range, 1023 unavailable.
        out = q.curvature(arr(0.01, -0.01, 1 / 50, -1 / 50, 0.2, -0.2, 0.0, np.nan))
        np.testing.assert_array_equal(out, [100, -100, 200, -200, 1022, -1023, 0, 1023])

    def test_acceleration_clamps_to_out_of_range(self) -> None:
        # LongitudinalAccelerationValue: 0.1 m/s^2; 160 / -160 for |a| >= 16 m/s^2; 161 unavailable.
        out = q.longitudinal_acceleration(arr(1.26, -3.0, 16.0, 20.0, -20.0, np.nan))
        np.testing.assert_array_equal(out, [13, -30, 160, 160, -160, 161])

    def test_position_units_clamp_unavailable(self) -> None:
        np.testing.assert_array_equal(q.latitude(arr(48.1234567, -33.5, 95.0, np.nan)),
                                      [481234567, -335000000, 900000000, 900000001])  # fmt: skip
        np.testing.assert_array_equal(q.longitude(arr(11.5754321, -179.9999999, 181.0, np.nan)),
                                      [115754321, -1799999999, 1800000000, 1800000001])  # fmt: skip

    def test_int64_columns_of_input_shape(self) -> None:
        n = 1000
        si = {key: np.zeros(n) for key in q.SI_KEYS}
        etsi = q.to_etsi(si)
        assert set(etsi) == set(q.ETSI_KEYS)
        for column in etsi.values():
            assert column.dtype == np.int64 and column.shape == (n,)

    def test_missing_keys_are_skipped(self) -> None:
        assert set(q.to_etsi({"v": arr(1.0)})) == {"speed", "drive_direction"}
        assert set(q.from_etsi({"heading": np.array([0])})) == {"yaw"}


class TestFromEtsi:
    def test_unavailable_becomes_nan(self) -> None:
        etsi = {
            "latitude": np.array([900000001]),
            "longitude": np.array([1800000001]),
            "heading": np.array([3601]),
            "speed": np.array([16383]),
            "longitudinal_acceleration": np.array([161]),
            "yaw_rate": np.array([32767]),
            "curvature": np.array([1023]),
        }
        for key, value in q.from_etsi(etsi).items():
            assert np.isnan(value).all(), key

    def test_units(self) -> None:
        si = q.from_etsi(
            {
                "latitude": np.array([481234567]),
                "longitude": np.array([-1]),
                "heading": np.array([900]),
                "speed": np.array([1234]),
                "longitudinal_acceleration": np.array([-15]),
                "yaw_rate": np.array([-100]),
                "curvature": np.array([-40]),
            }
        )
        assert si["lat_deg"][0] == 48.1234567
        assert si["lon_deg"][0] == -1e-7
        assert si["yaw"][0] == 0.0
        assert si["v"][0] == 12.34
        assert si["a"][0] == -1.5
        assert si["yaw_rate"][0] == pytest.approx(-np.deg2rad(1.0), rel=1e-15)
        assert si["curvature"][0] == -0.004

    def test_heading_to_yaw_in_half_open_interval(self) -> None:
        h = np.arange(3600)
        yaw = q.from_etsi({"heading": h})["yaw"]
        assert (yaw > -np.pi).all() and (yaw <= np.pi).all()
        np.testing.assert_array_equal(q.from_etsi({"heading": np.array([0, 900, 1800, 2700])})["yaw"],
                                      [np.pi / 2, 0.0, -np.pi / 2, np.pi])  # fmt: skip
        np.testing.assert_array_equal(q.heading(yaw), h)  # heading -> yaw -> heading is the identity


def test_quantisation_error_is_half_a_step() -> None:
    rng = np.random.default_rng(7)
    n = 10_000
    si = {
        "lat_deg": rng.uniform(-89.0, 89.0, n),
        "lon_deg": rng.uniform(-179.0, 179.0, n),
        "yaw": rng.uniform(-np.pi, np.pi, n),
        "v": rng.uniform(0.0, 160.0, n),
        "a": rng.uniform(-15.9, 15.9, n),
        "yaw_rate": rng.uniform(-5.0, 5.0, n),
        "curvature": rng.uniform(-0.1, 0.1, n),
    }
    back = q.quantise_si(si)
    half = {"lat_deg": 0.5e-7, "lon_deg": 0.5e-7, "v": 0.005, "a": 0.05, "curvature": 0.5e-4}
    for key, step in half.items():
        assert np.abs(back[key] - si[key]).max() <= step * (1 + 1e-9), key
    assert np.abs(back["yaw_rate"] - si["yaw_rate"]).max() <= np.deg2rad(0.005) * (1 + 1e-9)
    dyaw = np.angle(np.exp(1j * (back["yaw"] - si["yaw"])))
    assert np.abs(dyaw).max() <= np.deg2rad(0.05) * (1 + 1e-9)


def test_fast_enough_for_a_thousand_vehicles() -> None:
    """Vectorised: 1,000 vehicles cost little more than 10 (a loop over the vehicles would cost about 100 times as
    much); timed against itself in the same test, so load slows both sides alike (tests/timing.py)."""
    rng = np.random.default_rng(1)
    few = {key: rng.normal(size=10) for key in q.SI_KEYS}
    many = {key: rng.normal(size=1000) for key in q.SI_KEYS}
    few_s, many_s = best_times(lambda: q.quantise_si(few), lambda: q.quantise_si(many), inner=10)
    assert many_s < 20 * few_s, f"quantise_si: {few_s * 1e3:.3f} ms for 10 vehicles, {many_s * 1e3:.3f} ms for 1000"
