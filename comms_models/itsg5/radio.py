"""Physical layer of the ITS-G5 channel: airtime, path loss, shadowing, Nakagami-m fading, sensitivity.

Propagation at 5.9 GHz (wavelength 5.08 cm), per link and per frame:

- free space: ``PL = 47.86 + 20 log10 d`` dB (no shadowing);
- dual slope (measured highway model): ``47.86 + 20 log10 d`` + N(0, 5.6 dB) below the 100 m breakpoint,
  ``47.86 + 20 log10 d_b + 40 log10(d / d_b)`` + N(0, 8.1 dB) beyond;
- Nakagami-m fast fading: the received power is Gamma(m, mean/m) distributed, so a frame whose mean power is
  ``P`` exceeds a threshold ``T`` with probability ``gammaincc(m, m T / P)``.

Shadowing is drawn independently per frame and link (no spatial correlation). The product of the shadowing and
fading factors is sampled by inverse transform from its tabulated quantile function (``QUANTILE_POINTS``
midpoints, linear interpolation; the extreme 1/(2 K) of each tail is clipped), so the compiled access kernel needs
one uniform 32-bit number per link and no transcendental function.

Airtime (IEEE 802.11p OFDM, 10 MHz, 6 Mbit/s = 48 data bits per 8 us symbol):
``T_on = 40 us + 8 us * ceil((16 + 8 L + 6) / 48)`` with ``L`` the MAC frame in bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from .gain_cache import cached_gains
from .params import RadioParams

FREE_SPACE_1M_DB = 47.86
"""Free-space loss at 1 m and 5.9 GHz: 20 log10(4 pi / lambda), lambda = 5.08 cm."""

PREAMBLE_NS = 40_000  # [ns] PLCP preamble and SIGNAL field, 10 MHz channel
SYMBOL_NS = 8_000  # [ns] OFDM symbol, 10 MHz channel
BITS_PER_SYMBOL = 48  # data bits per symbol at 6 Mbit/s (QPSK 1/2)
SERVICE_TAIL_BITS = 16 + 6  # SERVICE field and tail bits around the PSDU

NAKAGAMI_M_TABLE = ((4.7, 3.01), (11.7, 1.18), (28.9, 1.94), (71.6, 1.86), (177.3, 0.45), (math.inf, 0.32))
"""(upper distance limit in m, m): distance-dependent Nakagami m used with the highway model."""
NAKAGAMI_M_SIMPLE = ((80.0, 1.5), (math.inf, 0.75))
"""(upper distance limit in m, m): the simpler two-value set."""

QUANTILE_POINTS = 2048
"""Resolution K of the tabulated quantile functions (small enough to stay in the CPU cache)."""


def airtime_ns(frame_bytes: int | np.ndarray) -> int | np.ndarray:
    """Time on air of an 802.11p frame of ``frame_bytes`` bytes (MAC header to FCS) at 6 Mbit/s, in ns."""
    bits = SERVICE_TAIL_BITS + 8 * np.asarray(frame_bytes, np.int64)
    symbols = -(-bits // BITS_PER_SYMBOL)  # ceiling division on integers
    out = PREAMBLE_NS + SYMBOL_NS * symbols
    return int(out) if np.ndim(out) == 0 else out


def dbm_to_mw(dbm: float | np.ndarray) -> float | np.ndarray:
    """dBm -> mW."""
    return 10.0 ** (np.asarray(dbm, np.float64) / 10.0)


def mw_to_dbm(mw: float | np.ndarray) -> np.ndarray:
    """mW -> dBm (0 mW -> -inf without a warning)."""
    mw = np.asarray(mw, np.float64)
    with np.errstate(divide="ignore"):
        return 10.0 * np.log10(mw)


def path_loss_db(d_m: float | np.ndarray, params: RadioParams) -> np.ndarray:
    """Mean path loss (without shadowing or fading) in dB at distance ``d_m``."""
    d = np.maximum(np.asarray(d_m, np.float64), params.min_distance_m)
    near = FREE_SPACE_1M_DB + 20.0 * np.log10(d)
    if params.path_loss == "free_space":
        return near
    bp = params.breakpoint_m
    far = FREE_SPACE_1M_DB + 20.0 * math.log10(bp) + 40.0 * np.log10(np.maximum(d, bp) / bp)
    return np.where(d < bp, near, far)


def mean_rx_power_dbm(d_m: float | np.ndarray, params: RadioParams) -> np.ndarray:
    """Mean received power in dBm at distance ``d_m``."""
    return params.tx_power_dbm - path_loss_db(d_m, params)


def shadowing_sigma_db(d_m: float | np.ndarray, params: RadioParams) -> np.ndarray:
    """Standard deviation of the log-normal shadowing at distance ``d_m`` (0 for free space)."""
    d = np.asarray(d_m, np.float64)
    if params.path_loss == "free_space":
        return np.zeros_like(d)
    return np.where(d < params.breakpoint_m, params.shadowing_near_db, params.shadowing_far_db)


def nakagami_m(d_m: float | np.ndarray, params: RadioParams) -> np.ndarray:
    """Nakagami shape m at distance ``d_m`` (NaN when fading is off)."""
    d = np.asarray(d_m, np.float64)
    if params.fading == "none":
        return np.full(d.shape, np.nan)
    table = NAKAGAMI_M_TABLE if params.nakagami_m == "distance_table" else NAKAGAMI_M_SIMPLE
    limits = np.array([lim for lim, _ in table])
    values = np.array([m for _, m in table])
    return values[np.minimum(np.searchsorted(limits, d, side="left"), len(values) - 1)]


def reception_probability(d_m: float | np.ndarray, params: RadioParams, threshold_dbm: float | None = None,
                          shadow_points: int = 201) -> np.ndarray:
    """Probability that one frame's received power reaches ``threshold_dbm`` (default: the sensitivity) at
    ``d_m``, without interference: the Nakagami tail ``gammaincc(m, m T / P)`` averaged over the log-normal
    shadowing (Gauss-Hermite quadrature)."""
    thr = params.sensitivity_dbm if threshold_dbm is None else threshold_dbm
    d = np.atleast_1d(np.asarray(d_m, np.float64))
    mean_dbm = mean_rx_power_dbm(d, params)
    sigma = shadowing_sigma_db(d, params)
    z, w = np.polynomial.hermite_e.hermegauss(shadow_points)
    w = w / w.sum()
    p_dbm = mean_dbm[:, None] + sigma[:, None] * z[None, :]
    if params.fading == "none":
        prob = (p_dbm >= thr).astype(np.float64)
    else:
        m = nakagami_m(d, params)[:, None]
        prob = special.gammaincc(m, m * 10.0 ** ((thr - p_dbm) / 10.0))
    return prob @ w


def cutoff_radius_m(params: RadioParams) -> float:
    """Distance at which the mean received power (path loss only) falls to ``cutoff_power_dbm``: the radius of the
    spatial index. A frame from farther away is not linked at all, neither decoded nor summed as interference.

    Shadowing and fading have unbounded tails, so the bound this buys is probabilistic (``cutoff_bound``): at the
    default -110 dBm (1,344 m on the dual-slope model) a frame from the radius reaches the sensitivity, or the
    carrier-sense level, with probability 2.0e-3 (``reception_probability``, decreasing beyond), and the mean power
    of one such frame, shadowing included, is -102.4 dBm, 4.4 dB below the noise floor. ``cutoff_power_for``
    inverts the first figure: -118.0 dBm (2,132 m) for 1e-4."""
    budget = params.tx_power_dbm - params.cutoff_power_dbm  # allowed path loss in dB
    if params.path_loss == "free_space":
        d = 10.0 ** ((budget - FREE_SPACE_1M_DB) / 20.0)
    else:
        bp = params.breakpoint_m
        at_bp = FREE_SPACE_1M_DB + 20.0 * math.log10(bp)
        d = 10.0 ** ((budget - FREE_SPACE_1M_DB) / 20.0) if budget < at_bp else bp * 10.0 ** (
            (budget - at_bp) / 40.0)
    return max(float(d), params.min_distance_m)


@dataclass(frozen=True)
class CutoffBound:
    """What the cut-off radius can change (``cutoff_bound``)."""

    radius_m: float
    p_decode: float  # probability that a frame from the radius reaches the sensitivity (no interference)
    p_sense: float  # ... reaches the carrier-sense level (it would freeze backoffs and count in the CBR)
    frame_mean_dbm: float  # mean power of a frame from the radius, shadowing and fading included
    far_mw_per_tx_density: float  # [mW per (transmitter on air per metre)] mean power summed beyond the radius

    def far_noise_rise_db(self, tx_on_air_per_m: float, noise_floor_dbm: float) -> float:
        """Rise of the noise floor by the mean power of every frame beyond the radius along a straight road (both
        sides) with ``tx_on_air_per_m`` transmitters on air per metre (stations per metre times their duty cycle)."""
        far = self.far_mw_per_tx_density * tx_on_air_per_m
        return 10.0 * math.log10(1.0 + far / float(dbm_to_mw(noise_floor_dbm)))


def cutoff_bound(params: RadioParams) -> CutoffBound:
    """The probabilistic bound of the cut-off radius ``R`` (closed forms, see ``cutoff_radius_m``).

    A link beyond ``R`` changes its own reception decision only if its power reaches the sensitivity: probability
    ``p_decode = reception_probability(R)`` at the radius, less beyond, so no per-distance PDR beyond ``R`` changes
    by more than ``p_decode``. As interference, all frames beyond ``R`` add on average, along a road with ``rho``
    transmitters on air per metre on both sides and mean power ``P(d) = P(R) (R/d)^k`` (k = 4 beyond the
    dual-slope breakpoint, 2 in free space), ``I = 2 rho E[S] P(R) R / (k - 1)`` with ``E[S] = exp((sigma ln10 /
    10)^2 / 2)`` the mean of the log-normal shadowing (Nakagami fading has mean 1); ``CutoffBound.far_noise_rise_db``
    turns it into a noise rise. Sources: Nakagami tail and shadowing as in ``reception_probability``; the log-normal
    mean, e.g. Goldsmith, Wireless Communications (2005), eq. 2.46."""
    radius = cutoff_radius_m(params)
    mean_dbm = float(mean_rx_power_dbm(radius, params))
    sigma = float(shadowing_sigma_db(radius, params))
    shadow_mean = math.exp((sigma * math.log(10.0) / 10.0) ** 2 / 2.0)
    exponent = 4.0 if params.path_loss == "dual_slope" and radius >= params.breakpoint_m else 2.0
    at_radius_mw = float(dbm_to_mw(mean_dbm)) * shadow_mean
    return CutoffBound(
        radius_m=radius,
        p_decode=float(reception_probability(radius, params)[0]),
        p_sense=float(reception_probability(radius, params, params.cs_threshold_dbm)[0]),
        frame_mean_dbm=float(mw_to_dbm(at_radius_mw)),
        far_mw_per_tx_density=2.0 * at_radius_mw * radius / (exponent - 1.0),
    )


def cutoff_power_for(params: RadioParams, p_max: float) -> float:
    """The highest ``cutoff_power_dbm`` (to 0.01 dB) whose radius keeps both ``p_decode`` and ``p_sense`` of
    ``cutoff_bound`` at most ``p_max`` (bisection: both fall monotonically as the cut-off power is lowered)."""
    def worst(power_dbm: float) -> float:
        b = cutoff_bound(params.model_copy(update={"cutoff_power_dbm": power_dbm}))
        return max(b.p_decode, b.p_sense)

    lo, hi = -150.0, min(params.sensitivity_dbm, params.cs_threshold_dbm)  # lo meets the bound, hi does not
    if worst(lo) > p_max:
        raise ValueError(f"no cut-off power down to -150 dBm keeps the probability at {p_max:g}")
    while hi - lo > 0.01:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if worst(mid) <= p_max else (lo, mid)
    return round(lo, 2)


@dataclass(frozen=True)
class PropagationTables:
    """Everything the compiled kernel needs to draw a link's received power (linear units, mW).

    Links are classed by distance: class ``c`` covers ``d^2 < class_limit_m2[c]`` (first match). Each class has a
    mean-power law ``tx_mw / (coef * d^2)`` or ``tx_mw / (coef * d^4)`` and one row of ``gain_q``: the quantile
    function of the product of its shadowing and fading factors (linear, tabulated at ``QUANTILE_POINTS``
    midpoints), so one uniform number per link draws both.
    """

    tx_mw: float
    class_limit_m2: np.ndarray  # float64 [C]
    class_coef: np.ndarray  # float64 [C]
    class_exp4: np.ndarray  # int64 [C]: 1 if the mean power falls with d^4 (else d^2)
    gain_q: np.ndarray  # float64 [C, K]
    class_sigma_db: np.ndarray  # float64 [C]: shadowing std dev (for reference and tests)
    class_m: np.ndarray  # float64 [C]: Nakagami m (NaN: no fading)
    min_d2: float
    radius_m: float


def _quantile_grid() -> np.ndarray:
    return (np.arange(QUANTILE_POINTS) + 0.5) / QUANTILE_POINTS


def gain_quantiles(sigma_db: float, m: float | None, q: np.ndarray) -> np.ndarray:
    """Quantiles ``q`` of ``S * F`` with ``10 log10 S ~ N(0, sigma_db)`` and ``F ~ Gamma(m, 1/m)`` (``m`` None:
    ``F = 1``), linear. The product's CDF is integrated over the shadowing by Gauss-Hermite quadrature and
    inverted on a fine grid in dB."""
    if m is None:
        return 10.0 ** (sigma_db * stats.norm.ppf(q) / 10.0)
    if sigma_db == 0.0:
        return stats.gamma.ppf(q, a=m, scale=1.0 / m)
    lo_db = 10.0 * math.log10(stats.gamma.ppf(1e-9, a=m, scale=1.0 / m)) - 7.0 * sigma_db
    hi_db = 10.0 * math.log10(stats.gamma.ppf(1.0 - 1e-9, a=m, scale=1.0 / m)) + 7.0 * sigma_db
    y_db = np.linspace(lo_db, hi_db, 20001)
    z, w = np.polynomial.hermite_e.hermegauss(96)
    w = w / w.sum()
    cdf = special.gammainc(m, m * 10.0 ** ((y_db[:, None] - sigma_db * z[None, :]) / 10.0)) @ w
    cdf = np.maximum.accumulate(cdf)  # exact monotonicity for the inversion
    return 10.0 ** (np.interp(q, cdf, y_db) / 10.0)


def build_tables(params: RadioParams) -> PropagationTables:
    """Distance classes and their gain quantile tables for ``params``."""
    q = _quantile_grid()
    bp = params.breakpoint_m
    dual = params.path_loss == "dual_slope"
    near_coef = 10.0 ** (FREE_SPACE_1M_DB / 10.0)
    far_coef = 10.0 ** ((FREE_SPACE_1M_DB + 20.0 * math.log10(bp)) / 10.0) / bp**4
    if params.fading == "none":
        m_table: tuple[tuple[float, float | None], ...] = ((math.inf, None),)
    else:
        m_table = NAKAGAMI_M_TABLE if params.nakagami_m == "distance_table" else NAKAGAMI_M_SIMPLE
    # Classes: the union of the m-table limits ("d <= limit") and the breakpoint ("d < breakpoint").
    limits = sorted({lim for lim, _ in m_table} | ({bp} if dual else set()))
    lim2, coef, exp4, gains, sigmas, ms = [], [], [], [], [], []
    lower = 0.0
    for lim in limits:
        mid = lower + 1e-9 if math.isinf(lim) else 0.5 * (lower + lim)
        far = dual and mid >= bp
        m = next(m for ml, m in m_table if mid <= ml)
        sigma = (params.shadowing_far_db if far else params.shadowing_near_db) if dual else 0.0
        lim2.append(lim * lim if dual and lim == bp else np.nextafter(lim * lim, np.inf))
        coef.append(far_coef if far else near_coef)
        exp4.append(1 if far else 0)
        gains.append(cached_gains(gain_quantiles, sigma, m, q))  # bit for bit the computed table
        sigmas.append(sigma)
        ms.append(np.nan if m is None else m)
        lower = lim
    return PropagationTables(
        tx_mw=float(dbm_to_mw(params.tx_power_dbm)),
        class_limit_m2=np.asarray(lim2, np.float64),
        class_coef=np.asarray(coef, np.float64),
        class_exp4=np.asarray(exp4, np.int64),
        gain_q=np.stack(gains),
        class_sigma_db=np.asarray(sigmas),
        class_m=np.asarray(ms),
        min_d2=params.min_distance_m**2,
        radius_m=cutoff_radius_m(params),
    )
