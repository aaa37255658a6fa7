"""The receiving side of the channel: the propagation delay of each reception, the receptions the access kernel
reports turned into deliveries (decoded to SI, the platooning message's fields attached), and their release at
their reception time (a mixin of ``model.ItsG5Channel``)."""

from __future__ import annotations

import numpy as np

from core.rng import KeyedDraws, id_hashes
from core.robots import rows_of

from ..base import Deliveries, empty_deliveries
from . import access as ax
from .generating import CAM_CONTENT
from .pm import (
    PM_CONTENT,
    empty_pm_deliveries,
)
from .radio import mw_to_dbm

SPEED_OF_LIGHT_MPS = 299_792_458.0


class Receptions:
    """Reception collection and delivery of ``ItsG5Channel``."""

    def _id_hashes(self) -> np.ndarray:
        """``core.rng.id_hash`` of every station (recomputed when the stations change)."""
        cache = getattr(self, "_id_hash_cache", None)
        if cache is None or cache[0] != self._roster_version or len(cache[1]) != len(self._ids):
            out = np.empty(len(self._ids), np.uint64)
            id_hashes(self._ids, out)
            self._id_hash_cache = (self._roster_version, out)
        return self._id_hash_cache[1]

    def _propagation_ns(self, sender_ids: np.ndarray, receiver_rows: np.ndarray) -> np.ndarray:
        """Free-space propagation delay d / c [ns] between sender and receiver (0 when the sender is gone)."""
        out = np.zeros(len(sender_ids), np.int64)
        pos = getattr(self, "_pos", None)
        if pos is None or len(self._ids) == 0 or len(sender_ids) == 0:
            return out
        x, y = pos
        sender_rows = rows_of(self._ids, sender_ids, missing=-1)
        alive = (sender_rows >= 0) & (receiver_rows >= 0)
        d = np.hypot(x[sender_rows[alive]] - x[receiver_rows[alive]], y[sender_rows[alive]] - y[receiver_rows[alive]])
        out[alive] = np.round(d / SPEED_OF_LIGHT_MPS * 1e9).astype(np.int64)
        return out

    def _collect_rx(self) -> None:
        k = int(self._ctr[ax.C_RX_OUT])
        if k == 0:
            return
        oi, of = self._rx_out_i[:k], self._rx_out_f[:k]
        code = oi[:, ax.RX_OUTCOME]
        interest = oi[:, ax.RX_INTEREST] == 1
        received = code == ax.RECEIVED
        is_pm = oi[:, ax.RX_KIND] == ax.KIND_PM
        delay = np.zeros(k, np.int64)
        for kind_rows, key in ((received & ~is_pm, self._rx_latency_key), (received & is_pm, self._pm_rx_latency_key)):
            n_rx = int(kind_rows.sum())
            if n_rx:
                rx_draws = KeyedDraws(key, oi[kind_rows, ax.RX_SENDER], self._ids[oi[kind_rows, ax.RX_ROW]],
                                      oi[kind_rows, ax.RX_GEN])
                delay[kind_rows] = np.round(self.cfg.latency.rx_processing.draw(rx_draws, n_rx) * 1e9)
        # propagation d / c on what arrives (positions of this step; carrier sense and interference ignore it:
        # well under a 13 us slot at these ranges)
        t_rx = oi[:, ax.RX_END] + delay + np.where(received, self._propagation_ns(oi[:, ax.RX_SENDER],
                                                                                  oi[:, ax.RX_ROW]), 0)
        receiver = self._ids[oi[:, ax.RX_ROW]]
        rec = slice(None) if self.cfg.trace == "all" else interest
        power = of[rec, ax.RXF_POWER]
        with np.errstate(divide="ignore"):
            power_dbm = np.where(power > 0.0, mw_to_dbm(power), np.nan)
        self.log.receptions(code, interest, rec, t_rx, oi[:, ax.RX_SENDER], receiver, oi[:, ax.RX_GEN], power_dbm,
                            is_pm)
        deliver = received if self.cfg.deliver == "all" else received & interest
        if deliver.any():
            new: Deliveries = {
                "receiver": receiver[deliver],
                "sender": oi[deliver, ax.RX_SENDER].copy(),
                "generated_ns": oi[deliver, ax.RX_GEN].copy(),
                "received_ns": t_rx[deliver],
            }
            if self.carries_platooning_message:  # the content columns are a CAM's or a PM's (pm.PM_CONTENT)
                pm = is_pm[deliver]
                new["kind"] = pm.astype(np.int64)
                for c, name in enumerate(CAM_CONTENT):
                    new[name] = np.where(pm, np.nan, of[deliver, 1 + c])
                for c, name in enumerate(PM_CONTENT):
                    new[name] = np.where(pm, of[deliver, 1 + c], np.nan)
            else:
                for c, name in enumerate(CAM_CONTENT):
                    new[name] = of[deliver, 1 + c].copy()
            self._pending_rx = {name: np.concatenate([self._pending_rx[name], new[name]]) for name in new}

    def _empty_pending(self) -> Deliveries:
        """No receptions waiting (with the message kind and the PM content columns when PMs are sent)."""
        table = empty_deliveries()
        if self.carries_platooning_message:
            table["kind"] = np.empty(0, np.int64)
            for name in PM_CONTENT:
                table[name] = np.empty(0)
        return table

    def _release(self, t_ns: int) -> Deliveries:
        pending = self._pending_rx
        due = pending["received_ns"] <= t_ns
        if not due.any():
            return empty_pm_deliveries(self._pm_columns) if self.pm_rx is not None else empty_deliveries()
        order = np.argsort(pending["received_ns"][due], kind="stable")
        out = {name: col[due][order] for name, col in pending.items()}
        if due.all():
            self._pending_rx = self._empty_pending()
        else:
            self._pending_rx = {name: col[~due] for name, col in pending.items()}
        if self.pm_rx is not None:
            return self.pm_rx.merge(out, self._pm_columns)
        return out
