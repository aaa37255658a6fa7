"""Mean path loss, shadowing and fading of a sidelink transmission on each link.

- ``winner_b1``: WINNER+ B1 LOS, the V2V model of 3GPP TR 36.885 (A.1.4) as used by the validated analytical model
  (Gonzalez-Martin et al. 2019): breakpoint ``d_BP = 4 h h fc / c``; below it ``22.7 log10 d + 27 + 20 log10 fc``,
  beyond it ``40 log10 d + 7.56 - 17.3 log10 h - 17.3 log10 h + 2.7 log10 fc`` (fc in GHz, h antenna height in m,
  d >= 3 m), never below free space ``20 log10 d + 46.4 + 20 log10(fc / 5)``; log-normal shadowing, 3 dB.
- ``tr37885_highway``: 3GPP TR 37.885 Table 6.2.1-1, highway LOS: ``32.4 + 20 log10 d_3D + 20 log10 fc``, 3 dB
  (equal antenna heights: d_3D = d).
- ``dual_slope`` / ``free_space``: the ITS-G5 model's laws and shadowing (``comms_models.itsg5.radio``, its
  default breakpoint and shadowing), so a comparison of the two technologies can differ in the access layer only.
- fading (optional): Nakagami-m with the ITS-G5 model's distance-dependent m; the power gain Gamma(m, 1/m) is read
  from a quantile table per distance class (``QUANTILE_POINTS`` midpoints).

The formulas are evaluated by the compiled kernels (``kernels``); this class holds their parameters and gives the
same values to Python (tests, the validation oracle, the cut-off radius).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from ..itsg5 import radio as itsg5_radio
from ..itsg5.params import RadioParams
from . import kernels as kn
from .params import PropagationParams

SPEED_OF_LIGHT_MPS = 299_792_458.0
QUANTILE_POINTS = 1024
_KINDS = {"winner_b1": kn.WINNER_B1, "tr37885_highway": kn.TR37885_HIGHWAY, "dual_slope": kn.DUAL_SLOPE,
          "free_space": kn.FREE_SPACE}


class Propagation:
    """Received powers [dBm] of transmissions at receivers, for one configuration."""

    def __init__(self, params: PropagationParams, carrier_ghz: float, tx_power_dbm: float,
                 shadow_key: np.uint64, fading_key: np.uint64) -> None:
        self.params = params
        self.tx_power_dbm = tx_power_dbm
        self.shadow_key, self.fading_key = np.uint64(shadow_key), np.uint64(fading_key)
        g5 = RadioParams(path_loss="free_space" if params.path_loss == "free_space" else "dual_slope")
        h = params.antenna_height_m
        if params.path_loss == "winner_b1":
            d_bp, min_d, near, far = 4.0 * h * h * carrier_ghz * 1e9 / SPEED_OF_LIGHT_MPS, 3.0, params.shadowing_db, \
                params.shadowing_db
        elif params.path_loss == "tr37885_highway":
            d_bp, min_d, near, far = math.inf, 1.0, params.shadowing_db, params.shadowing_db
        else:
            d_bp, min_d, near, far = g5.breakpoint_m, g5.min_distance_m, g5.shadowing_near_db, g5.shadowing_far_db
        pl = np.array([_KINDS[params.path_loss], carrier_ghz, h, min_d, d_bp, near, far], np.float64)
        self.pl = np.concatenate([pl, kn.loss_constants(pl)])
        self.fade_lim, self.fade_db = self._fading_tables(params, g5)
        self.radius_m = self._cutoff_radius()

    @staticmethod
    def _fading_tables(params: PropagationParams, g5: RadioParams) -> tuple[np.ndarray, np.ndarray]:
        """Upper distance of each Nakagami class and its gain quantiles [dB]; empty without fading."""
        if params.fading == "none":
            return np.empty(0), np.empty((0, 1))
        q = (np.arange(QUANTILE_POINTS) + 0.5) / QUANTILE_POINTS
        table = itsg5_radio.NAKAGAMI_M_TABLE if g5.nakagami_m == "distance_table" else itsg5_radio.NAKAGAMI_M_SIMPLE
        limits = np.array([lim for lim, _ in table])
        gains = np.stack([10.0 * np.log10(stats.gamma.ppf(q, a=m, scale=1.0 / m)) for _, m in table])
        return limits, gains

    # -- mean path loss ------------------------------------------------------------------------------------------
    def path_loss_db(self, d_m: np.ndarray) -> np.ndarray:
        """Mean path loss [dB] at ground distance ``d_m``."""
        d = np.atleast_1d(np.asarray(d_m, np.float64))
        return kn.loss_db_array(np.ascontiguousarray(d.ravel()), self.pl).reshape(d.shape)

    def shadowing_sigma_db(self, d_m: np.ndarray) -> np.ndarray:
        """Std dev [dB] of the log-normal shadowing at ``d_m``."""
        d = np.atleast_1d(np.asarray(d_m, np.float64))
        return kn.sigma_db_array(np.ascontiguousarray(d.ravel()), self.pl).reshape(d.shape)

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
        fading drawn from the link's keys (the kernels' values)."""
        as_i = lambda a: np.ascontiguousarray(a, np.int64)  # noqa: E731
        return kn.power_dbm_array(np.ascontiguousarray(d_m, np.float64), as_i(sender), as_i(receiver), as_i(subframe),
                                  self.tx_power_dbm, self.pl, self.shadow_key, self.fading_key, self.fade_lim,
                                  self.fade_db)

    def kernel_args(self) -> tuple:
        """``(tx_dbm, pl, shadow_key, fade_key, fade_lim, fade_db)`` as the kernels take them."""
        return (self.tx_power_dbm, self.pl, self.shadow_key, self.fading_key, self.fade_lim, self.fade_db)
