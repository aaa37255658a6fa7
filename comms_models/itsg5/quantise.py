"""Vectorised conversion between the simulation's SI state and the integer fields a CAM carries.

Inside the simulation everything is SI in a right-handed local frame (REP-103 ENU: x east, y north, yaw
counter-clockwise from +x). On the wire a CAM uses the units of the Common Data Dictionary, ETSI TS 102 894-2
v1.3.1. Per field:

==========================  ================================  ==============================  ===========
SI key (unit)               ETSI key (unit)                   valid range / clamped to        unavailable
==========================  ================================  ==============================  ===========
lat_deg (deg)               latitude (0.1 µdeg)               ±900000000                      900000001
lon_deg (deg)               longitude (0.1 µdeg)              ±1800000000                     1800000001
yaw (rad, CCW from east)    heading (0.1 deg CW from north)   wrapped into 0..3599            3601
v (m/s)                     speed (0.01 m/s) of abs(v)        0..16382 (16382 = too fast)     16383
(sign of v)                 drive_direction (0 fwd, 1 back)   0, 1
a (m/s^2, + forward)        longitudinal_acceleration (0.1)   ±160 (= ±16 m/s^2 or beyond)    161
yaw_rate (rad/s, CCW +)     yaw_rate (0.01 deg/s, CCW +)      ±32766                          32767
curvature (1/m, + left)     curvature (1/10000 1/m, + left)   -1023..1022                     1023
==========================  ================================  ==============================  ===========

Rounding is to the nearest integer, ties to even (``np.rint``). Signs of yaw rate and curvature are kept:
both are signed in the standard (+ = to the left), and dropping them would turn every curve the wrong way
for half the receivers. ``from_etsi`` maps each "unavailable" value back to NaN, and a clamped value to the
limit it was clamped to.

The heading is taken relative to the local frame's north (+y). Over a 10 km area that differs from true
north by the meridian convergence (about 0.09 deg at 45 deg latitude, 10 km east of the origin), below the
0.1 deg resolution of the field.

Each function is a handful of numpy operations on whole columns (no per-vehicle Python): this runs every step
for every station.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

# TS 102 894-2 v1.3.1 special values.
LATITUDE_UNAVAILABLE = 900_000_001  # Latitude
LONGITUDE_UNAVAILABLE = 1_800_000_001  # Longitude
HEADING_UNAVAILABLE = 3601  # HeadingValue
SPEED_UNAVAILABLE = 16383  # SpeedValue
SPEED_MAX = 16382  # SpeedValue: larger speeds are sent as 16382
ACCELERATION_UNAVAILABLE = 161  # LongitudinalAccelerationValue
ACCELERATION_MAX = 160  # LongitudinalAccelerationValue: ±16 m/s^2 saturate here
YAW_RATE_UNAVAILABLE = 32767  # YawRateValue
YAW_RATE_MAX = 32766  # YawRateValue: ±327.66 deg/s saturate here
CURVATURE_UNAVAILABLE = 1023  # CurvatureValue
# CurvatureValue is -1023..1023 with 1023 reserved for "unavailable"; the out-of-range codes follow the
# later CDD (v2.x: negativeOutOfRange -1023, positiveOutOfRange 1022), which is wire-identical.
CURVATURE_MIN = -1023
CURVATURE_MAX = 1022
DRIVE_FORWARD = 0  # DriveDirection forward
DRIVE_BACKWARD = 1  # DriveDirection backward

_CENTIDEGREES_PER_RADIAN = 18000.0 / np.pi

SI_KEYS = ("lat_deg", "lon_deg", "yaw", "v", "a", "yaw_rate", "curvature")
ETSI_KEYS = (
    "latitude",
    "longitude",
    "heading",
    "speed",
    "drive_direction",
    "longitudinal_acceleration",
    "yaw_rate",
    "curvature",
)


def _quantise(x: np.ndarray, scale: float, lo: int, hi: int, unavailable: int) -> np.ndarray:
    """``x * scale`` rounded to nearest and clamped to [lo, hi]; NaN -> ``unavailable``; int64 out."""
    x = np.asarray(x, dtype=np.float64)
    nan = np.isnan(x)
    # Clamp in SI units before scaling, so huge inputs cannot overflow; NaN is replaced before the cast
    # (casting NaN to an integer is undefined).
    scaled = np.clip(np.where(nan, 0.0, x), lo / scale, hi / scale) * scale
    return np.where(nan, np.int64(unavailable), np.rint(scaled).astype(np.int64))


def _restore(q: np.ndarray, unavailable: int, divisor: float) -> np.ndarray:
    """Integer field -> float64 value in its unit / ``divisor``; ``unavailable`` -> NaN."""
    q = np.asarray(q, dtype=np.int64)
    # Division (not multiplication by 1/divisor) is correctly rounded, so 1 -> 1e-7 exactly etc.
    return np.where(q == unavailable, np.nan, q / divisor)


def latitude(lat_deg: np.ndarray) -> np.ndarray:
    """Degrees -> Latitude (0.1 micro-degree)."""
    return _quantise(lat_deg, 1e7, -900_000_000, 900_000_000, LATITUDE_UNAVAILABLE)


def longitude(lon_deg: np.ndarray) -> np.ndarray:
    """Degrees -> Longitude (0.1 micro-degree)."""
    return _quantise(lon_deg, 1e7, -1_800_000_000, 1_800_000_000, LONGITUDE_UNAVAILABLE)


def heading(yaw: np.ndarray) -> np.ndarray:
    """Yaw (rad, CCW from east) -> HeadingValue (0.1 deg, CW from north, 0..3599); non-finite -> 3601."""
    yaw = np.asarray(yaw, dtype=np.float64)
    ok = np.isfinite(yaw)
    # The clip only bounds absurd angles (it keeps the arithmetic finite); real ones pass unchanged.
    deci = 900.0 - np.rad2deg(np.clip(np.where(ok, yaw, 0.0), -1e9, 1e9)) * 10.0
    # Wrap after rounding, so 359.96 deg -> 3600 -> 0 rather than the invalid 3600.
    wrapped = np.mod(np.rint(deci), 3600.0).astype(np.int64)
    return np.where(ok, wrapped, np.int64(HEADING_UNAVAILABLE))


def speed(v: np.ndarray) -> np.ndarray:
    """|v| (m/s) -> SpeedValue (0.01 m/s); beyond 163.82 m/s -> 16382, NaN -> 16383."""
    return _quantise(np.abs(np.asarray(v, np.float64)), 100.0, 0, SPEED_MAX, SPEED_UNAVAILABLE)


def drive_direction(v: np.ndarray) -> np.ndarray:
    """Sign of v -> DriveDirection (0 forward, 1 backward); NaN counts as forward."""
    return np.where(np.asarray(v, np.float64) < 0.0, np.int64(DRIVE_BACKWARD), np.int64(DRIVE_FORWARD))


def longitudinal_acceleration(a: np.ndarray) -> np.ndarray:
    """a (m/s^2, + forward) -> LongitudinalAccelerationValue (0.1 m/s^2, ±160)."""
    return _quantise(a, 10.0, -ACCELERATION_MAX, ACCELERATION_MAX, ACCELERATION_UNAVAILABLE)


def yaw_rate(omega: np.ndarray) -> np.ndarray:
    """Yaw rate (rad/s, CCW +) -> YawRateValue (0.01 deg/s, CCW +, ±32766)."""
    return _quantise(omega, _CENTIDEGREES_PER_RADIAN, -YAW_RATE_MAX, YAW_RATE_MAX, YAW_RATE_UNAVAILABLE)


def curvature(kappa: np.ndarray) -> np.ndarray:
    """Curvature (1/m, + left) -> CurvatureValue (1/10000 1/m, -1023..1022)."""
    return _quantise(kappa, 10000.0, CURVATURE_MIN, CURVATURE_MAX, CURVATURE_UNAVAILABLE)


def to_etsi(si: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """SI columns (keys ``SI_KEYS``) -> int64 ETSI columns (``ETSI_KEYS``); missing SI keys are skipped."""
    out: dict[str, np.ndarray] = {}
    if "lat_deg" in si:
        out["latitude"] = latitude(si["lat_deg"])
    if "lon_deg" in si:
        out["longitude"] = longitude(si["lon_deg"])
    if "yaw" in si:
        out["heading"] = heading(si["yaw"])
    if "v" in si:
        out["speed"] = speed(si["v"])
        out["drive_direction"] = drive_direction(si["v"])
    if "a" in si:
        out["longitudinal_acceleration"] = longitudinal_acceleration(si["a"])
    if "yaw_rate" in si:
        out["yaw_rate"] = yaw_rate(si["yaw_rate"])
    if "curvature" in si:
        out["curvature"] = curvature(si["curvature"])
    return out


def from_etsi(etsi: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """ETSI integer columns -> float64 SI columns; "unavailable" -> NaN. Missing ETSI keys are skipped.

    ``yaw`` comes back in (-pi, pi]; ``v`` is negative where ``drive_direction`` is backward (1).
    """
    out: dict[str, np.ndarray] = {}
    if "latitude" in etsi:
        out["lat_deg"] = _restore(etsi["latitude"], LATITUDE_UNAVAILABLE, 1e7)
    if "longitude" in etsi:
        out["lon_deg"] = _restore(etsi["longitude"], LONGITUDE_UNAVAILABLE, 1e7)
    if "heading" in etsi:
        h = np.asarray(etsi["heading"], dtype=np.int64)
        # Back to CCW-from-east in integer deci-degrees first, wrapped to (-1800, 1800], so no float drift.
        d = np.mod(900 - h, 3600)
        d = np.where(d > 1800, d - 3600, d)
        out["yaw"] = np.where(h == HEADING_UNAVAILABLE, np.nan, np.deg2rad(d / 10.0))
    if "speed" in etsi:
        v = _restore(etsi["speed"], SPEED_UNAVAILABLE, 100.0)
        if "drive_direction" in etsi:
            v = np.where(np.asarray(etsi["drive_direction"]) == DRIVE_BACKWARD, -v, v)
        out["v"] = v
    if "longitudinal_acceleration" in etsi:
        out["a"] = _restore(etsi["longitudinal_acceleration"], ACCELERATION_UNAVAILABLE, 10.0)
    if "yaw_rate" in etsi:
        out["yaw_rate"] = np.deg2rad(_restore(etsi["yaw_rate"], YAW_RATE_UNAVAILABLE, 100.0))
    if "curvature" in etsi:
        out["curvature"] = _restore(etsi["curvature"], CURVATURE_UNAVAILABLE, 10000.0)
    return out


def quantise_si(si: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What a receiver reconstructs from a CAM carrying ``si``: ``from_etsi(to_etsi(si))``."""
    return from_etsi(to_etsi(si))
