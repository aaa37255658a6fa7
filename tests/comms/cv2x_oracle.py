"""The analytical model of LTE-V2X mode 4 of Gonzalez-Martin, Sepulcre, Molina-Masegosa and Gozalvez, "Analytical
Models of the Performance of C-V2X Mode 4 Vehicular Communications", IEEE Trans. Veh. Technol. 68(2), 2019
(arXiv:1807.06508), written from its published equations (numbers in the comments) as the oracle of the cv2x
channel's validation.

The PDR at distance d is one minus the probabilities of the four error types, each counted among the packets the
earlier ones spared (eq. 6):

    PDR(d) = 1 - dHD - dSEN (1 - dHD) - dPRO (1 - dHD)(1 - dSEN) - dCOL (1 - dHD)(1 - dSEN)(1 - dPRO)

- dHD = lambda / 1000 (eq. 7): the receiver transmits in the transmitter's subframe;
- dSEN(d) = 1/2 (1 - erf((Pt - PL(d) - Psen) / (sigma sqrt 2))) (eq. 10): below the sensing threshold;
- dPRO(d) = integral of BLER(SNR) over the SNR density of the packets above Psen (eq. 13);
- dCOL(d) = 1 - prod_i (1 - p_sim(i) p_int(i)) over the interferers i (eqs. 14, 15), with
  p_int = (p_SINR - dPRO) / (1 - dPRO) (eq. 18), p_SINR the BLER integrated over the SINR density with interferer
  i's log-normal power (eq. 17), and p_sim the probability that i uses the transmitter's resource:
  p_sim = p_s C_c(d_ti) / N_c^2 (eqs. 23, 31), p_s = 1 - (1 - 1/tau) PSR(d_ti) (eq. 24), N = S 1000 / lambda
  resources (eq. 28), N_c = 0.2 N candidates, N_e excluded resources (eqs. 29, 33) from the S_PSR vehicles sensed
  (eqs. 29.1, 32.1), common excluded / available / candidate resources C_e, C_a, C_c (eqs. 30, 27, 26) from the
  autocorrelation of PSR (eqs. 30.2, 40). Step 2 uses the sensing threshold, step 3 the threshold raised until
  N_a >= N_c; they are weighted by alpha(CBR) (eqs. 21, 22) with CBR = N_e / N (eq. 34).

The link-level curve and the propagation are the channel's own (``comms_models.cv2x.bler``, ``propagation``), which
follow the paper's (R1-160284, WINNER+ B1 with 3 dB shadowing). Unlike the paper's discretisation, the transmitter
is not counted among its own interferers. Integrals are quadratures, not the paper's 0.1 dB histograms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from comms_models.cv2x.bler import bler_reference
from comms_models.cv2x.propagation import Propagation

_HERMITE_Z, _HERMITE_W = np.polynomial.hermite_e.hermegauss(48)
_HERMITE_W = _HERMITE_W / _HERMITE_W.sum()


@dataclass(frozen=True)
class Setup:
    """The scenario of the analytical model: vehicles every 1/beta metres on a straight road."""

    beta_per_m: float  # vehicle density
    rate_hz: float  # lambda: packets per second per vehicle
    subchannels: int  # S: resources per subframe
    tx_power_dbm: float
    sensing_dbm: float  # Psen
    noise_dbm: float  # over the transport block's resource blocks
    tau: float = 10.0  # eq. 24: transmissions per reservation (mean reselection counter, 5..15)
    reach_m: float = 1000.0  # interferers within this distance of the receiver (the paper's limit)


def _psr(prop: Propagation, d: np.ndarray, threshold_dbm: float, power_dbm: float) -> np.ndarray:
    """Packet sensing ratio: probability that a packet from distance ``d`` is received above ``threshold_dbm``
    (eq. 11)."""
    sigma = prop.shadowing_sigma_db(d)
    return 0.5 * (1.0 + special.erf((power_dbm - prop.path_loss_db(d) - threshold_dbm) / (sigma * math.sqrt(2.0))))


def _excluded(n: float, s_psr: float) -> float:
    """N_e: resources excluded by the S_PSR sensed vehicles (eqs. 29, 33)."""
    half = s_psr / 2.0
    k = np.arange(1, int(half) + 1)
    return half + float(np.maximum(1.0 - k / (n - half), 0.0).sum())


def _mean_bler_given_shift(prop: Propagation, d: float, setup: Setup, shifts_db: np.ndarray) -> np.ndarray:
    """E[BLER(S - c)] over the received power S [dBm] of a packet from ``d`` that is above the sensing threshold,
    for each noise-plus-interference level c [dBm] of ``shifts_db`` (the integrand of eqs. 13 and 17)."""
    mu = setup.tx_power_dbm - float(prop.path_loss_db(np.array([d]))[0])
    sigma = float(prop.shadowing_sigma_db(np.array([d]))[0])
    s = np.arange(setup.sensing_dbm, mu + 8.0 * sigma + 30.0, 0.05)
    pdf = np.exp(-0.5 * ((s - mu) / sigma) ** 2)
    if pdf.sum() == 0.0:
        return np.zeros_like(shifts_db)
    keep = pdf > 1e-12 * pdf.max()  # the tails that cannot matter
    s, pdf = s[keep], pdf[keep] / pdf[keep].sum()
    out = np.empty(len(shifts_db))
    for a in range(0, len(shifts_db), 256):
        c = shifts_db[a:a + 256]
        out[a:a + 256] = pdf @ bler_reference(s[:, None] - c[None, :])
    return out


def analytical_pdr(prop: Propagation, setup: Setup, distances_m: np.ndarray) -> dict[str, np.ndarray]:
    """PDR and the four error probabilities at each distance (eq. 6)."""
    lam, beta = setup.rate_hz, setup.beta_per_m
    n_res = setup.subchannels * 1000.0 / lam  # eq. 28
    n_cand = 0.2 * n_res
    d_aux = np.arange(-1500.0, 1501.0)
    psr = _psr(prop, np.abs(d_aux), setup.sensing_dbm, setup.tx_power_dbm)
    r_psr = np.correlate(psr, psr, mode="full")[len(d_aux) - 1:]  # eq. 30.2, lags 0, 1, ... m
    r0 = r_psr[0]  # eq. 40
    # step 2 (eqs. 29, 29.1, 34)
    s_psr = beta * psr.sum()
    ne2 = _excluded(n_res, s_psr)
    cbr = ne2 / n_res
    # step 3: the threshold rises (0.1 dB steps) until the available resources reach the candidates (eqs. 32, 33)
    th3 = setup.sensing_dbm
    while True:
        ne3 = _excluded(n_res, 2.0 * beta * _psr(prop, np.abs(d_aux), th3, setup.tx_power_dbm).sum())
        if n_res - ne3 >= n_cand:
            break
        th3 += 0.1

    def common_candidates(ne: float) -> np.ndarray:  # C_c per metre of distance between t and i (eqs. 30, 27, 26)
        ce = (r_psr / r0) * (beta * ne * r0 / s_psr - ne * ne / n_res) + ne * ne / n_res
        return (n_res - 2.0 * ne + ce) * (n_cand / (n_res - ne)) ** 2

    cc2, cc3 = common_candidates(ne2), common_candidates(ne3)
    alpha = 0.0 if cbr < 0.2 else (2.0 * cbr - 0.4 if cbr <= 0.7 else 1.0)  # eq. 22
    noise_mw = 10.0 ** (setup.noise_dbm / 10.0)
    spacing = 1.0 / beta
    reach = round(setup.reach_m * beta) / beta
    out = {key: np.zeros(len(distances_m)) for key in ("pdr", "hd", "sen", "pro", "col")}
    for j, d in enumerate(np.asarray(distances_m, np.float64)):
        hd = lam / 1000.0  # eq. 7
        sen = float(1.0 - _psr(prop, np.array([d]), setup.sensing_dbm, setup.tx_power_dbm)[0])  # eq. 10
        # interferers every 1/beta metres around the receiver (at 0), the transmitter (at -d) excluded
        pos = np.arange(-reach, reach + spacing / 2.0, spacing)
        pos = pos[(np.abs(pos) > 1e-6) & (np.abs(pos + d) > 1e-6)]
        d_ir, d_ti = np.abs(pos), np.abs(pos + d)
        # interference-plus-noise levels: log-normal interferer power on Hermite nodes (eq. 17)
        mu_i = setup.tx_power_dbm - prop.path_loss_db(d_ir)
        sig_i = prop.shadowing_sigma_db(d_ir)
        levels = 10.0 * np.log10(noise_mw + 10.0 ** ((mu_i[:, None] + sig_i[:, None] * _HERMITE_Z[None, :]) / 10.0))
        grid = np.arange(setup.noise_dbm, max(float(levels.max()), setup.noise_dbm) + 0.05, 0.05)
        g = _mean_bler_given_shift(prop, d, setup, grid)
        pro = float(g[0])  # eq. 13: noise only
        p_sinr = np.interp(levels, grid, g) @ _HERMITE_W
        p_int = np.clip((p_sinr - pro) / (1.0 - pro), 0.0, 1.0) if pro < 1.0 else np.zeros_like(p_sinr)  # eq. 18
        lag = np.minimum(np.round(d_ti).astype(np.int64), len(r_psr) - 1)
        col = 0.0
        for cc, th, weight in ((cc2, setup.sensing_dbm, alpha), (cc3, th3, 1.0 - alpha)):
            if weight == 0.0:
                continue
            p_s = 1.0 - (1.0 - 1.0 / setup.tau) * _psr(prop, d_ti, th, setup.tx_power_dbm)  # eq. 24
            p_sim = p_s * cc[lag] / n_cand**2  # eqs. 23, 31
            col += weight * (1.0 - float(np.prod(1.0 - p_sim * p_int)))  # eqs. 14, 15, 21
        out["hd"][j] = hd  # eq. 6.1
        out["sen"][j] = sen * (1.0 - hd)  # eq. 6.2
        out["pro"][j] = pro * (1.0 - hd) * (1.0 - sen)  # eq. 6.3
        out["col"][j] = col * (1.0 - hd) * (1.0 - sen) * (1.0 - pro)  # eqs. 6.4, 6.5
        out["pdr"][j] = 1.0 - out["hd"][j] - out["sen"][j] - out["pro"][j] - out["col"][j]  # eq. 6
    out["cbr"] = np.full(len(distances_m), cbr)
    return out
