"""UTM on the WGS84 ellipsoid, both ways, vectorised: the projection of a geo-referenced SUMO network
(``projParameter="+proj=utm +zone=32 +ellps=WGS84 ..."``), so its coordinates can be taken to the scenario's
WGS84 origin without pyproj.

Krüger's series in the third flattening n to third order, as given in "Universal Transverse Mercator coordinate
system", Wikipedia (after Karney, "Transverse Mercator with an accuracy of a few nanometers", J. Geodesy 85, 2011):
truncation errors are below a millimetre within a zone.
"""

from __future__ import annotations

import re

import numpy as np

_A = 6_378_137.0  # WGS84 semi-major axis [m]
_F = 1.0 / 298.257223563  # WGS84 flattening
_N = _F / (2.0 - _F)  # third flattening
_K0 = 0.9996  # UTM scale on the central meridian
_E0 = 500_000.0  # false easting [m]
_RECT = _A / (1.0 + _N) * (1.0 + _N**2 / 4.0 + _N**4 / 64.0)  # rectifying radius [m]
_ALPHA = (_N / 2 - 2 * _N**2 / 3 + 5 * _N**3 / 16, 13 * _N**2 / 48 - 3 * _N**3 / 5, 61 * _N**3 / 240)
_BETA = (_N / 2 - 2 * _N**2 / 3 + 37 * _N**3 / 96, _N**2 / 48 + _N**3 / 15, 17 * _N**3 / 480)
_DELTA = (2 * _N - 2 * _N**2 / 3 - 2 * _N**3, 7 * _N**2 / 3 - 8 * _N**3 / 5, 56 * _N**3 / 15)
_TWO_SQRT_N = 2.0 * np.sqrt(_N) / (1.0 + _N)


class Utm:
    """One UTM zone (``south``: false northing 10,000 km)."""

    def __init__(self, zone: int, south: bool = False) -> None:
        if not 1 <= zone <= 60:
            raise ValueError(f"UTM zone must be 1..60, got {zone}")
        self.zone = zone
        self.south = south
        self.lon0 = np.radians(6.0 * zone - 183.0)
        self.n0 = 10_000_000.0 if south else 0.0

    @classmethod
    def parse(cls, proj: str) -> Utm:
        """The zone of a PROJ string such as SUMO writes (``+proj=utm +zone=32 +ellps=WGS84 ...``); other
        projections and ellipsoids are refused."""
        if "+proj=utm" not in proj or not re.search(r"\+(ellps|datum)=WGS84", proj):
            raise ValueError(f"only UTM on WGS84 geo-references are supported, the net has '{proj}'")
        zone = re.search(r"\+zone=(\d+)", proj)
        if zone is None:
            raise ValueError(f"no +zone in the net's projection '{proj}'")
        return cls(int(zone.group(1)), "+south" in proj)

    def forward(self, lat_deg: np.ndarray, lon_deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """WGS84 degrees -> UTM easting, northing [m]."""
        phi = np.radians(np.asarray(lat_deg, np.float64))
        dlam = np.radians(np.asarray(lon_deg, np.float64)) - self.lon0
        sin_phi = np.sin(phi)
        t = np.sinh(np.arctanh(sin_phi) - _TWO_SQRT_N * np.arctanh(_TWO_SQRT_N * sin_phi))
        xi = np.arctan2(t, np.cos(dlam))
        eta = np.arctanh(np.sin(dlam) / np.sqrt(1.0 + t * t))
        east, north = eta.copy(), xi.copy()
        for j, alpha in enumerate(_ALPHA, start=1):
            east += alpha * np.cos(2 * j * xi) * np.sinh(2 * j * eta)
            north += alpha * np.sin(2 * j * xi) * np.cosh(2 * j * eta)
        return _E0 + _K0 * _RECT * east, self.n0 + _K0 * _RECT * north

    def inverse(self, east: np.ndarray, north: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """UTM easting, northing [m] -> WGS84 degrees (latitude, longitude)."""
        xi = (np.asarray(north, np.float64) - self.n0) / (_K0 * _RECT)
        eta = (np.asarray(east, np.float64) - _E0) / (_K0 * _RECT)
        xi_p, eta_p = xi.copy(), eta.copy()
        for j, beta in enumerate(_BETA, start=1):
            xi_p -= beta * np.sin(2 * j * xi) * np.cosh(2 * j * eta)
            eta_p -= beta * np.cos(2 * j * xi) * np.sinh(2 * j * eta)
        chi = np.arcsin(np.sin(xi_p) / np.cosh(eta_p))
        phi = chi.copy()
        for j, delta in enumerate(_DELTA, start=1):
            phi += delta * np.sin(2 * j * chi)
        lam = self.lon0 + np.arctan2(np.sinh(eta_p), np.cos(xi_p))
        return np.degrees(phi), np.degrees(lam)
