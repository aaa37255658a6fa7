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

from . import kernels as kn
from .bler import R1_160284_BLER, R1_160284_SINR_DB
from .propagation import Propagation

LOSS_CAUSES = ("none", "half_duplex", "sensing", "propagation", "collision")
"""Codes of a link's loss cause (``none``: received)."""
RECEIVED, HALF_DUPLEX, SENSING, PROPAGATION, COLLISION = (kn.RECEIVED, kn.HALF_DUPLEX, kn.SENSING, kn.PROPAGATION,
                                                          kn.COLLISION)
BLER_X = np.ascontiguousarray(R1_160284_SINR_DB)
BLER_Y = np.ascontiguousarray(R1_160284_BLER)


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
            sensitivity_dbm: float, bler_key: np.uint64, n_subchannels: int, noise_sub_mw: float, cbr_mw: float,
            busy: np.ndarray) -> Links:
    """Outcomes of ``txs`` at the stations ``ids`` at positions ``x, y`` (see the module docstring); ``busy`` gains
    the subchannels each station senses busy in this subframe (S-RSSI, noise included, above ``cbr_mw``; its own
    transmission's subchannels count busy)."""
    n_tx, n = len(txs.sender), len(ids)
    mw = np.empty((n_tx, n))
    cap = n_tx * n
    out_t, out_r = np.empty(cap, np.int64), np.empty(cap, np.int64)
    out_p, out_cause = np.empty(cap), np.empty(cap, np.int64)
    k = kn.receive_subframe(txs.row, txs.sender, txs.x0, txs.length, txs.noise_mw, txs.shift_db, txs.sf, x, y, ids,
                            prop.radius_m**2, *prop.kernel_args(), sensitivity_dbm, np.uint64(bler_key), BLER_X,
                            BLER_Y, n_subchannels, noise_sub_mw, cbr_mw, mw, out_t, out_r, out_p, out_cause, busy)
    return Links(tx=out_t[:k], rx=out_r[:k], power_dbm=out_p[:k], cause=out_cause[:k], rx_power_mw=mw)
