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
(``core.rng.keyed_u01`` / ``KeyedDraws`` with ``purpose_key(seed, "v2x", purpose)``): fading and shadowing
by (sender, receiver, generation time), backoff, transmit delay and the codec sample by (sender, generation time),
receive delay by (sender, receiver, generation time); each station's start offset by its robot id. The same seed
gives bit-identical results, and a station that joins never changes the draws of the others' links. A PM's draws
use the same events under their own purposes ("pm_radio", "pm_mac", ...), so a CAM and a PM generated at the same
instant are independent.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from core.rng import purpose_key, stream
from core.robots import RobotSpec, rows_of

from ..base import CommsModel, Deliveries, Interest
from . import access as ax
from .dcc import Dcc
from .generating import Generation
from .generation import CamGeneration
from .geo import LocalProjection
from .grid import build_grid
from .log import ChannelLog
from .params import ItsG5Params
from .pcap import frame_length_80211
from .pm import (
    PmReceptions,
    PmSchedule,
    interest_leaders,
)
from .radio import airtime_ns, build_tables, dbm_to_mw
from .receiving import Receptions
from .threads import CHECK_FRAMES, NEVER, PARALLEL_MIN_LINKS, ThreadChoice
from .wire import CamWire


def _grow(arr: np.ndarray, rows: int, fill: float | int | None = None) -> np.ndarray:
    """A copy of ``arr`` with at least ``rows`` rows (doubling), new rows set to ``fill`` when given."""
    new_rows = max(rows, 2 * arr.shape[0], 16)
    out = np.empty((new_rows, *arr.shape[1:]), arr.dtype)
    out[: arr.shape[0]] = arr
    if fill is not None:
        out[arr.shape[0]:] = fill
    return out




class ItsG5Channel(Generation, Receptions, CommsModel):
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
        # every draw is keyed by its event (sender, receiver, generation time): see core.rng.KeyedDraws
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

        # Stations (rows in spawn order) and the medium. ``_si`` / ``_sf`` are (stations, columns) views of
        # column-major tables; the kernel gets them transposed (see ``access``).
        self._ids = np.empty(0, np.int64)
        self._si = np.empty((ax.N_SI64, 0), np.int64).T
        self._sf = np.empty((ax.N_SF64, 0), np.float64).T
        self._scratch_code = np.empty(0, np.int64)
        self._scratch_row = np.empty(0, np.int64)
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
        self._threads = ThreadChoice()  # serial or parallel link loops: the same results
        self._pend = np.empty(0, np.int64)

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
        self._si = np.ascontiguousarray(np.concatenate([self._si, rows]).T).T
        self._sf = np.ascontiguousarray(np.concatenate([self._sf, np.zeros((n, ax.N_SF64))]).T).T
        self._scratch_code = np.concatenate([self._scratch_code, np.full(n, -1, np.int64)])
        self._scratch_row = np.concatenate([self._scratch_row, np.full(n, -1, np.int64)])
        self._last_admitted = np.concatenate([self._last_admitted, np.full(n, -1, np.int64)])
        self._last_pm_admitted = np.concatenate([self._last_pm_admitted, np.full(n, -1, np.int64)])
        self._win_out = np.empty((self._win_out.shape[0], len(self._ids)), np.float64)
        self.generation.spawn(spawn_ns + offsets)
        if self.pm_schedule is not None:
            self.pm_schedule.spawn(spawn_ns + offsets)  # the PM service starts with the CA service
        self.dcc.spawn(n)
        self._roster_version += 1
        self._ctr[ax.C_NEXT] = 0  # the next step runs the medium whatever it holds
        self._threads.stations = len(self._ids)

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
        for name in ("_ids", "_si", "_sf", "_scratch_code", "_scratch_row", "_last_admitted", "_last_pm_admitted"):
            setattr(self, name, getattr(self, name)[keep])
        self._si, self._sf = np.ascontiguousarray(self._si.T).T, np.ascontiguousarray(self._sf.T).T
        if self.pm_schedule is not None and self.pm_rx is not None:
            self.pm_schedule.despawn(keep)
            self.pm_rx.forget(removed_ids)
        self._win_out = np.empty((self._win_out.shape[0], len(self._ids)), np.float64)
        self.generation.despawn(keep)
        self.dcc.despawn(keep)
        alive = ~np.isin(self._pending_rx["receiver"], removed_ids)
        self._pending_rx = {k: v[alive] for k, v in self._pending_rx.items()}
        self._roster_version += 1
        self._ctr[ax.C_NEXT] = 0  # the next step runs the medium whatever it holds
        self._threads.stations = len(self._ids)

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
        if t_ns < self._ctr[ax.C_NEXT]:  # nothing starts, ends or closes a window by t_ns: the medium is as it was
            return
        t = self.tables
        x0, y0, cell, ncx, ncy, cell_start, cell_items = build_grid(x, y, t.radius_m)
        n = len(self._ids)
        ctr = self._ctr
        ctr[ax.C_TX_OUT] = ctr[ax.C_RX_OUT] = ctr[ax.C_WIN_OUT] = 0
        choose = n > PARALLEL_MIN_LINKS  # fewer stations never run the parallel loops: no timing either
        par_min = np.int64(self._threads.par_min() if choose else NEVER)
        ctr[ax.C_PAR_LEFT] = CHECK_FRAMES
        if self._pend.shape[0] != n:
            self._pend = np.empty(n, np.int64)  # stations with a waiting frame, kept across NEED_CHECK
        started = time.perf_counter() if choose else 0.0
        timed = 0  # frames of this step already handed to the thread choice
        while True:
            status = ax.advance(
                np.int64(t_ns), self._si.T, self._sf.T, x, y, self._ti, self._tf, self._li, self._lf, ctr,
                self._radio_key, self._pm_radio_key, self._ids, self._id_hashes(),
                x0, y0, cell, np.int64(ncx), np.int64(ncy), cell_start, cell_items, self._int_ptr,
                self._int_rx, self._pend,
                self._tx_out, self._rx_out_i, self._rx_out_f, self._win_out, self._win_t,
                self._scratch_code, self._scratch_row,
                t.class_limit_m2, t.class_coef, t.class_exp4, t.gain_q,
                t.tx_mw, t.min_d2, self._radius2, self._sens_mw, self._cs_mw, self._noise_mw, self._capture,
                np.int64(self._aifs_ns), np.int64(self._slot_ns), np.int64(self._cca_ns),
                np.int64(self._window_ns), self._emit_all, par_min,
            )
            if status == ax.DONE:
                break
            if status == ax.NEED_CHECK:  # CHECK_FRAMES frames on the parallel loops: still faster than serial?
                now = time.perf_counter()
                self._threads.record(now - started, int(ctr[ax.C_TX_OUT]) - timed)
                started, timed = now, int(ctr[ax.C_TX_OUT])
                par_min = np.int64(self._threads.par_min())
                ctr[ax.C_PAR_LEFT] = CHECK_FRAMES
            elif status == ax.NEED_LINKS:
                self._li = _grow(self._li, 4 * (int(ctr[ax.C_LINKS]) + n))
                self._lf = _grow(self._lf, 4 * (int(ctr[ax.C_LINKS]) + n))
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
        if choose:
            self._threads.record(time.perf_counter() - started, int(ctr[ax.C_TX_OUT]) - timed)
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

