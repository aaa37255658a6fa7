"""The receptions of one subframe: every transmission at every station within the cut-off radius (found on a grid of
the step's positions, ``Neighbourhood``), with its outcome
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

from ..itsg5.grid import build_grid
from . import kernels as kn
from .bler import R1_160284_BLER, R1_160284_SINR_DB
from .history import Heard
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


class Neighbourhood:
    """The stations' positions of one channel step indexed by a uniform grid of cells at least the cut-off radius
    wide (``itsg5.grid.build_grid``: the 3x3 cells around a sender hold every station within the radius), and the
    reception kernel's scratch rows and link buffers (kept from step to step)."""

    def __init__(self, radius_m: float) -> None:
        self.radius_m = radius_m
        self.x = self.y = np.empty(0)
        self.grid = np.zeros(5)
        self.start = self.items = self.loc = self.tx_of = self.cand = np.empty(0, np.int64)
        self.out_t, self.out_r = np.empty(4096, np.int64), np.empty(4096, np.int64)
        self.out_p, self.out_cause = np.empty(4096), np.empty(4096, np.int64)

    def update(self, x: np.ndarray, y: np.ndarray) -> None:
        """The positions of a new step."""
        self.x, self.y = x, y
        x0, y0, cell, ncx, ncy, self.start, self.items = build_grid(x, y, self.radius_m)
        self.grid = np.array([x0, y0, cell, ncx, ncy], np.float64)
        n = len(x)
        if len(self.loc) != n:
            self.loc = np.full(n, -1, np.int64)
            self.tx_of = np.zeros(n, np.int64)
            self.cand = np.empty(n, np.int64)

    def grow(self) -> None:
        """Twice the room for links."""
        size = 2 * len(self.out_t)
        self.out_t, self.out_r = np.empty(size, np.int64), np.empty(size, np.int64)
        self.out_p, self.out_cause = np.empty(size), np.empty(size, np.int64)


def receive(txs: Transmissions, slot: np.ndarray, ids: np.ndarray, near: Neighbourhood, prop: Propagation,
            sensitivity_dbm: float, bler_key: np.uint64, n_subchannels: int, noise_sub_mw: float, cbr_mw: float,
            busy: np.ndarray, heard: Heard) -> Links:
    """Outcomes of ``txs`` (senders' history slots ``slot``) at the stations ``ids`` at the positions of ``near``
    (see the module docstring); ``busy`` gains the subchannels each station senses busy in this subframe (S-RSSI,
    noise included, above ``cbr_mw``; its own transmission's subchannels count busy); ``heard`` gains every link and
    transmission."""
    heard.reserve(txs.sf, len(txs.sender))
    while True:
        k = kn.receive_subframe(txs.row, txs.sender, slot, txs.x0, txs.length, txs.noise_mw, txs.shift_db, txs.sf,
                                near.x, near.y, ids, prop.radius_m**2, *prop.kernel_args(), sensitivity_dbm,
                                np.uint64(bler_key), BLER_X, BLER_Y, n_subchannels, noise_sub_mw, cbr_mw, near.grid,
                                near.start, near.items, near.loc, near.tx_of, near.cand, near.out_t, near.out_r,
                                near.out_p, near.out_cause, busy, *heard.arrays, txs.sf - heard.window)
        if k >= 0:
            break
        near.grow()
    return Links(tx=near.out_t[:k].copy(), rx=near.out_r[:k].copy(), power_dbm=near.out_p[:k].copy(),
                 cause=near.out_cause[:k].copy())
