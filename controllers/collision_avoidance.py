"""Collision avoidance for followers that drive on their range sensor alone (the degraded mode of the fallback).

Rajamani's ACC answers a closing speed dv with -dv / T: the closing decays over T (1.5 s), so the ACC needs a gap
of about T dv to absorb a predecessor that stops. A follower that falls back from a CACC gap (0.2-1 s) has much
less, and without help it collides even seconds after the switch. The floor used here is the least constant
deceleration that ends the closing before the bumper gap shrinks to ``stop_gap`` (kinematics,
dv^2 = 2 a (gap - stop_gap)); re-evaluated every control step it is a feedback law that tightens as the
predecessor keeps braking. The vehicle model limits what is actually applied to its own maximum deceleration.
"""

from __future__ import annotations

import numpy as np


def required_deceleration(gap_m: np.ndarray, gap_rate_mps: np.ndarray, stop_gap_m: float) -> np.ndarray:
    """Acceleration [m/s^2] (<= 0) that stops the closing ``-gap_rate`` at ``stop_gap_m`` bumper gap; 0 where the
    gap is opening or unknown (NaN). At or inside ``stop_gap_m`` while closing: a deceleration far beyond any
    vehicle's limit, i.e. full braking."""
    gap = np.asarray(gap_m, dtype=float)
    closing = -np.asarray(gap_rate_mps, dtype=float)
    known = np.isfinite(gap) & np.isfinite(closing) & (closing > 0.0)
    room = np.maximum(np.where(known, gap, 0.0) - stop_gap_m, 1e-3)
    return np.where(known, -np.square(np.where(known, closing, 0.0)) / (2.0 * room), 0.0)
