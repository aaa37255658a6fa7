"""The local tangent-plane projection against WGS84 geometry."""

from __future__ import annotations

import numpy as np
import pytest

from comms_models.itsg5.geo import WGS84_A, WGS84_E2, LocalProjection


def meridian_radius(lat_deg: float) -> float:
    s = np.sin(np.deg2rad(lat_deg))
    return WGS84_A * (1 - WGS84_E2) / (1 - WGS84_E2 * s * s) ** 1.5


def test_origin_maps_to_zero_and_back() -> None:
    p = LocalProjection(48.137, 11.575)
    x, y = p.to_local(48.137, 11.575)
    assert abs(x) < 1e-9 and abs(y) < 1e-9
    lat, lon = p.to_geodetic(0.0, 0.0)
    assert lat == pytest.approx(48.137, abs=1e-12) and lon == pytest.approx(11.575, abs=1e-12)


@pytest.mark.parametrize("origin", [(48.137, 11.575), (-33.9, 151.2), (0.0, 0.0), (64.1, -21.9), (35.0, 179.99)])
def test_round_trip_well_below_a_millimetre_at_5_km(origin: tuple[float, float]) -> None:
    p = LocalProjection(*origin)
    rng = np.random.default_rng(3)
    x = rng.uniform(-5000.0, 5000.0, 5000)
    y = rng.uniform(-5000.0, 5000.0, 5000)
    lat, lon = p.to_geodetic(x, y)
    x2, y2 = p.to_local(lat, lon)
    assert lat.shape == x.shape
    assert np.hypot(x2 - x, y2 - y).max() < 1e-6


def test_one_hundredth_degree_of_latitude_at_45() -> None:
    # Length of 1 deg of latitude: 111132.92 - 559.82 cos 2phi + 1.175 cos 4phi - 0.0023 cos 6phi metres.
    phi = np.deg2rad(45.0)
    per_degree = 111132.92 - 559.82 * np.cos(2 * phi) + 1.175 * np.cos(4 * phi) - 0.0023 * np.cos(6 * phi)
    p = LocalProjection(45.0, 7.0)
    _, y = p.to_local(np.array([44.995, 45.005]), np.array([7.0, 7.0]))
    assert y[1] - y[0] == pytest.approx(per_degree / 100, abs=2e-3)
    assert y[1] - y[0] == pytest.approx(meridian_radius(45.0) * np.deg2rad(0.01), abs=1e-4)


def test_one_hundredth_degree_of_longitude_at_45() -> None:
    # Length of 1 deg of longitude: 111412.84 cos phi - 93.5 cos 3phi + 0.118 cos 5phi metres.
    phi = np.deg2rad(45.0)
    per_degree = 111412.84 * np.cos(phi) - 93.5 * np.cos(3 * phi) + 0.118 * np.cos(5 * phi)
    p = LocalProjection(45.0, 7.0)
    x, y = p.to_local(45.0, 7.01)
    assert x == pytest.approx(per_degree / 100, abs=2e-3)
    # The parallel is a small circle round the earth's axis, so it bends poleward of the plane's east axis:
    # y = x^2 tan(phi) / (2 N), N = 6388838.29 m the prime-vertical radius at 45 deg.
    assert y == pytest.approx(x**2 * np.tan(phi) / (2 * 6_388_838.29), rel=1e-3)


def test_axes_point_east_and_north() -> None:
    p = LocalProjection(52.52, 13.405)
    lat, lon = p.to_geodetic(np.array([1000.0, 0.0]), np.array([0.0, 1000.0]))
    assert lon[0] > 13.405 and lat[0] == pytest.approx(52.52, abs=1e-4)  # east: longitude grows
    assert lat[1] > 52.52 and lon[1] == pytest.approx(13.405, abs=1e-12)  # north: latitude grows
    assert (lat[1] - 52.52) * meridian_radius(52.52) * np.pi / 180 == pytest.approx(1000.0, abs=1e-3)


def test_rejects_a_pole_as_origin() -> None:
    with pytest.raises(ValueError, match="latitude"):
        LocalProjection(90.0, 0.0)
