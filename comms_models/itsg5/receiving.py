"""The receiving side of the ITS-G5 channel: the links the medium resolved turned into receptions (receive
processing delay, propagation delay, logged), the received ones into deliveries (decoded content; with the
platooning message, a CAM's or a PM's columns), held until their reception time."""

from __future__ import annotations

from typing import Any

import numpy as np

from core.rng import KeyedDraws

from ..base import Deliveries, empty_deliveries
from . import access_layout as ax
from .ca_service import CAM_CONTENT
from .log import ChannelLog
from .medium import Medium
from .params import ItsG5Params
from .pm import PM_CONTENT
from .pm_service import PmService
from .radio import mw_to_dbm


class Receptions:
    """Receptions waiting for their reception time. ``rx_latency_keys``: the receive-delay purposes of CAMs and PMs
    (each draw keyed by sender, receiver and generation time)."""

    def __init__(self, cfg: ItsG5Params, log: ChannelLog, rx_latency_keys: tuple[int, int | None],
                 carries_pm: bool) -> None:
        self.cfg, self.log = cfg, log
        self.rx_latency_keys = rx_latency_keys
        self.carries_pm = carries_pm
        self.attacks: Any = None  # the run's AttackPlan: receptions then carry the claimed sender and "attack"
        self.pending: Deliveries = self._empty()

    def _empty(self) -> Deliveries:
        """No receptions waiting (with the message kind and the PM content columns when PMs are sent)."""
        table = empty_deliveries()
        if self.carries_pm:
            table["kind"] = np.empty(0, np.int64)
            for name in PM_CONTENT:
                table[name] = np.empty(0)
        if self.attacks is not None:
            table["attack"] = np.empty(0, np.int64)
            if self.carries_pm:
                table["gn_x"], table["gn_y"] = np.empty(0), np.empty(0)
        return table

    def attach(self, attacks: Any) -> None:
        """Carry the ground truth of ``attacks`` (an ``AttackPlan``) on every reception from now on."""
        self.attacks = attacks
        self.pending = self._empty()

    def forget(self, receivers: np.ndarray) -> None:
        """Drop what waits for ``receivers`` (stations that left)."""
        alive = ~np.isin(self.pending["receiver"], receivers)
        self.pending = {k: v[alive] for k, v in self.pending.items()}

    def collect(self, medium: Medium) -> None:
        """Log the links of the medium's last run and hold the deliveries among them."""
        oi, of = medium.rx_out()
        k = len(oi)
        if k == 0:
            return
        code = oi[:, ax.RX_OUTCOME]
        interest = oi[:, ax.RX_INTEREST] == 1
        received = code == ax.RECEIVED
        is_pm = oi[:, ax.RX_KIND] == ax.KIND_PM
        delay = np.zeros(k, np.int64)
        for kind_rows, key in zip((received & ~is_pm, received & is_pm), self.rx_latency_keys, strict=True):
            n_rx = int(kind_rows.sum())
            if n_rx:
                rx_draws = KeyedDraws(key, oi[kind_rows, ax.RX_SENDER], medium.ids[oi[kind_rows, ax.RX_ROW]],
                                      oi[kind_rows, ax.RX_GEN])
                delay[kind_rows] = np.round(self.cfg.latency.rx_processing.draw(rx_draws, n_rx) * 1e9)
        # propagation d / c on what arrives (positions of this step; carrier sense and interference ignore it:
        # well under a 13 us slot at these ranges)
        t_rx = oi[:, ax.RX_END] + delay + np.where(received, medium.propagation_ns(oi[:, ax.RX_SENDER],
                                                                                   oi[:, ax.RX_ROW]), 0)
        receiver = medium.ids[oi[:, ax.RX_ROW]]
        rec = slice(None) if self.cfg.trace == "all" else interest
        attack = gn = true_gen = None
        if self.attacks is not None:  # what the frames claim (a ghost's id, a delayed CAM's time), their truth
            if self.carries_pm:  # where each frame came from, as its GeoNetworking header says (for the detector)
                gn = medium.positions_of(oi[:, ax.RX_SENDER])
            oi = oi.copy()
            true_gen = oi[:, ax.RX_GEN].copy()  # before the claimed time replaces it (a delayed message's is older)
            attack, oi[:, ax.RX_SENDER], oi[:, ax.RX_GEN] = self.attacks.truth(oi[:, ax.RX_FRAME],
                                                                               oi[:, ax.RX_SENDER], oi[:, ax.RX_GEN])
        power = of[rec, ax.RXF_POWER]
        with np.errstate(divide="ignore"):
            power_dbm = np.where(power > 0.0, mw_to_dbm(power), np.nan)
        self.log.receptions(code, interest, rec, t_rx, oi[:, ax.RX_SENDER], receiver, oi[:, ax.RX_GEN], power_dbm,
                            is_pm, attack, true_gen)
        deliver = received if self.cfg.deliver == "all" else received & interest
        if deliver.any():
            self._hold(deliver, oi, of, receiver, t_rx, is_pm, attack, gn)

    def _hold(self, deliver: np.ndarray, oi: np.ndarray, of: np.ndarray, receiver: np.ndarray, t_rx: np.ndarray,
              is_pm: np.ndarray, attack: np.ndarray | None = None,
              gn: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        new: Deliveries = {
            "receiver": receiver[deliver],
            "sender": oi[deliver, ax.RX_SENDER].copy(),
            "generated_ns": oi[deliver, ax.RX_GEN].copy(),
            "received_ns": t_rx[deliver],
        }
        if self.carries_pm:  # the content columns are a CAM's or a PM's (pm.PM_CONTENT)
            pm = is_pm[deliver]
            new["kind"] = pm.astype(np.int64)
            for c, name in enumerate(CAM_CONTENT):
                new[name] = np.where(pm, np.nan, of[deliver, 1 + c])
            for c, name in enumerate(PM_CONTENT):
                new[name] = np.where(pm, of[deliver, 1 + c], np.nan)
        else:
            for c, name in enumerate(CAM_CONTENT):
                new[name] = of[deliver, 1 + c].copy()
        if attack is not None:
            new["attack"] = attack[deliver]
        if gn is not None:
            new["gn_x"], new["gn_y"] = gn[0][deliver], gn[1][deliver]
        self.pending = {name: np.concatenate([self.pending[name], new[name]]) for name in new}

    def release(self, t_ns: int, pm: PmService | None) -> Deliveries:
        """The receptions completed by ``t_ns``, in reception order (with ``pm``: merged into platooning rows)."""
        pending = self.pending
        due = pending["received_ns"] <= t_ns
        if not due.any():
            return pm.no_deliveries() if pm is not None else empty_deliveries()
        order = np.argsort(pending["received_ns"][due], kind="stable")
        out = {name: col[due][order] for name, col in pending.items()}
        if due.all():
            self.pending = self._empty()
        else:
            self.pending = {name: col[~due] for name, col in pending.items()}
        return pm.deliveries(out) if pm is not None else out
