"""The receptions of one subframe: every transmission at every station within the cut-off radius, with its outcome
decided in the order of the analytical model's error types (Gonzalez-Martin et al. 2019, eq. (6)):

1. ``half_duplex``: the receiver transmits in the same subframe;
2. ``sensing``: the received power is below the sensing threshold (the SCI and the data are not decoded);
3. ``propagation``: the transport block is lost at its SNR (noise only): keyed uniform u < BLER(SNR);
4. ``collision``: it is lost at its SINR but would not have been at its SNR: BLER(SNR) <= u < BLER(SINR), the
   interference being the sum over every other transmission of the subframe of its power times the share of its
   subchannels that overlap the wanted one's (power spread evenly over a transmission's resource blocks).

The SINR compares the whole received power with the noise over the transport block's PSSCH resource blocks, as the
validated model does (the SCI's two resource blocks carry no share of the wanted power there either).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.rng import KeyedDraws

from .bler import bler
from .propagation import Propagation

LOSS_CAUSES = ("none", "half_duplex", "sensing", "propagation", "collision")
"""Codes of a link's loss cause (``none``: received)."""
RECEIVED, HALF_DUPLEX, SENSING, PROPAGATION, COLLISION = range(5)


@dataclass(frozen=True)
class Transmissions:
    """The transmissions of one subframe (one row each)."""

    sf: int
    sender: np.ndarray  # int64 ids
    row: np.ndarray  # int64 station rows
    x0: np.ndarray  # int64 first subchannel
    length: np.ndarray  # int64 subchannels
    noise_mw: np.ndarray  # float64 noise over the transport block's resource blocks
    shift_db: np.ndarray  # float64 SINR shift of the BLER curve for the transport block


@dataclass(frozen=True)
class Links:
    """Every (transmission, receiver) link within the radius, in transmission-major order."""

    tx: np.ndarray  # int64 index into the Transmissions
    rx: np.ndarray  # int64 receiver rows
    power_dbm: np.ndarray  # float64
    cause: np.ndarray  # int64 codes of LOSS_CAUSES
    rx_power_mw: np.ndarray  # float64 (transmissions, stations): received power, 0 beyond the radius / own


def receive(txs: Transmissions, ids: np.ndarray, x: np.ndarray, y: np.ndarray, prop: Propagation,
            sensitivity_dbm: float, bler_key: np.uint64) -> Links:
    """Outcomes of ``txs`` at the stations ``ids`` at positions ``x, y`` (see the module docstring)."""
    n_tx, n = len(txs.sender), len(ids)
    d = np.hypot(x[None, :] - x[txs.row][:, None], y[None, :] - y[txs.row][:, None])
    inside = d <= prop.radius_m
    inside[np.arange(n_tx), txs.row] = False
    t_idx, r_idx = np.nonzero(inside)
    sf = np.full(len(t_idx), txs.sf, np.int64)
    power = prop.rx_dbm(d[t_idx, r_idx], txs.sender[t_idx], ids[r_idx], sf)
    mw = np.zeros((n_tx, n))
    mw[t_idx, r_idx] = 10.0 ** (power / 10.0)
    # interference on transmission t from t': its power times the share of its subchannels overlapping t's
    lo = np.maximum(txs.x0[:, None], txs.x0[None, :])
    hi = np.minimum((txs.x0 + txs.length)[:, None], (txs.x0 + txs.length)[None, :])
    share = np.maximum(hi - lo, 0) / txs.length[None, :]
    np.fill_diagonal(share, 0.0)
    interference = (share @ mw)[t_idx, r_idx]
    noise = txs.noise_mw[t_idx]
    signal = 10.0 ** (power / 10.0)
    u = KeyedDraws(bler_key, txs.sender[t_idx], ids[r_idx], sf).random(len(t_idx))
    shift = txs.shift_db[t_idx]
    lost_snr = u < bler(10.0 * np.log10(signal / noise), shift)
    lost_sinr = u < bler(10.0 * np.log10(signal / (noise + interference)), shift)
    transmitting = np.zeros(n, bool)
    transmitting[txs.row] = True
    cause = np.full(len(t_idx), RECEIVED, np.int64)
    cause[lost_sinr] = COLLISION
    cause[lost_snr] = PROPAGATION
    cause[power < sensitivity_dbm] = SENSING
    cause[transmitting[r_idx]] = HALF_DUPLEX
    return Links(tx=t_idx, rx=r_idx, power_dbm=power, cause=cause, rx_power_mw=mw)


def busy_subchannels(txs: Transmissions, rx_power_mw: np.ndarray, n_subchannels: int, noise_sub_mw: float,
                     threshold_mw: float) -> np.ndarray:
    """Per station, how many subchannels of this subframe it senses busy: S-RSSI (each transmission's power spread
    over its subchannels, plus the noise) above ``threshold_mw``; its own transmission's subchannels count busy."""
    occ = np.zeros((len(txs.sender), n_subchannels))
    for k in range(int(txs.length.max(initial=0))):
        has = k < txs.length
        occ[np.flatnonzero(has), txs.x0[has] + k] = 1.0
    rssi = (rx_power_mw / txs.length[:, None]).T @ occ + noise_sub_mw  # (stations, subchannels)
    busy = rssi > threshold_mw
    busy[txs.row] |= occ > 0
    return busy.sum(axis=1)
