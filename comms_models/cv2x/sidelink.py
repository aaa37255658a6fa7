"""The sidelink in subframes: each station's reservation and waiting packet, moved subframe by subframe.

Per subframe k (only subframes in which something happens are visited):

1. **Transmissions.** Every station whose packet is due in k transmits on its reservation; the receptions are
   resolved (``reception.receive``) and the transmission enters the history the others sense. Then the counter
   counts down; at zero the station keeps its reservation with probability ``p_keep`` (a new counter) or reselects
   at its next packet.
2. **Arrivals.** A packet that reaches the MAC in k (too late for a transmission in k) uses the station's
   reservation, its next occasion after k, unless a reselection is due (TS 36.321 5.14.1.1): no reservation yet
   (``first``), the counter expired and the keep draw said reselect (``counter``), the packet needs more
   subchannels than reserved (``size``), the next occasion lies beyond the delay budget (``latency``), or the
   reservation went unused for a second (``unused``). A reselection senses and selects (``sps``; compiled for
   every station of the subframe in ``select_kernel.reselect_rows``) and draws a new counter uniformly in [5, 15]
   (RRI >= 100 ms; [10, 30] at 50 ms, [25, 75] at 20 ms). A packet arriving while the previous one still waits
   replaces it (the old one is logged as dropped).
3. **Load.** Each station counts the subchannels it senses busy (S-RSSI above -94 dBm); every ``cbr_window_ms`` the
   channel busy ratio closes (``load.ChannelLoad``, ``Cv2xLog.window``).
4. **Congestion control** (``congestion_control``): before transmitting, a station whose channel occupancy ratio
   would exceed the limit for its last CBR drops the packet (``_within_cr_limit``, ``load.ChannelLoad.over_limit``).

NR-V2X mode 2 (``rat: nr``) runs the same loop in slots of 1 / 2^mu ms (``scs_khz``; every duration of the
parameters, given in ms, counts 2^mu slots per ms), picks uniformly among the candidates left after the exclusions
(``sps.select_nr``) and, with ``scheduling: dynamic``, selects anew for every packet (``dynamic``) without reserving
anything ahead, sending it ``1 + blind_retransmissions`` times in distinct slots of its window (``retransmission``
rows; a receiver's outcome is reported once per packet, ``copies``).

Every random number is keyed by its event (``core.rng.KeyedDraws``): the pick, the order of equal candidates and the
counter by (station, subframe), the keep draw likewise, each under its own purpose; so the same seed gives
bit-identical runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from core.rng import KeyedDraws, purpose_key

from . import select_kernel as sk
from .bler import sinr_shift_db
from .copies import MAX_COPIES, CopyHolder, Outcomes
from .history import TxHistory
from .load import ChannelLoad
from .log import RESELECTIONS, Cv2xLog
from .params import Cv2xParams
from .propagation import Propagation
from .reception import Links, Neighbourhood, Transmissions, receive
from .select_kernel import salted
from .sensing import SenseState, sense
from .sps import PHASE_MS, select_station
from .tbs import SCI_RBS, subchannels_needed

NS_PER_SF = 1_000_000  # an LTE subframe (NR slots: NS_PER_SF / 2^mu)
_NEVER = np.iinfo(np.int64).max
_FIRST, _COUNTER, _SIZE, _LATENCY, _UNUSED, _DYNAMIC, _RETX = (
    RESELECTIONS.index(n) for n in ("first", "counter", "size", "latency", "unused", "dynamic", "retransmission"))
CONTENT_COLUMNS = 7  # x, y, yaw, v, a, yaw_rate of the message; the desired acceleration of its PM (or NaN)


@dataclass
class Subframe:
    """What one transmitting subframe produced, for the channel to log and deliver."""

    txs: Transmissions
    links: Links
    generated_ns: np.ndarray  # per transmission
    content: np.ndarray  # (transmissions, CONTENT_COLUMNS)
    link_sf: np.ndarray  # per link: the slot of the copy its outcome is from


class Sidelink:
    """Stations (rows in spawn order), their reservations and packets, and the subframe loop."""

    _INT = ("slot", "res_sf", "res_x0", "res_len", "counter", "last_tx_sf", "pkt_gen_ns", "pkt_len", "pkt_tx_sf",
            "pkt_cause", "carry", "inc_gen_ns", "inc_arr_sf", "inc_len", "busy", "meas_since", "copy_next")

    def __init__(self, cfg: Cv2xParams, seed: int, prop: Propagation, log: Cv2xLog) -> None:
        self.cfg, self.prop, self.log = cfg, prop, log
        phy = cfg.phy
        f = cfg.slots_per_ms
        log.ns_slot = self.ns_slot
        s = cfg.sps
        self.sps = s.model_copy(update={name: getattr(s, name) * f for name in (
            "rri_ms", "t1_ms", "t2_ms", "delay_budget_ms", "sensing_window_ms", "unused_reselect_ms")})  # in slots
        self.copies = CopyHolder()  # NR dynamic scheduling: each station's packet copies
        self.n_sub = cfg.n_subchannels
        self.noise_rb_mw = 10.0 ** (phy.noise_floor_dbm / 10.0) / cfg.carrier_rbs
        self.noise_sub_mw = self.noise_rb_mw * phy.subchannel_rbs
        self.cbr_mw = 10.0 ** (cfg.cbr_threshold_dbm / 10.0)
        lengths = np.arange(1, self.n_sub + 1)
        self.shift_db = sinr_shift_db(phy.mcs, lengths * phy.subchannel_rbs - SCI_RBS)
        self.noise_tb_mw = self.noise_rb_mw * (lengths * phy.subchannel_rbs - SCI_RBS)
        self.keys = {name: purpose_key(seed, "cv2x", name) for name in ("pick", "tie", "counter", "keep", "bler")}
        self.keys.update({f"{name}_salted": salted(self.keys[name]) for name in ("pick", "tie")})  # KeyedDraws.random
        self.history = TxHistory()
        # what each station heard, for its sensing, and the positions as far back as the sensing window reaches and
        # a step more (to recompute it once the rings are dropped)
        self.sensing = SenseState(self.sps.sensing_window_ms, (cfg.sps.sensing_window_ms + 2 * PHASE_MS) * NS_PER_SF)
        self.near = Neighbourhood(prop.radius_m)  # the stations of the step being advanced, on a grid
        self.ids = np.empty(0, np.int64)
        self.slots = 0  # stations ever spawned: each has its own slot in the history
        for name in self._INT:
            setattr(self, name, np.empty(0, np.int64))
        self.pkt_on = np.empty(0, bool)  # a packet at the MAC, waiting for its resource
        self.inc_on = np.empty(0, bool)  # a packet in transmit processing, not at the MAC yet
        self.reselect = np.empty(0, bool)
        self.pkt_content = np.empty((0, CONTENT_COLUMNS))
        self.inc_content = np.empty((0, CONTENT_COLUMNS))
        self.sf = 0  # the next subframe to process
        self.load = ChannelLoad(cfg, self.n_sub, self.noise_sub_mw, self.cbr_mw)  # CBR windows, CR limit

    # -- the grid ------------------------------------------------------------------------------------------------
    @property
    def ns_slot(self) -> int:
        """[ns] a slot (LTE: a 1 ms subframe; NR: 1 / 2^mu ms)."""
        return NS_PER_SF // self.cfg.slots_per_ms

    @property
    def phase(self) -> int:
        """Slots in 100 ms (the period of the S-RSSI average and of the half-duplex exclusion)."""
        return PHASE_MS * self.cfg.slots_per_ms

    @property
    def nr(self) -> bool:
        """NR-V2X mode 2 (uniform pick among the candidates)."""
        return self.cfg.rat == "nr"

    @property
    def dynamic(self) -> bool:
        """Dynamic grants: a selection per packet, nothing reserved."""
        return self.cfg.scheduling == "dynamic"

    # -- stations ------------------------------------------------------------------------------------------------
    def spawn(self, ids: np.ndarray, spawn_ns: np.ndarray) -> None:
        """Append stations without reservation; each measures the load from its spawn."""
        n = len(ids)
        self.ids = np.concatenate([self.ids, ids])
        self.slot = np.concatenate([self.slot, self.slots + np.arange(n, dtype=np.int64)])
        self.slots += n
        init = {"res_sf": -1, "res_x0": 0, "res_len": 0, "counter": 0, "last_tx_sf": -(10**9), "pkt_gen_ns": 0,
                "pkt_len": 0, "pkt_tx_sf": -1, "pkt_cause": 0, "carry": 0, "inc_gen_ns": 0, "inc_arr_sf": 0,
                "inc_len": 0, "busy": 0, "copy_next": 0}
        for name, value in init.items():
            setattr(self, name, np.concatenate([getattr(self, name), np.full(n, value, np.int64)]))
        since = -(-np.asarray(spawn_ns, np.int64) // self.ns_slot)
        self.meas_since = np.concatenate([self.meas_since, since])
        self.load.spawn(n)
        for name in ("pkt_on", "inc_on", "reselect"):
            setattr(self, name, np.concatenate([getattr(self, name), np.zeros(n, bool)]))
        for name in ("pkt_content", "inc_content"):
            setattr(self, name, np.concatenate([getattr(self, name), np.zeros((n, CONTENT_COLUMNS))]))
        self.copies.spawn(n)
        self.sensing.spawn(n, self.slots)

    def despawn(self, keep: np.ndarray) -> None:
        """Keep the stations of mask ``keep``; the others' packets vanish (their past transmissions stay sensed)."""
        self.copies.despawn(keep, self.ids[~keep])
        for name in (*self._INT, "ids", "pkt_on", "inc_on", "reselect", "pkt_content", "inc_content"):
            setattr(self, name, getattr(self, name)[keep])
        self.load.despawn(keep)
        self.sensing.despawn(keep)

    # -- packets -------------------------------------------------------------------------------------------------
    def queue(self, t_ns: int, rows: np.ndarray, generated_ns: np.ndarray, arrival_ns: np.ndarray,
              size_bytes: np.ndarray, content: np.ndarray) -> None:
        """Packets of ``rows`` reaching the MAC at ``arrival_ns`` (not before the next subframe to process). One
        still in processing is replaced at once, one at the MAC when the new one arrives (logged as dropped)."""
        length = subchannels_needed(size_bytes, self.cfg.phy.mcs, self.cfg.phy.subchannel_rbs, self.n_sub)
        big = length == 0
        if big.any():
            self.log.dropped(t_ns, self.ids[rows[big]], generated_ns[big], cause="too_big")
        r = rows[~big]
        overtaken = r[self.inc_on[r]]
        if len(overtaken):
            self.log.dropped(t_ns, self.ids[overtaken], self.inc_gen_ns[overtaken])
        self.inc_on[r] = True
        self.inc_gen_ns[r] = generated_ns[~big]
        self.inc_arr_sf[r] = np.maximum(-(-arrival_ns[~big] // self.ns_slot), self.sf)
        self.inc_len[r] = length[~big]
        self.inc_content[r] = content[~big]

    # -- the loop ------------------------------------------------------------------------------------------------
    def advance(self, end_sf: int, x: np.ndarray, y: np.ndarray, on_subframe: Callable[[Subframe], None]) -> None:
        """Process subframes [self.sf, end_sf) at positions ``x, y`` (this step's), calling ``on_subframe`` for each
        one with transmissions."""
        self.near.update(x, y)
        self.sensing.take(end_sf * self.ns_slot, x, y)
        while True:
            arr = np.where(self.inc_on, self.inc_arr_sf, _NEVER)
            due = np.where(self.pkt_on, self.pkt_tx_sf, _NEVER)
            k = int(min(arr.min(initial=_NEVER), due.min(initial=_NEVER)))
            self.load.close_windows(min(k, end_sf), self.busy, self.meas_since, self.ids, self.log, self.ns_slot)
            if k >= end_sf:
                break
            sending = np.flatnonzero(due == k)
            if len(sending) and self.cfg.congestion_control:
                sending = self._within_cr_limit(k, sending)
            if len(sending):  # first: a packet arriving in k is too late for a transmission in k
                on_subframe(self._transmit(k, sending, x, y))
            arriving = np.flatnonzero(arr == k)
            if len(arriving):
                self._arrive(k, arriving)
                self._decide(k, arriving)
            self.sf = k + 1
        self.sf = max(self.sf, end_sf)
        reach = max(self.sps.sensing_window_ms, self.load.cr_window if self.cfg.congestion_control else 0)
        self.history.prune(self.sf - reach - self.phase)

    def _arrive(self, n: int, rows: np.ndarray) -> None:
        """The packets in processing of ``rows`` reach the MAC in subframe ``n``, replacing any still waiting."""
        waiting = rows[self.pkt_on[rows]]
        if len(waiting):
            self.log.dropped(n * self.ns_slot, self.ids[waiting], self.pkt_gen_ns[waiting])
            # a reservation selected for the replaced packet is first used by this one: it reports why
            self.carry[waiting] = self.pkt_cause[waiting]
            self.copies.forget(self.ids[waiting])
        self.pkt_on[rows] = True
        self.inc_on[rows] = False
        self.pkt_gen_ns[rows] = self.inc_gen_ns[rows]
        self.pkt_len[rows] = self.inc_len[rows]
        self.pkt_content[rows] = self.inc_content[rows]
        self.pkt_tx_sf[rows] = -1

    def _decide(self, n: int, rows: np.ndarray) -> None:
        """Reservation or reselection for the packets of ``rows`` that arrived in subframe ``n``."""
        if self.dynamic:
            self._reselect(n, rows, np.full(len(rows), _DYNAMIC, np.int64))
            return
        sps = self.sps
        rri = sps.rri_ms
        has = self.res_sf[rows] >= 0
        behind = has & (self.res_sf[rows] <= n)  # the next usable occasion is after n
        steps = -(-(n + 1 - self.res_sf[rows]) // rri)
        self.res_sf[rows] = np.where(behind, self.res_sf[rows] + steps * rri, self.res_sf[rows])
        budget = min(sps.t2_ms, sps.delay_budget_ms)
        cause = np.zeros(len(rows), np.int64)
        checks = ((n - self.last_tx_sf[rows] > sps.unused_reselect_ms, _UNUSED),
                  (self.res_sf[rows] > n + budget, _LATENCY),
                  (self.pkt_len[rows] > self.res_len[rows], _SIZE),
                  (self.reselect[rows], _COUNTER),
                  (~has, _FIRST))
        for mask, code in checks:  # the last that applies names the cause
            cause[mask] = code
        keep = cause == 0
        self.pkt_tx_sf[rows[keep]] = self.res_sf[rows[keep]]
        self.pkt_cause[rows[keep]] = self.carry[rows[keep]]
        self.carry[rows] = 0
        if not keep.all():
            self._reselect(n, rows[~keep], cause[~keep])

    def _reselect(self, n: int, rows: np.ndarray, codes: np.ndarray) -> None:
        """New resources for the packets of ``rows`` (reselection causes ``codes``) that arrived in slot ``n``: each
        station senses and selects (``select_kernel.reselect_rows``); a reservation draws its counter."""
        sps, k = self.sps, len(rows)
        copies = 1 + self.cfg.blind_retransmissions if self.nr else 1
        out_sf, out_x0 = np.full((k, MAX_COPIES), -1, np.int64), np.full((k, MAX_COPIES), -1, np.int64)
        count = np.zeros(k, np.int64)
        length = self.pkt_len[rows]
        if not self.sensing.heard.kept:
            self._sense_again(n, rows, out_sf, out_x0, count)
        else:
            sk.reselect_rows(rows, self.ids[rows], length, n, *self.sensing.heard.arrays,
                             self.sensing.scratch.last, self.sensing.scratch.seen, sps.sensing_window_ms, self.phase,
                             self.n_sub, self.cfg.phy.sensitivity_dbm, 0 if self.dynamic else sps.rri_ms,
                             self.phase if self.dynamic else sps.rri_ms, 1 << 40 if self.dynamic else sps.rri_ms,
                             sps.rri_ms, sps.t1_ms, min(sps.t2_ms, sps.delay_budget_ms), sps.min_candidates,
                             sps.rsrp_threshold_dbm, sps.rsrp_step_db, self.nr, copies, self.keys["pick_salted"],
                             self.keys["tie_salted"], out_sf, out_x0, count)
        self.res_x0[rows], self.res_len[rows] = out_x0[:, 0], length
        self.last_tx_sf[rows] = np.maximum(self.last_tx_sf[rows], n)  # a new reservation counts as used now
        self.pkt_tx_sf[rows], self.pkt_cause[rows] = out_sf[:, 0], codes
        if self.dynamic:  # nothing reserved: the copies of this packet only
            for i, row in enumerate(rows.tolist()):
                self.copies.plan(row, out_sf[i, :count[i]].tolist(), out_x0[i, :count[i]].tolist())
            self.copy_next[rows] = 0
            return
        lo, hi = self.cfg.sps.counter_range
        self.counter[rows] = KeyedDraws(self.keys["counter"], self.ids[rows], None,
                                        np.full(k, n, np.int64)).integers(lo, hi + 1, k)
        self.res_sf[rows] = out_sf[:, 0]
        self.reselect[rows] = False

    def _sense_again(self, n: int, rows: np.ndarray, out_sf: np.ndarray, out_x0: np.ndarray,
                     count: np.ndarray) -> None:
        """``_reselect``'s picks when the rings of what each station heard were dropped (``Heard.reserve``): each
        station's sensing recomputed from the history (``sensing.sense``), its selection by ``sps``."""
        sps = self.sps
        for i, row in enumerate(rows.tolist()):
            station, length = int(self.ids[row]), int(self.pkt_len[row])
            sensed = sense(self.history, self.sensing.snaps, self.prop, row, station, n, sps.sensing_window_ms,
                           self.phase, self.n_sub, self.cfg.phy.sensitivity_dbm, self.slots,
                           0 if self.dynamic else sps.rri_ms)
            picks = select_station(n, length, station, sps, self.n_sub, sensed, self.keys["pick"], self.keys["tie"],
                                   self.phase, 1 + self.cfg.blind_retransmissions if self.nr else 0, self.dynamic)
            count[i] = len(picks)
            out_sf[i, :len(picks)] = [p.sf for p in picks]
            out_x0[i, :len(picks)] = [p.x0 for p in picks]

    def _transmit(self, k: int, rows: np.ndarray, x: np.ndarray, y: np.ndarray) -> Subframe:
        length = self.res_len[rows]
        txs = Transmissions(sf=k, sender=self.ids[rows], row=rows, x0=self.res_x0[rows], length=length,
                            noise_mw=self.noise_tb_mw[length - 1], shift_db=self.shift_db[length - 1])
        links = receive(txs, self.slot[rows], self.ids, self.near, self.prop, self.cfg.phy.sensitivity_dbm,
                        self.keys["bler"], self.n_sub, self.noise_sub_mw, self.cbr_mw, self.busy,
                        self.sensing.heard)
        self.history.add(k, txs.sender, self.slot[rows], txs.x0, length, self.sensing.snap, x[rows], y[rows])
        gen, content = self.pkt_gen_ns[rows].copy(), self.pkt_content[rows].copy()
        cause = np.where(self.copy_next[rows] > 0, _RETX, self.pkt_cause[rows]) if self.dynamic else \
            self.pkt_cause[rows]
        self.log.transmissions(k, txs.sender, gen, txs.x0, length, cause)
        self.load.tx_subframes += 1  # (``receive`` counted the busy subchannels)
        self.last_tx_sf[rows] = k
        if self.dynamic and self.cfg.blind_retransmissions:
            links, link_sf = self._next_copies(k, rows, txs, links)
        else:
            link_sf = np.full(len(links.tx), k, np.int64)
            self.pkt_on[rows] = False
            self.pkt_tx_sf[rows] = -1
            if not self.dynamic:
                self._count_down(k, rows)
        return Subframe(txs=txs, links=links, generated_ns=gen, content=content, link_sf=link_sf)

    def _count_down(self, k: int, rows: np.ndarray) -> None:
        """The reservations of ``rows`` move on after their transmission in ``k``; the counter counts it."""
        sps = self.sps
        self.res_sf[rows] = k + sps.rri_ms
        self.counter[rows] -= 1
        expired = rows[self.counter[rows] <= 0]
        if len(expired):
            ev = (self.ids[expired], None, np.full(len(expired), k, np.int64))
            keeps = KeyedDraws(self.keys["keep"], *ev).random(len(expired)) < sps.p_keep
            lo, hi = self.cfg.sps.counter_range
            fresh = KeyedDraws(self.keys["counter"], *ev).integers(lo, hi + 1, len(expired))
            self.counter[expired] = np.where(keeps, fresh, 0)
            self.reselect[expired] = ~keeps

    def _next_copies(self, k: int, rows: np.ndarray, txs: Transmissions, links: Links) -> tuple[Links, np.ndarray]:
        """After the copies of ``rows`` sent in ``k``: the links of the packets whose last copy this was, with the
        outcome of all their copies (``copies``) and the slot each comes from; the others wait for their next."""
        nxt = self.copy_next[rows] + 1
        self.copy_next[rows] = nxt
        later = np.where(nxt < MAX_COPIES, self.copies.sf[rows, np.minimum(nxt, MAX_COPIES - 1)], -1)
        final = later < 0
        parts = []
        for t in range(len(rows)):
            m = links.tx == t
            done = self.copies.add(int(txs.sender[t]), Outcomes(links.rx[m], links.cause[m], links.power_dbm[m],
                                                                np.full(int(m.sum()), k, np.int64)), bool(final[t]))
            if done is not None:
                parts.append((np.full(len(done.rx), t, np.int64), done.rx, done.power_dbm, done.cause, done.sf))
        more = rows[~final]
        self.pkt_tx_sf[more] = later[~final]
        self.res_x0[more] = self.copies.x0[more, nxt[~final]]
        self.pkt_on[rows[final]] = False
        self.pkt_tx_sf[rows[final]] = -1
        cols = [np.concatenate(c) for c in zip(*parts, strict=True)] if parts else \
            [np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0), np.empty(0, np.int64), np.empty(0, np.int64)]
        return Links(tx=cols[0], rx=cols[1], power_dbm=cols[2], cause=cols[3]), cols[4]

    def _within_cr_limit(self, k: int, rows: np.ndarray) -> np.ndarray:
        """The rows of ``rows`` whose transmission in subframe ``k`` keeps their channel occupancy ratio within the
        limit for their last CBR (``load.ChannelLoad.over_limit``); the others' packets are dropped and their
        reservation moves on unused."""
        over = self.load.over_limit(k, rows, self.history, self.slot[rows], self.slots, self.res_len[rows])
        if over.any():
            drop = rows[over]
            self.log.dropped(k * self.ns_slot, self.ids[drop], self.pkt_gen_ns[drop], cause="cr_limit")
            self.pkt_on[drop] = False
            self.pkt_tx_sf[drop] = -1
            if self.dynamic:  # the packet's other copies go with it
                self.copies.forget(self.ids[drop])
            else:
                self.res_sf[drop] = k + self.sps.rri_ms
        return rows[~over]
