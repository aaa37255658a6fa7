"""The platooning message service of the ITS-G5 model: each station's PM every ``1 / rate_hz`` through the same
queue, medium and DCC as its CAMs (``pm.PmSchedule``, the leader whose desired acceleration it relays, the content
quantised as on the wire), and the PM fields merged into the deliveries (``pm.PmReceptions``)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from core.rng import KeyedDraws, purpose_key

from ..attacks.plan import AttackPlan
from . import access_layout as ax
from .dcc import Dcc
from .geo import LocalProjection
from .log import ChannelLog
from .medium import Medium
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
    pm_quantised,
)
from .quantise import to_etsi
from .radio import airtime_ns
from .wire import CamWire


class PmService:
    """PM generation and reception state, one row per station (rows in spawn order); built only when the channel's
    ``platooning_message`` is set. A PM's draws use the CAM's events under their own purposes ("pm_mac", ...), so a
    CAM and a PM generated at the same instant are independent."""

    def __init__(self, cfg: ItsG5Params, seed: int, wire: CamWire, log: ChannelLog, dcc: Dcc,
                 projection: LocalProjection) -> None:
        pm = cfg.platooning_message
        assert pm is not None
        self.cfg, self.wire, self.log, self.dcc, self.projection = cfg, wire, log, dcc, projection
        self.mac_key = purpose_key(seed, "v2x", "pm_mac")
        self.tx_latency_key = purpose_key(seed, "v2x", "pm_tx_latency")
        self.rx_latency_key = purpose_key(seed, "v2x", "pm_rx_latency")
        self.frame_bytes = {peer: frame_length_80211(n, cfg.security_bytes) for peer, n in wire.pm_bytes.items()}
        self.airtime_ns = {peer: airtime_ns(n) for peer, n in self.frame_bytes.items()}
        self.schedule = PmSchedule(pm.rate_hz)
        self.rx = PmReceptions(pm.max_age_s)
        self.last_admitted = np.empty(0, np.int64)  # per station: generation time of its last PM let through
        self.columns: tuple[str, ...] = ()  # the platooning columns the estimate has (and deliveries carry)
        self.leader_of = np.empty(0, np.int64)  # per station: its leader's id by the interest (pm.interest_leaders)
        self.forger: AttackPlan | None = None  # the run's attacks (``ItsG5Channel.attach_attacks``), if any
        log.enable_pm()

    def spawn(self, first_ns: np.ndarray) -> None:
        """Stations whose PM service starts at ``first_ns`` (with their CA service)."""
        self.last_admitted = np.concatenate([self.last_admitted, np.full(len(first_ns), -1, np.int64)])
        self.schedule.spawn(first_ns)

    def despawn(self, keep: np.ndarray, removed_ids: np.ndarray) -> None:
        """Keep the rows where ``keep`` is True; forget what was received from or by ``removed_ids``."""
        self.last_admitted = self.last_admitted[keep]
        self.schedule.despawn(keep)
        self.rx.forget(removed_ids)

    def listen(self, ids: np.ndarray, s_rows: np.ndarray, r_rows: np.ndarray) -> None:
        """Take the interest pairs (sender, receiver rows) as who follows whom."""
        self.leader_of = interest_leaders(ids, s_rows, r_rows)

    def generate(self, t_ns: int, medium: Medium, estimate: Mapping[str, np.ndarray], x: np.ndarray, y: np.ndarray,
                 yaw: np.ndarray, v: np.ndarray) -> None:
        """The PMs due at ``t_ns``: same DCC gatekeeper as fixed-rate CAMs, on their own flow (a PM closer than T_off
        to the station's previous PM is dropped), same queue and medium."""
        self.columns = delivered_columns(estimate)
        send = self.schedule.due(t_ns)
        if not send.any():
            return
        ids = medium.ids
        if self.cfg.dcc.mode != "off":
            t_off = self.dcc.t_off_ns(self.airtime_ns[False])
            last = self.last_admitted
            blocked = send & (last >= 0) & (t_ns - last < t_off)
            if blocked.any():
                self.log.dropped(t_ns, ids[blocked], np.full(int(blocked.sum()), t_ns, np.int64), pm=True)
                send &= ~blocked
                if not send.any():
                    return
        rows = np.flatnonzero(send)
        self.last_admitted[rows] = t_ns
        self._enqueue(t_ns, medium, rows, estimate, x, y, yaw, v)

    def _leader_u_des(self, t_ns: int, estimate: Mapping[str, np.ndarray], ids: np.ndarray,
                      rows: np.ndarray) -> np.ndarray:
        """The leader's desired acceleration: a leader's own, else the newest one received from the leader."""
        desired = estimate.get("u_des")
        own = np.asarray(desired, np.float64)[rows] if desired is not None else np.full(len(rows), np.nan)
        leader = platoon_leaders(estimate, ids, rows, self.leader_of[rows])
        relayed = self.rx.newest_u_des(ids[rows], np.maximum(leader, 0), t_ns)
        return np.where(leader == -1, own, np.where(leader >= 0, relayed, np.nan))

    def _enqueue(self, t_ns: int, medium: Medium, rows: np.ndarray, estimate: Mapping[str, np.ndarray],
                 x: np.ndarray, y: np.ndarray, yaw: np.ndarray, v: np.ndarray) -> None:
        k = len(rows)
        senders = medium.ids[rows]
        frames = medium.new_frames(k)
        claimed = senders
        labels = np.zeros(k, np.int64)
        if self.forger is not None and estimate.get("u_des") is not None:
            # after the facilities, before the encoder: the attacks forge the sender's own desired acceleration (a
            # leader's is also the one it relays)
            own = np.array(estimate["u_des"], np.float64)
            own[rows], labels = self.forger.forge_pm(t_ns, senders, own[rows])
            estimate = {**estimate, "u_des": own}
        si_vals, content = pm_content(estimate, rows, self._leader_u_des(t_ns, estimate, medium.ids, rows))
        if self.forger is not None:  # then the attacks on the other fields (a forged leader, maneuver request)
            forged, labels, claimed = self.forger.forge_pm_fields(t_ns, senders, si_vals, labels)
            if forged is not si_vals:
                si_vals, content = forged, pm_quantised(forged)
            self.forger.mark(frames, labels, claimed)
        with_peer = np.isfinite(content[:, PM_CONTENT.index("maneuver_peer")])
        gen = np.full(k, t_ns, np.int64)
        ready = t_ns + np.round(self.cfg.latency.tx_processing.draw(
            KeyedDraws(self.tx_latency_key, senders, None, gen), k) * 1e9).astype(np.int64)
        backoff = KeyedDraws(self.mac_key, senders, None, gen).integers(0, self.cfg.mac.cw + 1, size=k)
        air = np.where(with_peer, self.airtime_ns[True], self.airtime_ns[False])
        medium.queue(t_ns, rows, ax.KIND_PM, frames, ready, backoff, air, np.zeros(k, bool), content)
        sizes = np.where(with_peer, self.wire.pm_bytes.get(True, 0), self.wire.pm_bytes.get(False, 0))

        def position(picked: np.ndarray) -> dict[str, np.ndarray]:
            # the GeoNetworking header's position vector, only for the PMs the wire encodes
            lat, lon = self.projection.to_geodetic(x[rows[picked]], y[rows[picked]])
            return to_etsi({"lat_deg": lat, "lon_deg": lon, "yaw": yaw[rows[picked]], "v": v[rows[picked]]})

        self.wire.encode_pm(t_ns, claimed, frames, si_vals, position, sizes)

    def deliveries(self, due: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The receptions ``due`` (arrival order) as deliveries with the platooning columns (``PmReceptions.merge``)."""
        return self.rx.merge(due, self.columns)

    def no_deliveries(self) -> dict[str, np.ndarray]:
        """A delivery table with no rows and the platooning columns."""
        return empty_pm_deliveries(self.columns)
