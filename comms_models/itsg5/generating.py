"""What the stations generate at an instant and how it enters their queues: the CAMs by the generation rules
(and the DCC gatekeeper of the fixed-rate mode), the platooning messages at their rate, their content in SI, and
the one-frame-per-kind queues of the access layer (a mixin of ``model.ItsG5Channel``: it works on the channel's
per-station arrays)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from core.rng import KeyedDraws

from . import access as ax
from .pm import (
    PM_CONTENT,
    delivered_columns,
    platoon_leaders,
    pm_content,
)
from .quantise import quantise_si, to_etsi

CAM_CONTENT = ("x", "y", "yaw", "v", "a", "yaw_rate")
"""The state a CAM carries, in the order of the access layer's content columns."""
_CURVATURE_MIN_SPEED_MPS = 0.1  # below this, yaw_rate / v is meaningless: curvature sent as unavailable


class Generation:
    """Message generation and queueing of ``ItsG5Channel``."""

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
                    np.column_stack([content[name] for name in CAM_CONTENT]))
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
        si[h, ax.S_START] = starts = np.where(idle, anchor + backoff[head] * self._slot_ns, ax.INF_NS)
        if len(starts):  # the medium has to run again by the earliest of them
            self._ctr[ax.C_NEXT] = min(int(self._ctr[ax.C_NEXT]), int(starts.min()))
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
