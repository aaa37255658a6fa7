"""The shared 802.11p medium of the ITS-G5 model: the stations' access-layer rows, their MAC queues (one frame of
each kind), the propagation tables and the compiled kernel that moves frames on and off the air (``access``).

The medium knows frames, not messages: the CA and PM services hand it frames to queue (``Medium.queue``); it
reports what started on air (log and capture), each closed CBR window (to a callback, the channel's DCC) and the
links it resolved (``rx_out``, read by ``receiving.Receptions``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.rng import id_hashes, purpose_key
from core.robots import rows_of

from ..base import Interest
from . import access
from . import access_layout as ax
from .grid import build_grid
from .jamming import Jammers, jam_refresh
from .log import ChannelLog
from .params import ItsG5Params
from .radio import build_tables, dbm_to_mw
from .threads import CHECK_FRAMES, NEVER, PARALLEL_MIN_LINKS, ThreadChoice
from .wire import CamWire

SPEED_OF_LIGHT_MPS = 299_792_458.0


def _grow(arr: np.ndarray, rows: int, fill: float | int | None = None) -> np.ndarray:
    """A copy of ``arr`` with at least ``rows`` rows (doubling), new rows set to ``fill`` when given."""
    new_rows = max(rows, 2 * arr.shape[0], 16)
    out = np.empty((new_rows, *arr.shape[1:]), arr.dtype)
    out[: arr.shape[0]] = arr
    if fill is not None:
        out[arr.shape[0]:] = fill
    return out


@dataclass(frozen=True)
class AccessConstants:
    """The radio and MAC figures the kernel takes as scalars (powers in mW, times in ns)."""

    radius2: float
    sens_mw: float
    cs_mw: float
    noise_mw: float
    capture: float
    aifs_ns: int
    slot_ns: int
    cca_ns: int
    window_ns: int
    emit_all: bool

    @classmethod
    def of(cls, cfg: ItsG5Params, radius_m: float) -> AccessConstants:
        """The constants of a validated channel configuration with cut-off radius ``radius_m``."""
        r, m = cfg.radio, cfg.mac
        return cls(radius2=radius_m**2, sens_mw=float(dbm_to_mw(r.sensitivity_dbm)),
                   cs_mw=float(dbm_to_mw(r.cs_threshold_dbm)), noise_mw=float(dbm_to_mw(r.noise_floor_dbm)),
                   capture=float(10.0 ** (r.capture_threshold_db / 10.0)), aifs_ns=round(m.aifs_s * 1e9),
                   slot_ns=round(m.slot_s * 1e9), cca_ns=round(m.cca_time_s * 1e9),
                   window_ns=round(cfg.dcc.cbr_window_s * 1e9), emit_all=cfg.trace == "all" or cfg.deliver == "all")


class KernelBuffers:
    """The kernel's work tables (frames on air, links) and outputs; any starting size gives the same run, since the
    kernel hands back when one runs short and resumes once it has grown (``grow``)."""

    def __init__(self) -> None:
        self.ti = np.empty((64, ax.N_TI64), np.int64)
        self.tf = np.empty((64, ax.N_CONTENT), np.float64)
        self.li = np.empty((4096, ax.N_LI64), np.int64)
        self.lf = np.empty((4096, ax.N_LF64), np.float64)
        self.tx_out = np.empty((256, ax.N_TXO), np.int64)
        self.rx_out_i = np.empty((1024, ax.N_RXO_I), np.int64)
        self.rx_out_f = np.empty((1024, ax.N_RXO_F), np.float64)
        self.win_out = np.empty((2, 0), np.float64)
        self.win_t = np.empty(2, np.int64)
        self.pend = np.empty(0, np.int64)  # stations with a waiting frame, kept across NEED_CHECK

    def grow(self, status: int, ctr: np.ndarray, stations: int, interest_links: int) -> None:
        """Make room for what the kernel ran short of (``status``, one of ``access_layout.NEED_*``)."""
        if status == ax.NEED_LINKS:
            self.li = _grow(self.li, 4 * (int(ctr[ax.C_LINKS]) + stations))
            self.lf = _grow(self.lf, 4 * (int(ctr[ax.C_LINKS]) + stations))
        elif status == ax.NEED_ACTIVE:
            self.ti = _grow(self.ti, int(ctr[ax.C_ACTIVE]) + 1)
            self.tf = _grow(self.tf, int(ctr[ax.C_ACTIVE]) + 1)
        elif status == ax.NEED_TX_OUT:
            self.tx_out = _grow(self.tx_out, int(ctr[ax.C_TX_OUT]) + 1)
        elif status == ax.NEED_RX_OUT:
            need = int(ctr[ax.C_RX_OUT]) + stations + interest_links + 1
            self.rx_out_i = _grow(self.rx_out_i, need)
            self.rx_out_f = _grow(self.rx_out_f, need)

    def resize_windows(self, stations: int) -> None:
        """One CBR column per station."""
        self.win_out = np.empty((self.win_out.shape[0], stations), np.float64)


class Medium:
    """The stations on the shared channel (rows in spawn order) and the frames between them; see the module
    docstring. ``si`` / ``sf`` are (stations, columns) views of column-major tables; the kernel gets them
    transposed (see ``access``)."""

    def __init__(self, cfg: ItsG5Params, seed: int, wire: CamWire, log: ChannelLog) -> None:
        self.tables = build_tables(cfg.radio)
        self.const = AccessConstants.of(cfg, self.tables.radius_m)
        # fading and shadowing are keyed by (sender, receiver, generation time), under one purpose per frame kind
        self.radio_keys = (purpose_key(seed, "v2x", "radio"), purpose_key(seed, "v2x", "pm_radio"))
        self.wire, self.log = wire, log
        self.ids = np.empty(0, np.int64)
        self.si = np.empty((ax.N_SI64, 0), np.int64).T
        self.sf = np.empty((ax.N_SF64, 0), np.float64).T
        self.scratch_code = np.empty(0, np.int64)
        self.scratch_row = np.empty(0, np.int64)
        self.buffers = KernelBuffers()
        self.ctr = np.zeros(ax.N_C, np.int64)
        self.ctr[ax.C_WIN_END] = self.const.window_ns
        self.next_frame = 0
        self.interest_key: tuple[Any, int] | None = None
        self.int_ptr = np.zeros(1, np.int64)
        self.int_rx = np.empty(0, np.int64)
        self.roster_version = 0
        self.threads = ThreadChoice()  # serial or parallel link loops: the same results
        self._id_hash_cache: tuple[int, np.ndarray] | None = None
        self.pos: tuple[np.ndarray, np.ndarray] | None = None  # this step's positions, for propagation delays
        self.radio = cfg.radio
        self.jammers: Jammers | None = None  # the run's jammers (``attach_jammers``), if any
        self._no_jammers = (np.zeros((0, ax.N_JI64), np.int64), np.zeros((0, 0)), np.zeros((0, 0), np.int64))
        self.t_last = 0  # [ns] how far the kernel has run

    # -- stations ------------------------------------------------------------------------------------------------
    def spawn(self, ids: np.ndarray, spawn_ns: np.ndarray) -> None:
        """Append idle stations ``ids`` that start measuring the channel at ``spawn_ns``."""
        n = len(ids)
        rows = np.zeros((n, ax.N_SI64), np.int64)
        rows[:, ax.S_START] = ax.INF_NS
        rows[:, ax.S_IDLE_SINCE] = spawn_ns
        rows[:, ax.S_MEAS_SINCE] = spawn_ns
        rows[:, ax.S_ID] = ids
        self.ids = np.concatenate([self.ids, rows[:, ax.S_ID]])
        self.si = np.ascontiguousarray(np.concatenate([self.si, rows]).T).T
        self.sf = np.ascontiguousarray(np.concatenate([self.sf, np.zeros((n, ax.N_SF64))]).T).T
        self.scratch_code = np.concatenate([self.scratch_code, np.full(n, -1, np.int64)])
        self.scratch_row = np.concatenate([self.scratch_row, np.full(n, -1, np.int64)])
        if self.jammers is not None:
            self.jammers.spawn(n)
        self._roster_changed()

    def despawn(self, gone: np.ndarray) -> None:
        """Remove the stations of mask ``gone``: their frames on air finish, their queued frames vanish."""
        keep = ~gone
        new_row = np.where(keep, np.cumsum(keep) - 1, -1)
        b = self.buffers
        na, nl = int(self.ctr[ax.C_ACTIVE]), int(self.ctr[ax.C_LINKS])
        rows = b.ti[:na, ax.T_ROW]
        b.ti[:na, ax.T_ROW] = np.where(rows >= 0, new_row[np.maximum(rows, 0)], -1)
        rx = b.li[:nl, ax.L_RX]
        b.li[:nl, ax.L_RX] = np.where(rx >= 0, new_row[np.maximum(rx, 0)], -1)
        self.wire.discard(self.si[gone & (self.si[:, ax.S_PENDING] == 1), ax.S_FRAME])
        self.wire.discard(self.si[gone & (self.si[:, ax.S_NEXT] == 1), ax.S_N_FRAME])
        self.ids, self.scratch_code, self.scratch_row = self.ids[keep], self.scratch_code[keep], self.scratch_row[keep]
        self.si, self.sf = np.ascontiguousarray(self.si[keep].T).T, np.ascontiguousarray(self.sf[keep].T).T
        if self.jammers is not None:
            self.jammers.despawn(keep)
        self._roster_changed()

    def attach_jammers(self, specs: list[Any]) -> None:
        """Put the jammers ``specs`` (``attacks.jamming.JammerSpec``) on the medium."""
        self.jammers = Jammers(specs, self.radio, self.tables)
        self.jammers.spawn(len(self.ids))
        self.ctr[ax.C_NEXT] = 0

    def _roster_changed(self) -> None:
        self.buffers.resize_windows(len(self.ids))
        self.roster_version += 1
        self.ctr[ax.C_NEXT] = 0  # the next step runs the medium whatever it holds
        self.threads.stations = len(self.ids)

    def id_hashes(self) -> np.ndarray:
        """``core.rng.id_hash`` of every station (recomputed when the stations change)."""
        cache = self._id_hash_cache
        if cache is None or cache[0] != self.roster_version or len(cache[1]) != len(self.ids):
            out = np.empty(len(self.ids), np.uint64)
            id_hashes(self.ids, out)
            self._id_hash_cache = cache = (self.roster_version, out)
        return cache[1]

    def set_interest(self, interest: Interest) -> tuple[np.ndarray, np.ndarray] | None:
        """Index the interest pairs by sender row; returns their (sender, receiver) rows when they changed (the same
        interest object on the same stations is taken as unchanged), else None."""
        if self.interest_key is not None and self.interest_key[0] is interest and \
                self.interest_key[1] == self.roster_version:
            return None
        self.interest_key = (interest, self.roster_version)
        n = len(self.ids)
        s_rows = rows_of(self.ids, interest.senders, missing=-1)
        r_rows = rows_of(self.ids, interest.receivers, missing=-1)
        ok = (s_rows >= 0) & (r_rows >= 0)
        s_rows, r_rows = s_rows[ok], r_rows[ok]
        by_sender = np.argsort(s_rows, kind="stable")
        self.int_rx = r_rows[by_sender].astype(np.int64)
        self.int_ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(s_rows, minlength=n), out=self.int_ptr[1:])
        return s_rows, r_rows

    # -- frames --------------------------------------------------------------------------------------------------
    def new_frames(self, k: int) -> np.ndarray:
        """Serial numbers for ``k`` new frames (CAMs and PMs share one numbering)."""
        frames = np.arange(self.next_frame, self.next_frame + k, dtype=np.int64)
        self.next_frame += k
        return frames

    def queue(self, t_ns: int, rows: np.ndarray, kind: int, frames: np.ndarray, ready: np.ndarray,
              backoff: np.ndarray, air: np.ndarray, with_lf: np.ndarray, content: np.ndarray) -> None:
        """Put the new frames of one kind in their stations' queues. A newer frame replaces a waiting one of its
        kind; a frame behind the other kind waits as the second frame (``access``: one of each kind at most)."""
        si, sf = self.si, self.sf
        behind = (si[rows, ax.S_PENDING] == 1) & (si[rows, ax.S_KIND] != kind)
        head = ~behind
        h = rows[head]
        replaced = si[h, ax.S_PENDING] == 1
        if replaced.any():
            self.wire.discard(si[h[replaced], ax.S_FRAME])
            self.log.dropped(t_ns, self.ids[h[replaced]], si[h[replaced], ax.S_GEN], pm=kind == ax.KIND_PM)
        idle = si[h, ax.S_SENSE] == 0
        anchor = np.maximum(ready[head], si[h, ax.S_IDLE_SINCE]) + self.const.aifs_ns
        si[h, ax.S_PENDING] = 1
        si[h, ax.S_READY] = ready[head]
        si[h, ax.S_ANCHOR] = anchor
        si[h, ax.S_START] = starts = np.where(idle, anchor + backoff[head] * self.const.slot_ns, ax.INF_NS)
        if len(starts):  # the medium has to run again by the earliest of them
            self.ctr[ax.C_NEXT] = min(int(self.ctr[ax.C_NEXT]), int(starts.min()))
        si[h, ax.S_BO] = backoff[head]
        si[h, ax.S_FRAME] = frames[head]
        si[h, ax.S_GEN] = t_ns
        si[h, ax.S_AIR] = air[head]
        si[h, ax.S_LF] = with_lf[head]
        si[h, ax.S_KIND] = kind
        sf[h, ax.F_CONTENT:ax.F_CONTENT + ax.N_CONTENT] = content[head]
        if behind.any():
            self._queue_behind(t_ns, rows[behind], kind, frames[behind], ready[behind], backoff[behind],
                               air[behind], with_lf[behind], content[behind])

    def _queue_behind(self, t_ns: int, b: np.ndarray, kind: int, frames: np.ndarray, ready: np.ndarray,
                      backoff: np.ndarray, air: np.ndarray, with_lf: np.ndarray, content: np.ndarray) -> None:
        si = self.si
        again = si[b, ax.S_NEXT] == 1
        if again.any():
            self.wire.discard(si[b[again], ax.S_N_FRAME])
            self.log.dropped(t_ns, self.ids[b[again]], si[b[again], ax.S_N_GEN], pm=kind == ax.KIND_PM)
        si[b, ax.S_NEXT] = 1
        si[b, ax.S_N_READY] = ready
        si[b, ax.S_N_FRAME] = frames
        si[b, ax.S_N_GEN] = t_ns
        si[b, ax.S_N_AIR] = air
        si[b, ax.S_N_LF] = with_lf
        si[b, ax.S_N_KIND] = kind
        si[b, ax.S_N_BO] = backoff
        self.sf[b, ax.F_N_CONTENT:ax.F_N_CONTENT + ax.N_CONTENT] = content

    # -- the medium's run ------------------------------------------------------------------------------------------
    def advance(self, t_ns: int, x: np.ndarray, y: np.ndarray, on_window: Callable[[int, np.ndarray], None]) -> bool:
        """Run the medium to ``t_ns`` at positions ``x``, ``y``: frames start and end, ``on_window(t_end_ns, cbr)``
        gets each closed CBR window, frames that started are logged. False when nothing could happen by ``t_ns``
        (the kernel is skipped and there are no receptions to collect)."""
        self.pos = (x, y)
        jam = self.jammers
        if jam is None and t_ns < self.ctr[ax.C_NEXT]:  # nothing starts, ends or closes a window by t_ns: the
            return False  # medium is as it was (jammers move with their robots: the kernel runs at every step)
        t, c, b = self.tables, self.const, self.buffers
        if jam is not None:  # the jammers' power at this step's positions, from where the kernel stopped
            jam_refresh(np.int64(self.t_last), jam.i, jam.p, jam.powers(self.ids, x, y), jam.s, self.si.T,
                           self.sf.T, c.cs_mw, np.int64(c.cca_ns), np.int64(c.slot_ns), np.int64(c.aifs_ns))
        jam_i, jam_p, jam_s = (jam.i, jam.p, jam.s) if jam is not None else self._no_jammers
        x0, y0, cell, ncx, ncy, cell_start, cell_items = build_grid(x, y, t.radius_m)
        n = len(self.ids)
        ctr = self.ctr
        ctr[ax.C_TX_OUT] = ctr[ax.C_RX_OUT] = ctr[ax.C_WIN_OUT] = 0
        choose = n > PARALLEL_MIN_LINKS  # fewer stations never run the parallel loops: no timing either
        par_min = np.int64(self.threads.par_min() if choose else NEVER)
        ctr[ax.C_PAR_LEFT] = CHECK_FRAMES
        if b.pend.shape[0] != n:
            b.pend = np.empty(n, np.int64)
        started = time.perf_counter() if choose else 0.0
        timed = 0  # frames of this step already handed to the thread choice
        while True:
            status = access.advance(
                np.int64(t_ns), self.si.T, self.sf.T, x, y, b.ti, b.tf, b.li, b.lf, ctr,
                self.radio_keys[0], self.radio_keys[1], self.ids, self.id_hashes(),
                x0, y0, cell, np.int64(ncx), np.int64(ncy), cell_start, cell_items, self.int_ptr,
                self.int_rx, b.pend,
                b.tx_out, b.rx_out_i, b.rx_out_f, b.win_out, b.win_t,
                self.scratch_code, self.scratch_row,
                t.class_limit_m2, t.class_coef, t.class_exp4, t.gain_q,
                t.tx_mw, t.min_d2, c.radius2, c.sens_mw, c.cs_mw, c.noise_mw, c.capture,
                np.int64(c.aifs_ns), np.int64(c.slot_ns), np.int64(c.cca_ns),
                np.int64(c.window_ns), c.emit_all, par_min, jam_i, jam_p, jam_s,
            )
            if status == ax.DONE:
                break
            if status == ax.NEED_CHECK:  # CHECK_FRAMES frames on the parallel loops: still faster than serial?
                now = time.perf_counter()
                self.threads.record(now - started, int(ctr[ax.C_TX_OUT]) - timed)
                started, timed = now, int(ctr[ax.C_TX_OUT])
                par_min = np.int64(self.threads.par_min())
                ctr[ax.C_PAR_LEFT] = CHECK_FRAMES
            elif status == ax.NEED_WIN_OUT:
                self._report_windows(on_window)
                ctr[ax.C_WIN_OUT] = 0
            else:
                b.grow(status, ctr, n, len(self.int_rx))
        self.t_last = t_ns
        if choose:
            self.threads.record(time.perf_counter() - started, int(ctr[ax.C_TX_OUT]) - timed)
        self._report_windows(on_window)
        self._report_tx()
        return True

    def _report_windows(self, on_window: Callable[[int, np.ndarray], None]) -> None:
        b = self.buffers
        for w in range(int(self.ctr[ax.C_WIN_OUT])):
            on_window(int(b.win_t[w]), b.win_out[w])

    def _report_tx(self) -> None:
        k = int(self.ctr[ax.C_TX_OUT])
        if k == 0:
            return
        out = self.buffers.tx_out[:k]
        self.log.sent(out[:, ax.TX_START], out[:, ax.TX_ID], out[:, ax.TX_GEN], out[:, ax.TX_KIND] == ax.KIND_PM,
                      out[:, ax.TX_FRAME])
        self.wire.on_air(out[:, ax.TX_FRAME], out[:, ax.TX_START])

    def rx_out(self) -> tuple[np.ndarray, np.ndarray]:
        """The links resolved by the last run (integer and float columns, ``access_layout.RX*``)."""
        k = int(self.ctr[ax.C_RX_OUT])
        return self.buffers.rx_out_i[:k], self.buffers.rx_out_f[:k]

    def jammer_holding(self, sender_ids: np.ndarray) -> np.ndarray:
        """Per station id: 1 + the index of a jammer whose power it senses above the carrier-sense level now (its
        medium busy by that jammer alone), 0 for none (or no jammers)."""
        out = np.zeros(len(sender_ids), np.int64)
        if self.jammers is None or not len(sender_ids) or not len(self.ids):
            return out
        rows = rows_of(self.ids, sender_ids, missing=-1)
        there = rows >= 0
        sensed = self.jammers.s[:, rows[there]] == 1  # jammers x the stations' rows
        out[there] = np.where(sensed.any(axis=0), sensed.argmax(axis=0) + 1, 0)
        return out

    def positions_of(self, sender_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """This step's position of each sender (NaN when gone): where its radio sends from, what its frames'
        GeoNetworking position vector says (a forged frame's too: the attacks forge the message, not the header)."""
        x_out, y_out = np.full(len(sender_ids), np.nan), np.full(len(sender_ids), np.nan)
        if self.pos is None or len(self.ids) == 0 or len(sender_ids) == 0:
            return x_out, y_out
        rows = rows_of(self.ids, sender_ids, missing=-1)
        there = rows >= 0
        x_out[there], y_out[there] = self.pos[0][rows[there]], self.pos[1][rows[there]]
        return x_out, y_out

    def propagation_ns(self, sender_ids: np.ndarray, receiver_rows: np.ndarray) -> np.ndarray:
        """Free-space propagation delay d / c [ns] between sender and receiver (0 when the sender is gone)."""
        out = np.zeros(len(sender_ids), np.int64)
        if self.pos is None or len(self.ids) == 0 or len(sender_ids) == 0:
            return out
        x, y = self.pos
        sender_rows = rows_of(self.ids, sender_ids, missing=-1)
        alive = (sender_rows >= 0) & (receiver_rows >= 0)
        d = np.hypot(x[sender_rows[alive]] - x[receiver_rows[alive]], y[sender_rows[alive]] - y[receiver_rows[alive]])
        out[alive] = np.round(d / SPEED_OF_LIGHT_MPS * 1e9).astype(np.int64)
        return out
