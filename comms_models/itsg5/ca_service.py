"""The CA basic service of the ITS-G5 model (EN 302 637-2): when each station generates a CAM (the rules of
``generation.CamGeneration``, and the DCC gatekeeper of the fixed-rate mode), what it carries (the vehicle's belief,
in WGS84 and quantised as the codec would) and how it reaches the medium's queue (transmit processing delay,
backoff, airtime of the frame with or without the low-frequency container)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from core.rng import KeyedDraws, purpose_key

from ..attacks.plan import AttackPlan
from . import access_layout as ax
from .dcc import Dcc
from .generation import CamGeneration
from .geo import LocalProjection
from .log import ChannelLog
from .medium import Medium
from .params import ItsG5Params
from .pcap import frame_length_80211
from .quantise import quantise_si
from .radio import airtime_ns
from .wire import CamWire

CAM_CONTENT = ("x", "y", "yaw", "v", "a", "yaw_rate")
"""The state a CAM carries, in the order of the access layer's content columns."""
_CURVATURE_MIN_SPEED_MPS = 0.1  # below this, yaw_rate / v is meaningless: curvature sent as unavailable


class CaService:
    """CAM generation and the CAM path to the medium, one row per station (rows in spawn order)."""

    def __init__(self, cfg: ItsG5Params, seed: int, wire: CamWire, log: ChannelLog, dcc: Dcc,
                 projection: LocalProjection) -> None:
        self.cfg, self.wire, self.log, self.dcc, self.projection = cfg, wire, log, dcc, projection
        self.generation = CamGeneration(cfg.generation)
        # every draw is keyed by its event (sender, receiver, generation time): see core.rng.KeyedDraws
        self.mac_key = purpose_key(seed, "v2x", "mac")
        self.tx_latency_key = purpose_key(seed, "v2x", "tx_latency")
        self.rx_latency_key = purpose_key(seed, "v2x", "rx_latency")
        self.cam_bytes = wire.cam_bytes
        self.frame_bytes = {lf: frame_length_80211(n, cfg.security_bytes) for lf, n in self.cam_bytes.items()}
        self.airtime_ns = {lf: airtime_ns(n) for lf, n in self.frame_bytes.items()}
        self.last_admitted = np.empty(0, np.int64)  # per station: generation time of its last CAM let through
        self.forger: AttackPlan | None = None  # the run's attacks (``ItsG5Channel.attach_attacks``), if any

    def spawn(self, first_ns: np.ndarray) -> None:
        """Stations whose CA service starts at ``first_ns``."""
        self.last_admitted = np.concatenate([self.last_admitted, np.full(len(first_ns), -1, np.int64)])
        self.generation.spawn(first_ns)

    def despawn(self, keep: np.ndarray) -> None:
        """Keep the rows where ``keep`` is True."""
        self.last_admitted = self.last_admitted[keep]
        self.generation.despawn(keep)

    def generate(self, t_ns: int, medium: Medium, estimate: Mapping[str, np.ndarray], x: np.ndarray, y: np.ndarray,
                 yaw: np.ndarray, v: np.ndarray) -> None:
        """The CAMs the rules trigger at ``t_ns``, queued on ``medium`` (those the gatekeeper lets through)."""
        ids = medium.ids
        t_off = self.dcc.t_off_ns(self.airtime_ns[False])
        send, with_lf = self.generation.check(t_ns, x, y, yaw, v, t_off)
        # an attacker's added frames (raised rate, ghost) ignore the rules and DCC
        extra = self.forger.extra_cams(t_ns, ids, send) if self.forger is not None else None
        if extra is not None and extra.any():
            self._generate_with(t_ns, medium, estimate, x, y, yaw, v, t_off, send, with_lf, extra)
            return
        if not send.any():
            return
        self.log.triggers(t_ns, ids[send], self.generation.last_condition[send])
        send = self._gatekeeper(t_ns, ids, send, t_off)
        if not send.any():
            return
        rows = np.flatnonzero(send)
        self.last_admitted[rows] = t_ns
        self._enqueue(t_ns, medium, rows, with_lf[rows], estimate, x, y, yaw, v)

    def _gatekeeper(self, t_ns: int, ids: np.ndarray, send: np.ndarray, t_off: np.ndarray) -> np.ndarray:
        """``send`` without the CAMs the fixed-rate mode's DCC gatekeeper drops (logged)."""
        if self.cfg.generation.mode == "fixed_rate" and self.cfg.dcc.mode != "off":
            # DCC gatekeeper (TS 102 687): the application ignores DCC, so frames too close are dropped.
            last = self.last_admitted
            blocked = send & (last >= 0) & (t_ns - last < t_off)
            if blocked.any():
                self.log.dropped(t_ns, ids[blocked], np.full(int(blocked.sum()), t_ns, np.int64))
                send &= ~blocked
        return send

    def _generate_with(self, t_ns: int, medium: Medium, estimate: Mapping[str, np.ndarray], x: np.ndarray,
                       y: np.ndarray, yaw: np.ndarray, v: np.ndarray, t_off: np.ndarray, send: np.ndarray,
                       with_lf: np.ndarray, extra: np.ndarray) -> None:
        """``generate`` at an instant where attackers add frames (``extra``, without the low-frequency container)."""
        ids = medium.ids
        if send.any():
            self.log.triggers(t_ns, ids[send], self.generation.last_condition[send])
            send = self._gatekeeper(t_ns, ids, send, t_off)
        self.last_admitted[send] = t_ns
        rows = np.flatnonzero(send | extra)
        self._enqueue(t_ns, medium, rows, with_lf[rows] & ~extra[rows], estimate, x, y, yaw, v, extra[rows])

    def content(self, rows: np.ndarray, estimate: Mapping[str, np.ndarray], x: np.ndarray, y: np.ndarray,
                yaw: np.ndarray, v: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """SI values of the CAMs of ``rows`` and the quantised local-frame values receivers decode."""
        return self.content_of({"x": x[rows], "y": y[rows], "yaw": yaw[rows], "v": v[rows],
                                "a": np.asarray(estimate["a"], np.float64)[rows],
                                "yaw_rate": np.asarray(estimate["yaw_rate"], np.float64)[rows]})

    def content_of(self, values: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """``content`` of CAMs given as local-frame SI values (``CAM_CONTENT`` columns, one row per CAM)."""
        return cam_content(self.projection, values)

    def _enqueue(self, t_ns: int, medium: Medium, rows: np.ndarray, with_lf: np.ndarray,
                 estimate: Mapping[str, np.ndarray], x: np.ndarray, y: np.ndarray, yaw: np.ndarray,
                 v: np.ndarray, extra: np.ndarray | None = None) -> None:
        k = len(rows)
        frames = medium.new_frames(k)
        senders = medium.ids[rows]
        claimed, claimed_gen = senders, None
        if self.forger is None:
            si_vals, content = self.content(rows, estimate, x, y, yaw, v)
        else:  # after the facilities, before the encoder: the attacks forge what the station sends
            honest = {"x": x[rows], "y": y[rows], "yaw": yaw[rows], "v": v[rows],
                      "a": np.asarray(estimate["a"], np.float64)[rows],
                      "yaw_rate": np.asarray(estimate["yaw_rate"], np.float64)[rows], "lf": with_lf}
            forged, labels, claimed, claimed_gen = self.forger.forge_cam(
                t_ns, senders, np.zeros(k, bool) if extra is None else extra, honest)
            self.forger.mark(frames, labels, claimed, claimed_gen)
            with_lf = forged["lf"]  # a replay carries the containers of the replayed CAM
            si_vals, content = self.content_of(forged)
        gen = np.full(k, t_ns, np.int64)
        tx_draws = KeyedDraws(self.tx_latency_key, senders, None, gen)
        ready = t_ns + np.round(self.cfg.latency.tx_processing.draw(tx_draws, k) * 1e9).astype(np.int64)
        backoff = KeyedDraws(self.mac_key, senders, None, gen).integers(0, self.cfg.mac.cw + 1, size=k)
        air = np.where(with_lf, self.airtime_ns[True], self.airtime_ns[False])
        medium.queue(t_ns, rows, ax.KIND_CAM, frames, ready, backoff, air, with_lf,
                     np.column_stack([content[name] for name in CAM_CONTENT]))
        self.wire.encode(t_ns, claimed, frames, with_lf, si_vals, claimed_gen)


def cam_content(projection: LocalProjection, values: Mapping[str, np.ndarray]
                ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The SI values of CAMs given as local-frame SI values (``x``, ``y``, ``yaw``, ``v``, ``a``, ``yaw_rate``; one
    row per CAM) and the quantised local-frame values a receiver decodes: through WGS84 and the CAM's units, as
    any access layer carries them."""
    lat, lon = projection.to_geodetic(values["x"], values["y"])
    vv = values["v"]
    yaw_rate = values["yaw_rate"]
    moving = np.abs(vv) >= _CURVATURE_MIN_SPEED_MPS
    curvature = np.where(moving, yaw_rate / np.where(moving, vv, 1.0), np.nan)
    si = {"lat_deg": lat, "lon_deg": lon, "yaw": values["yaw"], "v": vv,
          "a": values["a"], "yaw_rate": yaw_rate, "curvature": curvature}
    q = quantise_si(si)
    qx, qy = projection.to_local(q["lat_deg"], q["lon_deg"])
    return si, {"x": qx, "y": qy, "yaw": q["yaw"], "v": q["v"], "a": q["a"], "yaw_rate": q["yaw_rate"]}
