"""The ETSI ITS-G5 channel model: CA basic service, 802.11p access, propagation, interference and DCC.

Per channel step (``step(t_ns, estimate, interest)``):

1. The shared medium advances from the previous step to ``t_ns`` (``access.advance``): queued frames contend
   (EDCA best effort), start, are received or lost at every station within the cut-off radius, and the busy time
   of each station is accumulated into 100 ms CBR windows. Frames still on air, and receptions still in the
   receivers' processing, carry over to later steps.
2. Each closed CBR window updates DCC (``dcc.Dcc``), which sets ``T_GenCam_DCC`` (etsi mode) or acts as a
   gatekeeper dropping CAMs closer than ``T_off`` to the previous one (fixed_rate mode).
3. The CA basic service checks its rules (``generation.CamGeneration``); a generated CAM carries what the
   vehicle believes (``estimate``), converted to WGS84 and quantised exactly as the codec would
   (``quantise.quantise_si``), and enters the MAC queue after the transmit processing delay.
4. With ``platooning_message`` set, each station also sends a platooning message (PM, ``platooning.asn``) every
   ``1 / rate_hz`` through the same queue, medium and DCC (``pm``); receptions of PMs fill the deliveries'
   ``u_des`` and platooning columns (``pm.PmReceptions``).
5. Receptions whose receiver-side processing completes by ``t_ns`` are returned.

A station is a robot (station id = robot id). Every random draw is keyed by the event it belongs to
(``orchestrator.core.rng.keyed_u01`` / ``KeyedDraws`` with ``purpose_key(seed, "v2x", purpose)``): fading and shadowing
by (sender, receiver, generation time), backoff, transmit delay and the codec sample by (sender, generation time),
receive delay by (sender, receiver, generation time); each station's start offset by its robot id. The same seed
gives bit-identical results, and a station that joins never changes the draws of the others' links. A PM's draws
use the same events under their own purposes ("pm_radio", "pm_mac", ...), so a CAM and a PM generated at the same
instant are independent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from orchestrator.core.rng import KeyedDraws, id_hashes, purpose_key, stream
from orchestrator.core.robots import RobotSpec, rows_of

from ..base import CommsModel, Deliveries, Interest, empty_deliveries
from . import access as ax
from .dcc import Dcc
from .generation import CamGeneration
from .geo import LocalProjection
from .log import ChannelLog
from .params import ItsG5Params
from .pcap import frame_length_80211
from .pm import (
    PM_CONTENT,
    PmReceptions,
    PmSchedule,
    delivered_columns,
    empty_pm_deliveries,
    interest_leaders,
    platoon_leaders,
    pm_content,
)
from .quantise import quantise_si, to_etsi
from .radio import airtime_ns, build_tables, dbm_to_mw, mw_to_dbm
from .wire import CamWire

_CONTENT = ("x", "y", "yaw", "v", "a", "yaw_rate")
_CURVATURE_MIN_SPEED_MPS = 0.1  # below this, yaw_rate / v is meaningless: curvature sent as unavailable


def _grow(arr: np.ndarray, rows: int, fill: float | int | None = None) -> np.ndarray:
    """A copy of ``arr`` with at least ``rows`` rows (doubling), new rows set to ``fill`` when given."""
    new_rows = max(rows, 2 * arr.shape[0], 16)
    out = np.empty((new_rows, *arr.shape[1:]), arr.dtype)
    out[: arr.shape[0]] = arr
    if fill is not None:
        out[arr.shape[0]:] = fill
    return out


SPEED_OF_LIGHT_MPS = 299_792_458.0


class ItsG5Channel(CommsModel):
    """ETSI ITS-G5 CAM exchange over a shared 802.11p channel (see the module docstring)."""

    Params: ClassVar[type[ItsG5Params]] = ItsG5Params
    logs_every_transmission: ClassVar[bool] = True  # its log has a "tx" row for every CAM generated

    def __init__(self, params: Mapping[str, Any], seed: int, out_dir: Any = None) -> None:
        super().__init__(params, seed, out_dir)
        cfg = ItsG5Params.model_validate(dict(params))
        self.cfg = cfg
        self.generation = CamGeneration(cfg.generation)
        self.dcc = Dcc(cfg.dcc)
        self.tables = build_tables(cfg.radio)
        self.projection = LocalProjection(cfg.origin_lat_deg, cfg.origin_lon_deg)
        # every draw is keyed by its event (sender, receiver, generation time): see orchestrator.core.rng.KeyedDraws
        self._radio_key = purpose_key(seed, "v2x", "radio")
        self._mac_key = purpose_key(seed, "v2x", "mac")
        self._tx_latency_key = purpose_key(seed, "v2x", "tx_latency")
        self._rx_latency_key = purpose_key(seed, "v2x", "rx_latency")
        self.wire = CamWire(cfg, purpose_key(seed, "v2x", "codec"), out_dir, purpose_key(seed, "v2x", "pm_codec"))
        self.cam_bytes = self.wire.cam_bytes
        self.frame_bytes = {lf: frame_length_80211(n, cfg.security_bytes) for lf, n in self.cam_bytes.items()}
        self.airtime_ns = {lf: airtime_ns(n) for lf, n in self.frame_bytes.items()}

        r, m = cfg.radio, cfg.mac
        self._radius2 = self.tables.radius_m**2
        self._sens_mw = float(dbm_to_mw(r.sensitivity_dbm))
        self._cs_mw = float(dbm_to_mw(r.cs_threshold_dbm))
        self._noise_mw = float(dbm_to_mw(r.noise_floor_dbm))
        self._capture = float(10.0 ** (r.capture_threshold_db / 10.0))
        self._aifs_ns = round(m.aifs_s * 1e9)
        self._slot_ns = round(m.slot_s * 1e9)
        self._cca_ns = round(m.cca_time_s * 1e9)
        self._window_ns = round(cfg.dcc.cbr_window_s * 1e9)
        self._emit_all = cfg.trace == "all" or cfg.deliver == "all"

        # Stations (rows in spawn order) and the medium.
        self._ids = np.empty(0, np.int64)
        self._si = np.empty((0, ax.N_SI64), np.int64)
        self._sf = np.empty((0, ax.N_SF64), np.float64)
        self._scratch_code = np.empty(0, np.int64)
        self._scratch_row = np.empty(0, np.int64)
        self._scratch_power = np.empty(0, np.float64)
        self._last_admitted = np.empty(0, np.int64)
        self._ti = np.empty((64, ax.N_TI64), np.int64)
        self._tf = np.empty((64, ax.N_CONTENT), np.float64)
        self._li = np.empty((4096, ax.N_LI64), np.int64)
        self._lf = np.empty((4096, ax.N_LF64), np.float64)
        self._ctr = np.zeros(ax.N_C, np.int64)
        self._ctr[ax.C_WIN_END] = self._window_ns
        self._tx_out = np.empty((256, ax.N_TXO), np.int64)
        self._rx_out_i = np.empty((1024, ax.N_RXO_I), np.int64)
        self._rx_out_f = np.empty((1024, ax.N_RXO_F), np.float64)
        self._win_out = np.empty((2, 0), np.float64)
        self._win_t = np.empty(2, np.int64)
        self._next_frame = 0
        self._interest_key: tuple[Any, int] | None = None
        self._int_ptr = np.zeros(1, np.int64)
        self._int_rx = np.empty(0, np.int64)
        self._roster_version = 0

        self.log = ChannelLog()
        # the platooning message (None: CAMs only, and nothing below is used)
        pm = cfg.platooning_message
        self.carries_platooning_message = pm is not None
        self._pm_radio_key = purpose_key(seed, "v2x", "pm_radio")
        self._pm_mac_key = purpose_key(seed, "v2x", "pm_mac")
        self._pm_tx_latency_key = purpose_key(seed, "v2x", "pm_tx_latency")
        self._pm_rx_latency_key = purpose_key(seed, "v2x", "pm_rx_latency")
        self.pm_frame_bytes = {peer: frame_length_80211(n, cfg.security_bytes)
                               for peer, n in self.wire.pm_bytes.items()}
        self.pm_airtime_ns = {peer: airtime_ns(n) for peer, n in self.pm_frame_bytes.items()}
        self.pm_schedule = PmSchedule(pm.rate_hz) if pm is not None else None
        self.pm_rx = PmReceptions(pm.max_age_s) if pm is not None else None
        self._last_pm_admitted = np.empty(0, np.int64)
        self._pm_columns: tuple[str, ...] = ()  # the platooning columns the estimate has (and deliveries carry)
        self._leader_of = np.empty(0, np.int64)  # per station: its leader's id by the interest (pm.interest_leaders)
        if pm is not None:
            self.log.enable_pm()
        self._pending_rx: Deliveries = self._empty_pending()

    # -- stations ------------------------------------------------------------------------------------------------
    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        """Append a station per robot; each starts its CA service U[0, start_jitter_s) after its spawn time."""
        if not robots:
            return
        jitter_s = self.cfg.generation.start_jitter_s
        spawn_ns = np.asarray([spec.spawn_ns for spec in robots], np.int64)
        offsets = np.asarray(
            [round(stream(self.seed, "v2x", spec.id).uniform(0.0, jitter_s) * 1e9) if jitter_s > 0 else 0
             for spec in robots], np.int64)
        n = len(robots)
        rows = np.zeros((n, ax.N_SI64), np.int64)
        rows[:, ax.S_START] = ax.INF_NS
        rows[:, ax.S_IDLE_SINCE] = spawn_ns
        rows[:, ax.S_MEAS_SINCE] = spawn_ns
        rows[:, ax.S_ID] = [spec.id for spec in robots]
        self._ids = np.concatenate([self._ids, rows[:, ax.S_ID]])
        self._si = np.concatenate([self._si, rows])
        self._sf = np.concatenate([self._sf, np.zeros((n, ax.N_SF64))])
        self._scratch_code = np.concatenate([self._scratch_code, np.full(n, -1, np.int64)])
        self._scratch_row = np.concatenate([self._scratch_row, np.full(n, -1, np.int64)])
        self._scratch_power = np.concatenate([self._scratch_power, np.zeros(n)])
        self._last_admitted = np.concatenate([self._last_admitted, np.full(n, -1, np.int64)])
        self._last_pm_admitted = np.concatenate([self._last_pm_admitted, np.full(n, -1, np.int64)])
        self._win_out = np.empty((self._win_out.shape[0], len(self._ids)), np.float64)
        self.generation.spawn(spawn_ns + offsets)
        if self.pm_schedule is not None:
            self.pm_schedule.spawn(spawn_ns + offsets)  # the PM service starts with the CA service
        self.dcc.spawn(n)
        self._roster_version += 1

    def despawn(self, robot_ids: Sequence[int]) -> None:
        """Remove stations; their frames on air finish, their queued frames and pending receptions vanish."""
        gone = np.isin(self._ids, np.asarray(list(robot_ids), np.int64))
        if not gone.any():
            return
        keep = ~gone
        new_row = np.where(keep, np.cumsum(keep) - 1, -1)
        na, nl = int(self._ctr[ax.C_ACTIVE]), int(self._ctr[ax.C_LINKS])
        rows = self._ti[:na, ax.T_ROW]
        self._ti[:na, ax.T_ROW] = np.where(rows >= 0, new_row[np.maximum(rows, 0)], -1)
        rx = self._li[:nl, ax.L_RX]
        self._li[:nl, ax.L_RX] = np.where(rx >= 0, new_row[np.maximum(rx, 0)], -1)
        self.wire.discard(self._si[gone & (self._si[:, ax.S_PENDING] == 1), ax.S_FRAME])
        self.wire.discard(self._si[gone & (self._si[:, ax.S_NEXT] == 1), ax.S_N_FRAME])
        removed_ids = self._ids[gone]
        for name in ("_ids", "_si", "_sf", "_scratch_code", "_scratch_row", "_scratch_power", "_last_admitted",
                     "_last_pm_admitted"):
            setattr(self, name, getattr(self, name)[keep])
        if self.pm_schedule is not None and self.pm_rx is not None:
            self.pm_schedule.despawn(keep)
            self.pm_rx.forget(removed_ids)
        self._win_out = np.empty((self._win_out.shape[0], len(self._ids)), np.float64)
        self.generation.despawn(keep)
        self.dcc.despawn(keep)
        alive = ~np.isin(self._pending_rx["receiver"], removed_ids)
        self._pending_rx = {k: v[alive] for k, v in self._pending_rx.items()}
        self._roster_version += 1

    # -- the step ---------------------------------------------------------------------------------------------------
    def step(self, t_ns: int, estimate: Mapping[str, np.ndarray], interest: Interest) -> Deliveries:
        """Advance the channel to ``t_ns``; return the receptions completed in (previous step, t_ns]."""
        ids = np.asarray(estimate["id"], np.int64)
        if len(ids) != len(self._ids) or not np.array_equal(ids, self._ids):
            raise ValueError(
                f"itsg5: estimate rows (ids {ids[:8].tolist()}...) do not match the spawned stations "
                f"({self._ids[:8].tolist()}...); spawn/despawn every robot before stepping"
            )
        t_ns = int(t_ns)
        x = np.ascontiguousarray(estimate["x"], np.float64)
        y = np.ascontiguousarray(estimate["y"], np.float64)
        self._update_interest(interest)
        self._pos = (x, y)  # for the propagation delay of the receptions collected in this step
        self._advance_medium(t_ns, x, y)
        self._generate(t_ns, estimate, x, y)
        return self._release(t_ns)

    def _update_interest(self, interest: Interest) -> None:
        key = (interest, self._roster_version)
        if self._interest_key is not None and self._interest_key[0] is interest and \
                self._interest_key[1] == self._roster_version:
            return
        self._interest_key = key
        n = len(self._ids)
        s_rows = rows_of(self._ids, interest.senders, missing=-1)
        r_rows = rows_of(self._ids, interest.receivers, missing=-1)
        ok = (s_rows >= 0) & (r_rows >= 0)
        s_rows, r_rows = s_rows[ok], r_rows[ok]
        by_sender = np.argsort(s_rows, kind="stable")
        self._int_rx = r_rows[by_sender].astype(np.int64)
        self._int_ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(s_rows, minlength=n), out=self._int_ptr[1:])
        if self.carries_platooning_message:
            self._leader_of = interest_leaders(self._ids, s_rows, r_rows)

    def _advance_medium(self, t_ns: int, x: np.ndarray, y: np.ndarray) -> None:
        t = self.tables
        x0, y0, cell, ncx, ncy, cell_start, cell_items = ax.build_grid(x, y, t.radius_m)
        n = len(self._ids)
        ctr = self._ctr
        ctr[ax.C_TX_OUT] = ctr[ax.C_RX_OUT] = ctr[ax.C_WIN_OUT] = 0
        while True:
            status = ax.advance(
                np.int64(t_ns), self._si, self._sf, x, y, self._ti, self._tf, self._li, self._lf, ctr,
                self._radio_key, self._pm_radio_key, self._ids, self._id_hashes(),
                x0, y0, cell, np.int64(ncx), np.int64(ncy), cell_start, cell_items, self._int_ptr, self._int_rx,
                self._tx_out, self._rx_out_i, self._rx_out_f, self._win_out, self._win_t,
                self._scratch_code, self._scratch_row, self._scratch_power,
                t.class_limit_m2, t.class_coef, t.class_exp4, t.gain_q,
                t.tx_mw, t.min_d2, self._radius2, self._sens_mw, self._cs_mw, self._noise_mw, self._capture,
                np.int64(self._aifs_ns), np.int64(self._slot_ns), np.int64(self._cca_ns),
                np.int64(self._window_ns), self._emit_all,
            )
            if status == ax.DONE:
                break
            if status == ax.NEED_LINKS:
                self._li = _grow(self._li, int(ctr[ax.C_LINKS]) + n)
                self._lf = _grow(self._lf, int(ctr[ax.C_LINKS]) + n)
            elif status == ax.NEED_ACTIVE:
                self._ti = _grow(self._ti, int(ctr[ax.C_ACTIVE]) + 1)
                self._tf = _grow(self._tf, int(ctr[ax.C_ACTIVE]) + 1)
            elif status == ax.NEED_TX_OUT:
                self._tx_out = _grow(self._tx_out, int(ctr[ax.C_TX_OUT]) + 1)
            elif status == ax.NEED_RX_OUT:
                need = int(ctr[ax.C_RX_OUT]) + n + len(self._int_rx) + 1
                self._rx_out_i = _grow(self._rx_out_i, need)
                self._rx_out_f = _grow(self._rx_out_f, need)
            elif status == ax.NEED_WIN_OUT:
                self._collect_windows()
                ctr[ax.C_WIN_OUT] = 0
        self._collect_windows()
        self._collect_tx()
        self._collect_rx()

    def _collect_windows(self) -> None:
        for w in range(int(self._ctr[ax.C_WIN_OUT])):
            cbr = self._win_out[w]
            self.dcc.update(cbr)
            self.log.window(int(self._win_t[w]), self._ids, cbr, self.dcc.t_off_ns(self.airtime_ns[False]))

    def _collect_tx(self) -> None:
        k = int(self._ctr[ax.C_TX_OUT])
        if k == 0:
            return
        out = self._tx_out[:k]
        self.log.sent(out[:, ax.TX_START], out[:, ax.TX_ID], out[:, ax.TX_GEN], out[:, ax.TX_KIND] == ax.KIND_PM)
        self.wire.on_air(out[:, ax.TX_FRAME], out[:, ax.TX_START])

    def _id_hashes(self) -> np.ndarray:
        """``orchestrator.core.rng.id_hash`` of every station (recomputed when the stations change)."""
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
                for c, name in enumerate(_CONTENT):
                    new[name] = np.where(pm, np.nan, of[deliver, 1 + c])
                for c, name in enumerate(PM_CONTENT):
                    new[name] = np.where(pm, of[deliver, 1 + c], np.nan)
            else:
                for c, name in enumerate(_CONTENT):
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

    # -- generation ------------------------------------------------------------------------------------------------
    def _generate(self, t_ns: int, estimate: Mapping[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> None:
        if len(self._ids) == 0:
            return
        yaw = np.asarray(estimate["yaw"], np.float64)
        v = np.asarray(estimate["v"], np.float64)
        self._generate_cams(t_ns, estimate, x, y, yaw, v)
        if self.pm_schedule is not None:
            self._generate_pms(t_ns, estimate, x, y, yaw, v)

    def _generate_cams(self, t_ns: int, estimate: Mapping[str, np.ndarray], x: np.ndarray, y: np.ndarray,
                       yaw: np.ndarray, v: np.ndarray) -> None:
        t_off = self.dcc.t_off_ns(self.airtime_ns[False])
        send, with_lf = self.generation.check(t_ns, x, y, yaw, v, t_off)
        if not send.any():
            return
        self.log.triggers(t_ns, self._ids[send], self.generation.last_condition[send])
        if self.cfg.generation.mode == "fixed_rate" and self.cfg.dcc.mode != "off":
            # DCC gatekeeper (TS 102 687): the application ignores DCC, so frames too close are dropped.
            last = self._last_admitted
            blocked = send & (last >= 0) & (t_ns - last < t_off)
            if blocked.any():
                self.log.dropped(t_ns, self._ids[blocked], np.full(int(blocked.sum()), t_ns, np.int64))
                send &= ~blocked
                if not send.any():
                    return
        rows = np.flatnonzero(send)
        self._last_admitted[rows] = t_ns
        self._enqueue(t_ns, rows, with_lf[rows], estimate, x, y, yaw, v)

    def _generate_pms(self, t_ns: int, estimate: Mapping[str, np.ndarray], x: np.ndarray, y: np.ndarray,
                      yaw: np.ndarray, v: np.ndarray) -> None:
        """The platooning messages due at ``t_ns``: same DCC gatekeeper as fixed-rate CAMs, on their own flow (a PM
        closer than T_off to the station's previous PM is dropped), same queue and medium."""
        assert self.pm_schedule is not None and self.pm_rx is not None
        self._pm_columns = delivered_columns(estimate)
        send = self.pm_schedule.due(t_ns)
        if not send.any():
            return
        if self.cfg.dcc.mode != "off":
            t_off = self.dcc.t_off_ns(self.pm_airtime_ns[False])
            last = self._last_pm_admitted
            blocked = send & (last >= 0) & (t_ns - last < t_off)
            if blocked.any():
                self.log.dropped(t_ns, self._ids[blocked], np.full(int(blocked.sum()), t_ns, np.int64), pm=True)
                send &= ~blocked
                if not send.any():
                    return
        rows = np.flatnonzero(send)
        self._last_pm_admitted[rows] = t_ns
        k = len(rows)
        senders = self._ids[rows]
        # the leader's desired acceleration: a leader's own, else the newest one received from the leader
        desired = estimate.get("u_des")
        own = np.asarray(desired, np.float64)[rows] if desired is not None else np.full(k, np.nan)
        leader = platoon_leaders(estimate, self._ids, rows, self._leader_of[rows])
        relayed = self.pm_rx.newest_u_des(senders, np.maximum(leader, 0), t_ns)
        u_leader = np.where(leader == -1, own, np.where(leader >= 0, relayed, np.nan))
        si_vals, content = pm_content(estimate, rows, u_leader)
        with_peer = np.isfinite(content[:, PM_CONTENT.index("maneuver_peer")])
        frames = np.arange(self._next_frame, self._next_frame + k, dtype=np.int64)
        self._next_frame += k
        gen = np.full(k, t_ns, np.int64)
        ready = t_ns + np.round(self.cfg.latency.tx_processing.draw(
            KeyedDraws(self._pm_tx_latency_key, senders, None, gen), k) * 1e9).astype(np.int64)
        backoff = KeyedDraws(self._pm_mac_key, senders, None, gen).integers(0, self.cfg.mac.cw + 1, size=k)
        air = np.where(with_peer, self.pm_airtime_ns[True], self.pm_airtime_ns[False])
        self._queue(t_ns, rows, ax.KIND_PM, frames, ready, backoff, air, np.zeros(k, bool), content)
        sizes = np.where(with_peer, self.wire.pm_bytes.get(True, 0), self.wire.pm_bytes.get(False, 0))

        def position(picked: np.ndarray) -> dict[str, np.ndarray]:
            # the GeoNetworking header's position vector, only for the PMs the wire encodes
            lat, lon = self.projection.to_geodetic(x[rows[picked]], y[rows[picked]])
            return to_etsi({"lat_deg": lat, "lon_deg": lon, "yaw": yaw[rows[picked]], "v": v[rows[picked]]})

        self.wire.encode_pm(t_ns, senders, frames, si_vals, position, sizes)

    def _content(self, rows: np.ndarray, estimate: Mapping[str, np.ndarray], x: np.ndarray, y: np.ndarray,
                 yaw: np.ndarray, v: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """SI values of the CAMs of ``rows`` and the quantised local-frame values receivers decode."""
        lat, lon = self.projection.to_geodetic(x[rows], y[rows])
        vv = v[rows]
        yaw_rate = np.asarray(estimate["yaw_rate"], np.float64)[rows]
        moving = np.abs(vv) >= _CURVATURE_MIN_SPEED_MPS
        curvature = np.where(moving, yaw_rate / np.where(moving, vv, 1.0), np.nan)
        si = {"lat_deg": lat, "lon_deg": lon, "yaw": yaw[rows], "v": vv,
              "a": np.asarray(estimate["a"], np.float64)[rows], "yaw_rate": yaw_rate, "curvature": curvature}
        q = quantise_si(si)
        qx, qy = self.projection.to_local(q["lat_deg"], q["lon_deg"])
        return si, {"x": qx, "y": qy, "yaw": q["yaw"], "v": q["v"], "a": q["a"], "yaw_rate": q["yaw_rate"]}

    def _enqueue(self, t_ns: int, rows: np.ndarray, with_lf: np.ndarray, estimate: Mapping[str, np.ndarray],
                 x: np.ndarray, y: np.ndarray, yaw: np.ndarray, v: np.ndarray) -> None:
        k = len(rows)
        si_vals, content = self._content(rows, estimate, x, y, yaw, v)
        frames = np.arange(self._next_frame, self._next_frame + k, dtype=np.int64)
        self._next_frame += k
        senders = self._ids[rows]
        gen = np.full(k, t_ns, np.int64)
        tx_draws = KeyedDraws(self._tx_latency_key, senders, None, gen)
        ready = t_ns + np.round(self.cfg.latency.tx_processing.draw(tx_draws, k) * 1e9).astype(np.int64)
        backoff = KeyedDraws(self._mac_key, senders, None, gen).integers(0, self.cfg.mac.cw + 1, size=k)
        air = np.where(with_lf, self.airtime_ns[True], self.airtime_ns[False])
        self._queue(t_ns, rows, ax.KIND_CAM, frames, ready, backoff, air, with_lf,
                    np.column_stack([content[name] for name in _CONTENT]))
        self.wire.encode(t_ns, self._ids[rows], frames, with_lf, si_vals)

    def _queue(self, t_ns: int, rows: np.ndarray, kind: int, frames: np.ndarray, ready: np.ndarray,
               backoff: np.ndarray, air: np.ndarray, with_lf: np.ndarray, content: np.ndarray) -> None:
        """Put the new frames of one kind in their stations' queues. A newer frame replaces a waiting one of its
        kind; a frame behind the other kind waits as the second frame (``access``: one of each kind at most)."""
        si, sf = self._si, self._sf
        behind = (si[rows, ax.S_PENDING] == 1) & (si[rows, ax.S_KIND] != kind)
        head = ~behind
        h = rows[head]
        replaced = si[h, ax.S_PENDING] == 1
        if replaced.any():
            self.wire.discard(si[h[replaced], ax.S_FRAME])
            self.log.dropped(t_ns, self._ids[h[replaced]], si[h[replaced], ax.S_GEN], pm=kind == ax.KIND_PM)
        idle = si[h, ax.S_SENSE] == 0
        anchor = np.maximum(ready[head], si[h, ax.S_IDLE_SINCE]) + self._aifs_ns
        si[h, ax.S_PENDING] = 1
        si[h, ax.S_READY] = ready[head]
        si[h, ax.S_ANCHOR] = anchor
        si[h, ax.S_START] = np.where(idle, anchor + backoff[head] * self._slot_ns, ax.INF_NS)
        si[h, ax.S_BO] = backoff[head]
        si[h, ax.S_FRAME] = frames[head]
        si[h, ax.S_GEN] = t_ns
        si[h, ax.S_AIR] = air[head]
        si[h, ax.S_LF] = with_lf[head]
        si[h, ax.S_KIND] = kind
        sf[h, ax.F_CONTENT:ax.F_CONTENT + ax.N_CONTENT] = content[head]
        if not behind.any():
            return
        b = rows[behind]
        again = si[b, ax.S_NEXT] == 1
        if again.any():
            self.wire.discard(si[b[again], ax.S_N_FRAME])
            self.log.dropped(t_ns, self._ids[b[again]], si[b[again], ax.S_N_GEN], pm=kind == ax.KIND_PM)
        si[b, ax.S_NEXT] = 1
        si[b, ax.S_N_READY] = ready[behind]
        si[b, ax.S_N_FRAME] = frames[behind]
        si[b, ax.S_N_GEN] = t_ns
        si[b, ax.S_N_AIR] = air[behind]
        si[b, ax.S_N_LF] = with_lf[behind]
        si[b, ax.S_N_KIND] = kind
        si[b, ax.S_N_BO] = backoff[behind]
        sf[b, ax.F_N_CONTENT:ax.F_N_CONTENT + ax.N_CONTENT] = content[behind]

    # -- outputs ------------------------------------------------------------------------------------------------------
    @property
    def keep_log(self) -> bool:  # type: ignore[override]
        """Whether the log keeps rows (``CommsModel.keep_log``); its counts are kept either way."""
        return self.log.keep

    @keep_log.setter
    def keep_log(self, value: bool) -> None:
        self.log.keep = value

    def drain_records(self) -> dict[str, np.ndarray]:
        """Every transmission ("sent" at its start on air, "dcc_dropped" when discarded) and the receptions of the
        interest pairs (all links with ``trace: all``) since the last call; see ``CommsModel.drain_records``."""
        return self.log.drain_records()

    def drain_load(self) -> dict[str, np.ndarray]:
        """Each station's CBR per DCC window since the last call, with the DCC gap it leaves (see
        ``CommsModel.drain_load``)."""
        return self.log.drain_load()

    def drain_triggers(self) -> dict[str, np.ndarray]:
        """Each CAM generated since the last call and the rule that triggered it (see
        ``CommsModel.drain_triggers``)."""
        return self.log.drain_triggers()

    def metrics(self) -> dict[str, Any]:
        """The log's counts (``ChannelLog.summary``), the frame sizes and how many CAMs the codec check decoded
        (with the platooning message: the same for PMs, under ``pm*`` keys)."""
        out = {**self.log.summary(), "codec_checked": self.wire.checked,
               "frame_bytes": {"hf": self.frame_bytes[False], "lf": self.frame_bytes[True]}}
        if self.carries_platooning_message:
            out["pm_codec_checked"] = self.wire.pm_checked
            out["pm_frame_bytes"] = {"no_peer": self.pm_frame_bytes[False], "peer": self.pm_frame_bytes[True]}
        return out

    def finalize(self) -> None:
        """Close the capture."""
        self.wire.close()

