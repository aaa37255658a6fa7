"""Mean path loss, shadowing and fading of a sidelink transmission on each link.

- ``winner_b1``: WINNER+ B1 LOS, the V2V model of 3GPP TR 36.885 (A.1.4) as used by the validated analytical model
  (Gonzalez-Martin et al. 2019): breakpoint ``d_BP = 4 h h fc / c``; below it ``22.7 log10 d + 27 + 20 log10 fc``,
  beyond it ``40 log10 d + 7.56 - 17.3 log10 h - 17.3 log10 h + 2.7 log10 fc`` (fc in GHz, h antenna height in m,
  d >= 3 m), never below free space ``20 log10 d + 46.4 + 20 log10(fc / 5)``; log-normal shadowing, 3 dB.
- ``tr37885_highway``: 3GPP TR 37.885 Table 6.2.1-1, highway LOS: ``32.4 + 20 log10 d_3D + 20 log10 fc``, 3 dB.
- ``dual_slope`` / ``free_space``: the ITS-G5 model's (``comms_models.itsg5.radio``, its default parameters), so
  a comparison of the two technologies can differ in the access layer only.
- fading (optional): Nakagami-m with the ITS-G5 model's distance-dependent m, the power gain Gamma(m, 1/m).

Every draw is keyed by (sender, receiver, subframe) under its own purpose, so the power a station sensed is the
power it would have decoded, and no station's draws depend on the others.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from core.rng import KeyedDraws

from ..itsg5 import radio as itsg5_radio
from ..itsg5.params import RadioParams
from .params import PropagationParams

SPEED_OF_LIGHT_MPS = 299_792_458.0
_WINNER_MIN_DISTANCE_M = 3.0


class Propagation:
    """Received powers [dBm] of transmissions at receivers, for one configuration."""

    def __init__(self, params: PropagationParams, carrier_ghz: float, tx_power_dbm: float,
                 shadow_key: np.uint64, fading_key: np.uint64) -> None:
        self.params = params
        self.fc_ghz = carrier_ghz
        self.tx_power_dbm = tx_power_dbm
        self.shadow_key, self.fading_key = shadow_key, fading_key
        self.itsg5 = RadioParams(path_loss=params.path_loss, fading=params.fading) \
            if params.path_loss in ("dual_slope", "free_space") else RadioParams(fading=params.fading)
        self.radius_m = self._cutoff_radius()

    # -- mean path loss ------------------------------------------------------------------------------------------
    def path_loss_db(self, d_m: np.ndarray) -> np.ndarray:
        """Mean path loss [dB] at ground distance ``d_m`` (equal antenna heights: d_3D = d)."""
        d = np.asarray(d_m, np.float64)
        kind, fc, h = self.params.path_loss, self.fc_ghz, self.params.antenna_height_m
        if kind == "winner_b1":
            d = np.maximum(d, _WINNER_MIN_DISTANCE_M)
            d_bp = 4.0 * h * h * fc * 1e9 / SPEED_OF_LIGHT_MPS
            near = 22.7 * np.log10(d) + 27.0 + 20.0 * math.log10(fc)
            far = 40.0 * np.log10(d) + 7.56 - 2.0 * 17.3 * math.log10(h) + 2.7 * math.log10(fc)
            free = 20.0 * np.log10(d) + 46.4 + 20.0 * math.log10(fc / 5.0)
            return np.maximum(np.where(d < d_bp, near, far), free)
        if kind == "tr37885_highway":
            return 32.4 + 20.0 * np.log10(np.maximum(d, 1.0)) + 20.0 * math.log10(fc)
        return itsg5_radio.path_loss_db(d, self.itsg5)

    def shadowing_sigma_db(self, d_m: np.ndarray) -> np.ndarray:
        """Std dev [dB] of the log-normal shadowing at ``d_m``."""
        if self.params.path_loss in ("winner_b1", "tr37885_highway"):
            return np.full(np.shape(d_m), self.params.shadowing_db)
        return itsg5_radio.shadowing_sigma_db(d_m, self.itsg5)

    def mean_rx_dbm(self, d_m: np.ndarray) -> np.ndarray:
        """Mean received power [dBm] (no shadowing, no fading)."""
        return self.tx_power_dbm - self.path_loss_db(d_m)

    def _cutoff_radius(self) -> float:
        """Largest distance whose mean received power reaches ``cutoff_power_dbm`` (bisection on a monotone law)."""
        lo, hi = 1.0, 1e6
        if self.mean_rx_dbm(np.array([hi]))[0] >= self.params.cutoff_power_dbm:
            return hi
        for _ in range(80):
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if self.mean_rx_dbm(np.array([mid]))[0] >= self.params.cutoff_power_dbm else (lo, mid)
        return hi

    # -- per transmission and link ---------------------------------------------------------------------------
    def rx_dbm(self, d_m: np.ndarray, sender: np.ndarray, receiver: np.ndarray, subframe: np.ndarray) -> np.ndarray:
        """Received power [dBm] of each (sender, receiver, subframe) link at distance ``d_m``: mean, shadowing and
        fading drawn from the link's keys."""
        n = len(d_m)
        power = self.mean_rx_dbm(d_m)
        if n == 0:
            return power
        sigma = self.shadowing_sigma_db(d_m)
        if np.any(sigma > 0.0):
            power = power + sigma * KeyedDraws(self.shadow_key, sender, receiver, subframe).normal(0.0, 1.0, n)
        if self.params.fading == "nakagami":
            m = itsg5_radio.nakagami_m(d_m, self.itsg5)
            u = KeyedDraws(self.fading_key, sender, receiver, subframe).random(n)
            gain = special.gammaincinv(m, np.clip(u, 1e-12, 1.0 - 1e-12)) / m  # Gamma(m, 1/m): mean 1
            power = power + 10.0 * np.log10(gain)
        return power
