"""The C-V2X channel model: LTE-V2X PC5 sidelink, transmission mode 4 (autonomous, sensing-based semi-persistent
scheduling), or NR-V2X mode 2 (``rat: nr``: slots of a numerology, dynamic grants, blind retransmissions), carrying
the CAMs of the ETSI CA basic service.

Per channel step (``step(t_ns, estimate, interest)``):

1. The sidelink (``sidelink.Sidelink``) runs the 1 ms subframes since the previous step at this step's positions:
   packets that reached the MAC use their station's reservation or select a new one (``sps``, from what the
   station sensed: ``sensing``), due packets are transmitted, and every transmission is resolved at every station
   within the cut-off radius (``reception``: half-duplex, sensing threshold, BLER at the SNR, BLER at the SINR).
2. The CA basic service's rules (the ITS-G5 model's ``generation.CamGeneration``, etsi or fixed_rate) decide which
   stations generate a CAM; it carries what the vehicle believes, quantised as the CAM codec would, and reaches the
   MAC after the transmit processing delay. Its size is the CAM's UPER encoding plus headers and security (or
   ``packet_bytes``), which fixes how many subchannels it needs (``tbs``). With ``platooning_message`` the same
   transport block also carries a platooning message with the sender's desired acceleration (one MAC PDU
   multiplexes both: the same source, destination and priority, TS 36.321 5.14.1.3), so the PM goes when the CAM
   goes, is lost when it is lost, and adds its own size.
3. Receptions whose receive processing completes by ``t_ns`` are returned.

The CBR is measured and reported (``channel_load``); with ``congestion_control`` a station drops the transmissions
that would take its channel occupancy ratio over the limit for its CBR (``sidelink``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, ClassVar

import numpy as np

from core.ports import V2X_LOG_FIELDS, port
from core.rng import KeyedDraws, purpose_key, stream
from core.robots import RobotSpec

from ..base import CommsModel, Deliveries, Interest, empty_deliveries
from ..itsg5.ca_service import cam_content
from ..itsg5.codec import CamCodec, build_cam
from ..itsg5.generation import CamGeneration
from ..itsg5.geo import LocalProjection
from ..itsg5.platooning import ACCEL_MAX, PmCodec
from .log import CV2X_COLUMNS, RESELECTIONS, Cv2xLog
from .params import Cv2xParams
from .propagation import SPEED_OF_LIGHT_MPS, Propagation
from .reception import LOSS_CAUSES, RECEIVED
from .sidelink import Sidelink, Subframe

CAM_CONTENT = ("x", "y", "yaw", "v", "a", "yaw_rate")
PM_COLUMN = len(CAM_CONTENT)  # the content column of the desired acceleration a PM carries (NaN without one)
_LONG_AGO = -(1 << 62)  # [ns] "never" that stays finite in differences
HELD_LINKS = 1 << 18  # links of a step's subframes resolved together at most (memory of the temporaries)

CV2X_LOG = port("v2x", {**V2X_LOG_FIELDS, "subframe": ("int64", "ms"), "subchannel": ("int64", "-"),
                        "subchannels": ("int64", "-"), "reselection": ("uint8", "-", RESELECTIONS),
                        "loss": ("uint8", "-", LOSS_CAUSES)}, index="event",
                doc="every V2X transmission and reception with its outcome, and the sidelink resource, reselection "
                    "and loss cause of each")
"""The ``v2x`` port with the C-V2X columns (``log.CV2X_COLUMNS``), for a V2X federate that records a model's own
log port (``log_port``)."""


@cache
def cam_sizes(station_type: int, path_points: int = 0) -> dict[bool, int]:
    """UPER size [byte] of a CAM without (False) and with (True) its low-frequency container, whose path history
    has ``path_points`` points with their delta time (the ITS-G5 model's codec, with neutral field values: the
    encoding's size does not depend on them)."""
    codec = CamCodec()
    fields = {"latitude": 0, "longitude": 0, "heading": 0, "speed": 0, "drive_direction": 0,
              "longitudinal_acceleration": 0, "yaw_rate": 0, "curvature": 0, "curvature_calculation_mode": 0}
    history = [(0, 0, 0)] * path_points
    return {lf: len(codec.encode(build_cam(0, station_type, 0, fields, lf, history))) for lf in (False, True)}


def _member(values: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """``np.isin(values, sorted_keys)`` for sorted unique keys (a binary search, no hashing per call)."""
    if len(sorted_keys) == 0:
        return np.zeros(len(values), bool)
    at = np.minimum(np.searchsorted(sorted_keys, values), len(sorted_keys) - 1)
    return sorted_keys[at] == values


class Cv2xChannel(CommsModel):
    """CAMs over an LTE-V2X mode 4 sidelink (see the module docstring)."""

    Params: ClassVar[type[Cv2xParams]] = Cv2xParams
    logs_every_transmission: ClassVar[bool] = True
    log_port = CV2X_LOG

    def __init__(self, params: Mapping[str, Any], seed: int, out_dir: Any = None) -> None:
        super().__init__(params, seed, out_dir)
        cfg = Cv2xParams.model_validate(dict(params))
        self.cfg = cfg
        self.log = Cv2xLog()
        self.prop = Propagation(cfg.propagation, cfg.phy.carrier_ghz, cfg.phy.tx_power_dbm,
                                purpose_key(seed, "cv2x", "shadowing"), purpose_key(seed, "cv2x", "fading"))
        self.link = Sidelink(cfg, seed, self.prop, self.log)
        self.generation = CamGeneration(cfg.generation)
        self.projection = LocalProjection(cfg.origin_lat_deg, cfg.origin_lon_deg)
        if cfg.packet_bytes is not None:
            self.packet_bytes = {False: cfg.packet_bytes, True: cfg.packet_bytes}
        else:  # the CAM's own size (the codec is compiled only then)
            extra = cfg.headers_bytes + cfg.security_bytes
            self.packet_bytes = {lf: n + extra for lf, n in cam_sizes(cfg.station_type,
                                                                      cfg.path_history_points).items()}
        self.carries_platooning_message = cfg.platooning_message
        # the PM's UPER size (no maneuver peer) with its own GeoNetworking/BTP headers and security envelope
        self.pm_bytes = (PmCodec().sizes()[False] + cfg.headers_bytes + cfg.security_bytes
                         if cfg.platooning_message and cfg.packet_bytes is None else 0)
        self.cert_ns = round(cfg.certificate_interval_s * 1e9)
        self.cert_last = np.empty(0, np.int64)  # per station: generation time of its last CAM with the certificate
        self.bytes_generated = self.messages_generated = 0
        self.tx_latency_key = purpose_key(seed, "cv2x", "tx_latency")
        self.rx_latency_key = purpose_key(seed, "cv2x", "rx_latency")
        self.pending: Deliveries = empty_deliveries()
        if cfg.platooning_message:
            self.pending["u_des"] = np.empty(0, np.float64)
        self._interest_keys = np.empty(0, np.int64)
        self._interest_src: Interest | None = None
        self._x = np.empty(0)
        self._subframes: list[Subframe] = []  # the step's subframes with transmissions, until ``_received``
        self._held_links = 0
        self._y = np.empty(0)

    # -- stations ------------------------------------------------------------------------------------------------
    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        """Append a station per robot; its CA service starts U[0, start_jitter_s) after its spawn time."""
        if not robots:
            return
        jitter_s = self.cfg.generation.start_jitter_s
        spawn_ns = np.asarray([spec.spawn_ns for spec in robots], np.int64)
        offsets = np.asarray(
            [round(stream(self.seed, "v2x", spec.id).uniform(0.0, jitter_s) * 1e9) if jitter_s > 0 else 0
             for spec in robots], np.int64)
        self.link.spawn(np.asarray([spec.id for spec in robots], np.int64), spawn_ns)
        self.generation.spawn(spawn_ns + offsets)
        self.cert_last = np.concatenate([self.cert_last, np.full(len(robots), _LONG_AGO, np.int64)])

    def despawn(self, robot_ids: Sequence[int]) -> None:
        """Remove stations; what they sent stays sensed, their waiting packets and receptions vanish."""
        gone = np.isin(self.link.ids, np.asarray(list(robot_ids), np.int64))
        if not gone.any():
            return
        removed = self.link.ids[gone]
        self.link.despawn(~gone)
        self.generation.despawn(~gone)
        self.cert_last = self.cert_last[~gone]
        alive = ~np.isin(self.pending["receiver"], removed)
        self.pending = {k: v[alive] for k, v in self.pending.items()}

    # -- the step ------------------------------------------------------------------------------------------------
    def step(self, t_ns: int, estimate: Mapping[str, np.ndarray], interest: Interest) -> Deliveries:
        """Advance the sidelink to ``t_ns``; return the receptions completed in (previous step, t_ns]."""
        ids = np.asarray(estimate["id"], np.int64)
        if len(ids) != len(self.link.ids) or not np.array_equal(ids, self.link.ids):
            raise ValueError(f"cv2x: estimate rows (ids {ids[:8].tolist()}...) do not match the spawned stations "
                             f"({self.link.ids[:8].tolist()}...); spawn/despawn every robot before stepping")
        t_ns = int(t_ns)
        x = np.ascontiguousarray(estimate["x"], np.float64)
        y = np.ascontiguousarray(estimate["y"], np.float64)
        self._x, self._y = x, y
        self._set_interest(interest)
        self.link.advance(-(-t_ns // self.link.ns_slot), x, y, self._hold)
        self._received()
        if len(ids):
            self._generate(t_ns, estimate, x, y)
        return self._release(t_ns)

    def _set_interest(self, interest: Interest) -> None:
        if interest is self._interest_src:
            return
        self._interest_src = interest
        self._interest_keys = np.unique((np.asarray(interest.receivers, np.int64) << 32)
                                        | np.asarray(interest.senders, np.int64))

    def _generate(self, t_ns: int, estimate: Mapping[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> None:
        yaw = np.asarray(estimate["yaw"], np.float64)
        v = np.asarray(estimate["v"], np.float64)
        t_dcc = np.zeros(len(x), np.int64)  # no congestion control: T_GenCam_DCC is T_GenCamMin
        send, with_lf = self.generation.check(t_ns, x, y, yaw, v, t_dcc)
        if not send.any():
            return
        rows = np.flatnonzero(send)
        self.log.triggers(t_ns, self.link.ids[rows], self.generation.last_condition[rows])
        k = len(rows)
        content = self._content(rows, estimate, x, y, yaw, v)
        gen = np.full(k, t_ns, np.int64)
        draws = KeyedDraws(self.tx_latency_key, self.link.ids[rows], None, gen)
        arrival = t_ns + np.round(self.cfg.latency.tx_processing.draw(draws, k) * 1e9).astype(np.int64)
        size = np.where(with_lf[rows], self.packet_bytes[True], self.packet_bytes[False]) + self.pm_bytes
        if self.cfg.certificate_bytes and self.cfg.packet_bytes is None:
            cert = t_ns - self.cert_last[rows] >= self.cert_ns  # the first CAM too (cert_last starts long ago)
            self.cert_last[rows[cert]] = t_ns
            size = size + np.where(cert, self.cfg.certificate_bytes, 0)
        self.bytes_generated += int(size.sum())
        self.messages_generated += k
        self.link.queue(t_ns, rows, gen, arrival, size, content)

    def _content(self, rows: np.ndarray, estimate: Mapping[str, np.ndarray], x: np.ndarray, y: np.ndarray,
                 yaw: np.ndarray, v: np.ndarray) -> np.ndarray:
        """What receivers decode of the CAMs of ``rows``: the SI values through WGS84 and the CAM's quantisation."""
        _, q = cam_content(self.projection, {
            "x": x[rows], "y": y[rows], "yaw": yaw[rows], "v": v[rows],
            "a": np.asarray(estimate["a"], np.float64)[rows],
            "yaw_rate": np.asarray(estimate["yaw_rate"], np.float64)[rows]})
        u_des = np.full(len(rows), np.nan)
        if self.carries_platooning_message and "u_des" in estimate:
            # the PM's DesiredAcceleration: 0.01 m/s^2, clamped to +-16 m/s^2, NaN "unavailable" (platooning.py)
            u = np.asarray(estimate["u_des"], np.float64)[rows]
            limit = ACCEL_MAX / 100.0
            u_des = np.where(np.isnan(u), np.nan, np.rint(np.clip(np.nan_to_num(u), -limit, limit) * 100.0) / 100.0)
        return np.column_stack([q["x"], q["y"], q["yaw"], q["v"], q["a"], q["yaw_rate"], u_des])

    def _hold(self, sub: Subframe) -> None:
        """A subframe's links wait for the end of the step (``_received``); their rows keep their place in the log."""
        self._subframes.append(sub)
        self.log.hold_receptions()
        self._held_links += len(sub.links.tx)
        if self._held_links > HELD_LINKS:  # a dense step: resolve what is held, its temporaries stay small
            self._received()

    def _received(self) -> None:
        """Log the links of the step's subframes and hold the deliveries among them (one pass for all)."""
        subs, self._subframes, self._held_links = self._subframes, [], 0
        if not subs:
            return
        counts = np.array([len(sub.links.tx) for sub in subs], np.int64)
        offsets = np.cumsum([0] + [len(sub.txs.sender) for sub in subs[:-1]])
        tx = np.concatenate([sub.links.tx + off for sub, off in zip(subs, offsets.tolist(), strict=True)])
        rx = np.concatenate([sub.links.rx for sub in subs])
        cause = np.concatenate([sub.links.cause for sub in subs])
        sender = np.concatenate([sub.txs.sender for sub in subs])[tx]
        rows = np.concatenate([sub.txs.row for sub in subs])[tx]
        gen = np.concatenate([sub.generated_ns for sub in subs])[tx]
        link_sf = np.concatenate([sub.link_sf for sub in subs])
        receiver = self.link.ids[rx]
        interest = _member((receiver << 32) | sender, self._interest_keys)
        ok = cause == RECEIVED
        n = len(sender)
        record = np.ones(n, bool) if self.cfg.trace == "all" else interest
        # receive processing and propagation delays, drawn only for what is logged or delivered
        timed = ok & (record | (self.cfg.deliver == "all"))
        delay = np.zeros(n, np.int64)
        if timed.any():
            draws = KeyedDraws(self.rx_latency_key, sender[timed], receiver[timed], gen[timed])
            d = np.hypot(self._x[rx[timed]] - self._x[rows[timed]], self._y[rx[timed]] - self._y[rows[timed]])
            delay[timed] = np.round(self.cfg.latency.rx_processing.draw(draws, int(timed.sum())) * 1e9
                                    + d / SPEED_OF_LIGHT_MPS * 1e9).astype(np.int64)
        t_rx = (link_sf + 1) * self.link.ns_slot + delay
        self.log.receptions(cause, interest, record, t_rx, sender, receiver, gen,
                            np.concatenate([sub.links.power_dbm for sub in subs]), link_sf,
                            np.concatenate([sub.txs.x0 for sub in subs])[tx],
                            np.concatenate([sub.txs.length for sub in subs])[tx], counts)
        deliver = ok if self.cfg.deliver == "all" else ok & interest
        if deliver.any():
            content = np.concatenate([sub.content for sub in subs])[tx[deliver]]
            new = {"receiver": receiver[deliver], "sender": sender[deliver], "generated_ns": gen[deliver],
                   "received_ns": t_rx[deliver]}
            for c, name in enumerate(CAM_CONTENT):
                new[name] = content[:, c]
            if self.carries_platooning_message:
                new["u_des"] = content[:, PM_COLUMN]
            self.pending = {name: np.concatenate([self.pending[name], new[name]]) for name in self.pending}

    def _release(self, t_ns: int) -> Deliveries:
        pending = self.pending
        due = pending["received_ns"] <= t_ns
        if not due.any():
            return empty_deliveries()
        order = np.argsort(pending["received_ns"][due], kind="stable")
        out = {name: col[due][order] for name, col in pending.items()}
        self.pending = {name: col[~due] for name, col in pending.items()}
        return out

    # -- outputs ------------------------------------------------------------------------------------------------------
    @property
    def keep_log(self) -> bool:  # type: ignore[override]
        """Whether the log keeps rows (``CommsModel.keep_log``); its counts are kept either way."""
        return self.log.keep

    @keep_log.setter
    def keep_log(self, value: bool) -> None:
        self.log.keep = value

    def drain_records(self) -> dict[str, np.ndarray]:
        """Every transmission (its resource and reselection cause) and the traced receptions (their loss cause)
        since the last call: the ``v2x`` columns and ``log.CV2X_COLUMNS``."""
        return self.log.drain_records()

    def drain_load(self) -> dict[str, np.ndarray]:
        """Each station's CBR per window since the last call."""
        return self.log.drain_load()

    def drain_triggers(self) -> dict[str, np.ndarray]:
        """Each CAM generated since the last call and the rule that triggered it."""
        return self.log.drain_triggers()

    def metrics(self) -> dict[str, Any]:
        """The log's counts (``Cv2xLog.summary``), the message sizes and the resource grid."""
        phy, cfg = self.cfg.phy, self.cfg
        mean = self.bytes_generated / self.messages_generated if self.messages_generated else math.nan
        return {**self.log.summary(), "packet_bytes": {"hf": self.packet_bytes[False], "lf": self.packet_bytes[True]},
                "packet_bytes_mean": mean,
                "subchannels": cfg.n_subchannels, "subchannel_rbs": phy.subchannel_rbs, "mcs": phy.mcs,
                "extra_log_columns": list(CV2X_COLUMNS),
                **({"pm_bytes": self.pm_bytes} if cfg.platooning_message else {})}
