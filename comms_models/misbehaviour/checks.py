"""The plausibility checks of F2MD (Kamel et al., "Simulation framework for misbehavior detection in vehicular
networks", IEEE TVT 2020; VeReMi, van der Heijden et al. 2018), each a vectorised function of a message and the
previous one of its (receiver, sender) pair: True where the message fails the check. SI units throughout."""

from __future__ import annotations

import numpy as np

CHECKS = ("acceptance_range", "speed", "position_consistency", "speed_consistency", "position_speed",
          "beacon_frequency", "sudden_appearance", "sensor_overlap", "desired_accel", "kalman")
"""Check names; bit k of a verdict's mask is ``CHECKS[k]`` (``kalman``: the residual of ``kalman.KalmanTracks``)."""
DEFAULT_CHECKS = CHECKS[:-1]
"""The plausibility detector's checks unless the scenario lists them (``kalman`` is asked for by name)."""


def bit(name: str) -> int:
    """The mask bit of check ``name``."""
    return 1 << CHECKS.index(name)


def acceptance_range(distance_m: np.ndarray, max_range_m: float) -> np.ndarray:
    """The claimed position lies farther from the receiver than a message can travel."""
    return distance_m > max_range_m


def speed(v: np.ndarray, max_speed_mps: float, max_reverse_mps: float) -> np.ndarray:
    """The claimed speed exceeds what a vehicle drives."""
    return (v > max_speed_mps) | (v < -max_reverse_mps)


def position_consistency(moved_m: np.ndarray, v_prev: np.ndarray, v: np.ndarray, dt: np.ndarray,
                         max_accel: float, tol_m: float) -> np.ndarray:
    """The sender moved farther between two messages than its claimed speeds and the largest acceleration allow."""
    bound = np.maximum(np.abs(v_prev), np.abs(v)) * dt + 0.5 * max_accel * dt**2 + tol_m
    return moved_m > bound


def speed_consistency(v_prev: np.ndarray, v: np.ndarray, dt: np.ndarray, max_accel: float,
                      tol_mps: float) -> np.ndarray:
    """The claimed speed changed faster than the largest acceleration allows."""
    return np.abs(v - v_prev) > max_accel * dt + tol_mps


def position_speed(moved_m: np.ndarray, v_prev: np.ndarray, v: np.ndarray, dt: np.ndarray, tol_m: float,
                   tol_mps: float) -> np.ndarray:
    """The distance moved between two messages disagrees with the mean of the claimed speeds (trapezoid rule)."""
    return np.abs(moved_m - 0.5 * (np.abs(v_prev) + np.abs(v)) * dt) > tol_m + tol_mps * dt


def beacon_frequency(dt: np.ndarray, min_interval_s: float) -> np.ndarray:
    """Two messages of one sender closer than the channel lets an honest station send them."""
    return dt < min_interval_s


def sudden_appearance(first: np.ndarray, listening_s: np.ndarray, distance_m: np.ndarray, warmup_s: float,
                      appearance_range_m: float) -> np.ndarray:
    """A sender heard for the first time close by, once the receiver has listened long enough to have heard it
    come."""
    return first & (listening_s > warmup_s) & (distance_m < appearance_range_m)


def sensor_overlap(expected_range_m: np.ndarray, measured_m: np.ndarray, tol_m: np.ndarray) -> np.ndarray:
    """The receiver's range sensor sees the sender at another distance than its message claims (NaN: no
    measurement of that sender, no verdict)."""
    with np.errstate(invalid="ignore"):
        return np.abs(expected_range_m - measured_m) > tol_m


def desired_accel(u_des: np.ndarray, a: np.ndarray, max_accel: float, tol_mps2: float) -> np.ndarray:
    """A platooning message's desired acceleration beyond any vehicle's, or far from what the sender does."""
    with np.errstate(invalid="ignore"):
        return (np.abs(u_des) > max_accel) | (np.abs(u_des - a) > tol_mps2)
