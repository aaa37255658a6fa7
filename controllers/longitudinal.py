"""Conventions shared by the longitudinal laws (CC, ACC, PATH CACC, Ploeg CACC).

Inputs, row-aligned and in SI units:

- ``sensors["gap_m"]``: bumper-to-bumper distance to the predecessor [m], NaN when the range sensor has no
  target;
- ``sensors["gap_rate_mps"]``: d gap / dt [m/s]; when it is missing or NaN the laws use
  ``pred["v"] - ego["v"]``;
- ``ego["v"]`` [m/s], ``ego["a"]`` [m/s^2];
- ``pred["v"]``, ``pred["a"]``: the predecessor as last received over V2X; ``pred["u"]`` (its desired
  acceleration) when the message carries it;
- ``leader["v"]``, ``leader["a"]``: the platoon leader as last received.

Output: ``{"accel": u}``, the desired acceleration [m/s^2] before the vehicle's actuator lag and limits.
``desired_gap(v)`` returns the desired bumper-to-bumper gap (``gap_reference = "bumper"``).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from .base import Arrays, Controller


class LongitudinalController(Controller):
    """A law that only commands acceleration; the gap it keeps is measured bumper to bumper."""

    steers: ClassVar[bool] = False
    gap_reference: ClassVar[str] = "bumper"


def as_f64(a: np.ndarray) -> np.ndarray:
    """Contiguous float64 view (one compiled kernel signature whatever the caller's dtype)."""
    return np.ascontiguousarray(a, dtype=np.float64)


def column(table: Arrays, name: str, n: int, default: float = np.nan) -> np.ndarray:
    """``table[name]`` as float64, or ``default`` on every row when the column is absent."""
    if name in table:
        return as_f64(table[name])
    return np.full(n, default)



def desired_or_measured(received: Arrays, n: int) -> np.ndarray:
    """A sender's acceleration for feedforward: its desired acceleration (``u_des``, from a platooning message)
    where one arrived, else the measured one (``a``, from a CAM)."""
    measured = column(received, "a", n)
    if "u_des" not in received:
        return measured
    desired = column(received, "u_des", n)
    return np.where(np.isfinite(desired), desired, measured)
