"""String stability of the extended look-ahead CACC, linearised about a straight path at constant speed v.

K = diag(k1, k2) acts on world-frame errors (E5), so the lateral gain below is k2 for a platoon heading along x
and k1 heading along y; with k1 = k2 the results hold in every direction.

Longitudinal (predecessor speed -> follower speed), from (E1), (E5)-(E8) with th = 0, s = alpha = 0:
  z1' = -k1 z1 and h V_i s = k1 Z1 + V_{i-1} - V_i give  (h s + 1)(s + k1) V_i = (s + k1) V_{i-1}, so
(S1) Gamma_long(s) = 1 / (1 + h s)                       string stable for every h > 0, whatever k1.

Lateral (predecessor lateral position, curvature or yaw rate -> the follower's), with tau = D / v, D = r + h v:
  the look-ahead point L = y_i + D th_i tracks the extended point y_{i-1} - s, s ~ k D^2 / 2 (E3), and only the
  curvature rate of s is not fed forward, so  L' = y_{i-1}' + k2 (y_{i-1} - s - L);  the rear axle trails L
  like a towed trailer, y_i' = v th_i, so  Y_i = Y_L / (1 + tau s);  with curvature k = y'' / v^2:
(S2) Gamma_lat(s) = (1 - k2 tau^2 s^2 / (2 (s + k2))) / (1 + tau s)
(S3) |Gamma_lat(jw)|^2 - 1 = tau^2 w^4 (k2^2 tau^2 / 4 - 1) / ((w^2 + k2^2)(1 + tau^2 w^2))
  The sign does not depend on w: the chain is laterally string stable iff k2 tau <= 2, i.e. k2 (r + h v) <= 2 v;
  otherwise |Gamma_lat| grows monotonically with w towards k2 tau / 2. Hence the low-speed, high-k2 warning of the
  controller's authors: with (k2, r, h) = (3.5, 1 m, 0.2 s) lateral errors grow along the chain below 2.69 m/s.
  Feeding the curvature rate forward would not help: with the disturbance cancelled (k2 -> infinity in the
  numerator) |Gamma_lat| > 1 at every frequency; the unmodelled rate is what filters the extension.
Second-order terms couple the two: on arcs the longitudinal look-ahead error is driven by w times the lateral
one, so a laterally string-unstable chain also shows growing spacing errors on curves, while a laterally stable
one keeps them string stable.
"""

from __future__ import annotations

import numpy as np


def look_ahead_time(standstill_m: float, time_gap_s: float, speed_mps: float) -> float:
    """tau = D / v = (r + h v) / v [s]; infinite at standstill."""
    return (standstill_m + time_gap_s * speed_mps) / speed_mps if speed_mps > 0 else float("inf")


def longitudinal_gain(omega: np.ndarray | float, time_gap_s: float) -> np.ndarray:
    """|Gamma_long(j omega)| = 1 / sqrt(1 + h^2 omega^2)  (S1)."""
    w = np.asarray(omega, dtype=float)
    return 1.0 / np.sqrt(1.0 + (time_gap_s * w) ** 2)


def lateral_gain(
    omega: np.ndarray | float, k2: float, standstill_m: float, time_gap_s: float, speed_mps: float
) -> np.ndarray:
    """|Gamma_lat(j omega)| from predecessor to follower, for lateral position, heading, yaw rate or curvature
    (S2)."""
    tau = look_ahead_time(standstill_m, time_gap_s, speed_mps)
    s = 1j * np.asarray(omega, dtype=float)
    gamma = (1.0 - k2 * tau**2 * s**2 / (2.0 * (s + k2))) / (1.0 + tau * s)
    return np.abs(gamma)


def lateral_peak_gain(k2: float, standstill_m: float, time_gap_s: float, speed_mps: float) -> float:
    """sup over omega of |Gamma_lat(j omega)|: 1 when laterally string stable, else k2 tau / 2 (S3)."""
    return max(1.0, 0.5 * k2 * look_ahead_time(standstill_m, time_gap_s, speed_mps))


def lateral_string_stable(k2: float, standstill_m: float, time_gap_s: float, speed_mps: float) -> bool:
    """k2 (r + h v) <= 2 v  (S3)."""
    return k2 * (standstill_m + time_gap_s * speed_mps) <= 2.0 * speed_mps


def min_lateral_stable_speed(k2: float, standstill_m: float, time_gap_s: float) -> float:
    """Lowest speed at which the chain is laterally string stable: v >= k2 r / (2 - k2 h); infinite when
    k2 h >= 2 (S3)."""
    margin = 2.0 - k2 * time_gap_s
    return k2 * standstill_m / margin if margin > 0 else float("inf")


def max_stable_lateral_gain(standstill_m: float, time_gap_s: float, speed_mps: float) -> float:
    """Largest k2 that keeps the chain laterally string stable at ``speed_mps``: 2 v / (r + h v)  (S3)."""
    return 2.0 * speed_mps / (standstill_m + time_gap_s * speed_mps)
