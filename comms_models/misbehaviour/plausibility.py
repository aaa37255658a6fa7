"""The default detector: the F2MD plausibility checks (``checks``) on every message a station receives, fused by
counting (a message is misbehaving when at least ``min_failed`` of the enabled checks fail)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from pydantic import Field, field_validator

from . import checks as ck
from . import kernels as kn
from .base import Detector, DetectorParams
from .history import PairHistory, pair_keys
from .kalman import KalmanParams, KalmanTracks, cam_residuals
from .roles import MAX_TRACK_AGE_S, ROLE_COLUMNS


class PlausibilityParams(DetectorParams):
    """Thresholds of the checks (defaults: loose enough for an honest run of the shipped scenarios)."""

    checks: list[str] = Field(default_factory=lambda: list(ck.DEFAULT_CHECKS), description="the checks to run "
                              "(default: all but kalman)")
    min_failed: int = Field(1, ge=1, le=len(ck.CHECKS), description="fusion: a message is misbehaving when at least "
                            "this many checks fail")
    max_range_m: float = Field(1000.0, gt=0, description="[m] acceptance range: farthest plausible sender")
    max_speed_mps: float = Field(70.0, gt=0, description="[m/s] highest plausible speed")
    max_reverse_mps: float = Field(5.0, ge=0, description="[m/s] highest plausible reverse speed")
    max_accel_mps2: float = Field(10.0, gt=0, description="[m/s^2] largest plausible acceleration or braking")
    position_tol_m: float = Field(1.0, ge=0, description="[m] slack of the position consistency check")
    speed_tol_mps: float = Field(0.5, ge=0, description="[m/s] slack of the speed consistency check")
    position_speed_tol_m: float = Field(0.5, ge=0, description="[m] slack of the position-speed check ...")
    position_speed_tol_mps: float = Field(1.0, ge=0, description="[m/s] ... plus this much per second between the "
                                          "two messages")
    max_gap_s: float = Field(3.0, gt=0, description="[s] position, speed and position-speed consistency compare "
                             "two CAMs of a sender at most this far apart (a longer silence: no verdict)")
    min_interval_s: float | None = Field(None, ge=0, description="[s] beacon frequency: shortest honest gap between "
                                         "two CAMs of a sender (default: the channel's)")
    warmup_s: float = Field(2.0, ge=0, description="[s] sudden appearance: a receiver listens this long first")
    appearance_range_m: float = Field(50.0, gt=0, description="[m] sudden appearance: a new sender this close")
    sensor_tol_m: float = Field(1.0, ge=0, description="[m] sensor overlap: slack between the claimed and the "
                                "measured range (plus the sender's speed times the message's age and 0.1 s)")
    accel_tol_mps2: float = Field(1.5, gt=0, description="[m/s^2] desired acceleration: largest plausible gap between "
                                  "a platooning message's desired acceleration and the sender's measured one ...")
    # ISO 15622 (ACC) bounds an automatic jerk at 2.5 m/s^3 averaged over 1 s; a command leads the acceleration
    # by the actuator's lag (``checks.desired_accel``)
    max_jerk_mps3: float = Field(2.5, ge=0, description="[m/s^3] ... plus this much per second between the measured "
                                 "acceleration's CAM and the message")
    max_age_s: float = Field(0.5, gt=0, description="[s] freshness: oldest plausible CAM at its reception (an "
                             "honest one waits for the medium and DCC at most a few hundred ms)")
    max_future_s: float = Field(0.01, ge=0, description="[s] freshness: a CAM generated this long after its "
                                "reception is from the future")
    leader_tol_m: float = Field(5.0, gt=0, description="[m] leader consistency: farthest a message under the "
                                "leader's id may come from where the leader's last CAM puts it")
    kalman: KalmanParams = Field(default_factory=KalmanParams, description="the Kalman residual check's noise and "
                                 "gate (when kalman is in checks)")

    @field_validator("checks")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in ck.CHECKS]
        if unknown:
            raise ValueError(f"unknown check(s) {', '.join(unknown)}; known: {', '.join(ck.CHECKS)}")
        return value


class PlausibilityDetector(Detector):
    """Plausibility checks per message, every receiving station at once (see the module docstring)."""

    Params = PlausibilityParams

    def __init__(self, params: PlausibilityParams, min_interval_s: float) -> None:
        super().__init__(params, min_interval_s)
        self.p = params
        self.enabled = sum(ck.bit(name) for name in params.checks)
        self.history = PairHistory()
        self.tracks = KalmanTracks(params.kalman) if "kalman" in params.checks else None
        self._thresholds = self.thresholds()
        # the rows of ids in the estimate, the stations spawned and the range sensor: each roster sorted once
        self._own_rows, self._station_rows, self._sensor_rows = RowIndex(), RowIndex(), RowIndex()
        self.ids = np.empty(0, np.int64)  # stations: spawn time, bumpers ahead of / behind the rear axle
        self.spawn_ns = np.empty(0, np.int64)
        self.front_m = np.empty(0)
        self.rear_m = np.empty(0)
        self._read_keys = np.empty(0, np.int64)  # pairs a channel delivers only while read (sorted keys) ...
        self._read_since = np.empty(0, np.int64)  # ... and since when [ns]

    def listen(self, t_ns: int, receivers: np.ndarray, senders: np.ndarray) -> None:
        keys = np.unique(pair_keys(receivers, senders))
        at = np.minimum(np.searchsorted(self._read_keys, keys), max(len(self._read_keys) - 1, 0))
        kept = self._read_keys[at] == keys if len(self._read_keys) else np.zeros(len(keys), bool)
        since = np.where(kept, self._read_since[at] if len(self._read_keys) else 0, t_ns)
        self._read_keys, self._read_since = keys, since.astype(np.int64)

    def spawn(self, ids: np.ndarray, spawn_ns: np.ndarray, front_m: np.ndarray, rear_m: np.ndarray) -> None:
        self.ids = np.concatenate([self.ids, ids])
        self.spawn_ns = np.concatenate([self.spawn_ns, spawn_ns])
        self.front_m = np.concatenate([self.front_m, front_m])
        self.rear_m = np.concatenate([self.rear_m, rear_m])

    def despawn(self, ids: np.ndarray) -> None:
        keep = ~np.isin(self.ids, ids)
        self.ids, self.spawn_ns = self.ids[keep], self.spawn_ns[keep]
        self.front_m, self.rear_m = self.front_m[keep], self.rear_m[keep]
        self.history.forget(ids)
        if self.tracks is not None:
            self.tracks.forget(ids)

    def thresholds(self) -> np.ndarray:
        """The checks' thresholds in the order the kernels take them (``kernels.P_*``)."""
        p = self.p
        t = np.empty(kn.N_THRESHOLDS)
        t[kn.P_MAX_RANGE], t[kn.P_MAX_SPEED], t[kn.P_MAX_REVERSE] = p.max_range_m, p.max_speed_mps, p.max_reverse_mps
        t[kn.P_MAX_ACCEL], t[kn.P_POS_TOL], t[kn.P_SPEED_TOL] = p.max_accel_mps2, p.position_tol_m, p.speed_tol_mps
        t[kn.P_PS_TOL_M], t[kn.P_PS_TOL_MPS] = p.position_speed_tol_m, p.position_speed_tol_mps
        t[kn.P_MIN_GAP] = self.min_interval_s if p.min_interval_s is None else p.min_interval_s
        t[kn.P_WARMUP], t[kn.P_APPEAR], t[kn.P_SENSOR_TOL] = p.warmup_s, p.appearance_range_m, p.sensor_tol_m
        t[kn.P_ACCEL_TOL], t[kn.P_MAX_AGE], t[kn.P_MAX_FUTURE] = p.accel_tol_mps2, p.max_age_s, p.max_future_s
        t[kn.P_LEADER_TOL], t[kn.P_TRACK_AGE] = p.leader_tol_m, MAX_TRACK_AGE_S
        t[kn.P_MAX_JERK], t[kn.P_MAX_GAP] = p.max_jerk_mps3, p.max_gap_s
        return t

    def judge(self, t_ns: int, messages: Mapping[str, np.ndarray], own: Mapping[str, np.ndarray],
              sensor: Mapping[str, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
        n = len(messages["receiver"])
        mask = np.zeros(n, np.int64)
        if n == 0:
            return mask, np.zeros(0, bool)
        m = {name: np.asarray(col) for name, col in messages.items()}
        f = {name: np.ascontiguousarray(m[name], np.float64) for name in ("x", "y", "yaw", "v", "a")}
        u = m.get("u_des")
        u = np.full(n, np.nan) if u is None else np.ascontiguousarray(u, np.float64)
        has_kind = "kind" in m
        kind = np.ascontiguousarray(m["kind"], np.int64) if has_kind else np.zeros(n, np.int64)
        receiver, sender = np.asarray(m["receiver"], np.int64), np.asarray(m["sender"], np.int64)
        gen = np.ascontiguousarray(m["generated_ns"], np.int64)
        received = m.get("received_ns")  # (a judge fed by hand may leave it out: received now)
        received = np.full(n, t_ns, np.int64) if received is None else np.ascontiguousarray(received, np.int64)
        o_rows = self._own_rows(own["id"], receiver)
        own_cols = {c: np.ascontiguousarray(own[c], np.float64) for c in ("x", "y", "yaw")}
        r_rows, s_rows = np.split(self._station_rows(self.ids, np.concatenate([receiver, sender])), 2)
        front = np.where(r_rows >= 0, self.front_m[np.maximum(r_rows, 0)] if len(self.ids) else np.nan, np.nan)
        rear = np.where(s_rows >= 0, self.rear_m[np.maximum(s_rows, 0)] if len(self.ids) else np.nan, np.nan)
        p = self._thresholds
        distance = np.empty(n)
        kn.per_message(np.int64(t_ns), kind, has_kind, f["x"], f["y"], f["yaw"], f["v"], f["a"], u, gen, o_rows,
                       own_cols["x"], own_cols["y"], own_cols["yaw"], self._measured(receiver, sender, sensor), front,
                       rear, p, distance, mask)
        cam = np.flatnonzero(kind == 0)
        keys = pair_keys(receiver, sender)
        if len(cam):
            since = np.where(r_rows >= 0, self.spawn_ns[np.maximum(r_rows, 0)] if len(self.ids) else t_ns, t_ns)
            if len(self._read_keys):  # a pair the applications read: heard since they began to read it
                at = np.minimum(np.searchsorted(self._read_keys, keys), len(self._read_keys) - 1)
                since = np.where(self._read_keys[at] == keys, np.maximum(since, self._read_since[at]), since)
            self._against_history(cam, keys, gen, received, f, distance, (t_ns - since) / 1e9, p, mask)
        pm = np.flatnonzero(np.isfinite(u) & (kind == 1 if has_kind else True))
        if len(pm):
            h = self.history
            kn.desired(pm, keys, received, u, f["a"], h.keys, h.cols["gen"], p, mask)
        if has_kind and self.enabled & (ck.bit("leader_consistency") | ck.bit("maneuver_entitlement")):
            self._roles(np.flatnonzero(kind == 1), m, receiver, sender, received, own, o_rows, p, mask)
        if self.tracks is not None:
            mask |= np.where(cam_residuals(self.tracks, m), ck.bit("kalman"), 0)
        mask &= self.enabled
        return mask, np.bitwise_count(mask) >= self.p.min_failed

    def _against_history(self, cam: np.ndarray, keys: np.ndarray, gen: np.ndarray, received: np.ndarray,
                         f: Mapping[str, np.ndarray], distance: np.ndarray, listening: np.ndarray, p: np.ndarray,
                         mask: np.ndarray) -> None:
        """The checks that compare a CAM with the previous one of its pair (within the step, or held before), then
        the newest CAM of each pair held (``kernels.against_history``)."""
        order = cam[np.lexsort((gen[cam], keys[cam]))]
        h, new = self.history, np.zeros(len(keys), np.bool_)
        kn.against_history(order, keys, gen, received, f["x"], f["y"], f["yaw"], f["v"], distance,
                           np.ascontiguousarray(listening, np.float64), h.keys, h.cols["gen"], h.cols["x"],
                           h.cols["y"], h.cols["yaw"], h.cols["v"], p, mask, new)
        if new.any():
            rows = np.flatnonzero(new)
            h.store(keys[rows], {"gen": gen[rows], **{name: f[name][rows] for name in ("x", "y", "yaw", "v")}})

    def _roles(self, rows: np.ndarray, m: Mapping[str, np.ndarray], receiver: np.ndarray, sender: np.ndarray,
               received: np.ndarray, own: Mapping[str, np.ndarray], o_rows: np.ndarray, p: np.ndarray,
               mask: np.ndarray) -> None:
        """``leader_consistency`` and ``maneuver_entitlement`` of the platooning messages ``rows``
        (``kernels.platoon_roles``; a channel that carries no platoon fields gives no verdict)."""
        if not len(rows) or "platoon_index" not in m:
            return
        n, k = len(receiver), len(own["id"])
        col = {name: np.ascontiguousarray(m[name], np.float64) if name in m else np.full(n, np.nan)
               for name in ("platoon_index", "platoon_id", "maneuver", "maneuver_peer", "gn_x", "gn_y")}
        role = {name: np.ascontiguousarray(own[name], np.float64) if name in own else np.full(k, np.nan)
                for name in ROLE_COLUMNS}
        h = self.history
        kn.platoon_roles(rows, receiver, sender, received, col["platoon_index"], col["platoon_id"], col["maneuver"],
                         col["maneuver_peer"], col["gn_x"], col["gn_y"], o_rows, role["predecessor"],
                         role["leader"], role["platoon_id"], role["platoon_index"], h.keys, h.cols["gen"],
                         h.cols["x"], h.cols["y"], h.cols["yaw"], h.cols["v"], p, mask)

    def _measured(self, receiver: np.ndarray, sender: np.ndarray, sensor: Mapping[str, np.ndarray] | None
                  ) -> np.ndarray:
        """Per message: the receiver's measured range to the sender (NaN where its range sensor does not track
        it)."""
        if sensor is None or not len(sensor["id"]):
            return np.full(len(receiver), np.nan)
        s_rows = self._sensor_rows(sensor["id"], receiver)
        at = np.maximum(s_rows, 0)
        tracked = (s_rows >= 0) & (np.asarray(sensor["target"], np.int64)[at] == sender)
        return np.where(tracked, np.asarray(sensor["range_m"], np.float64)[at], np.nan)


class RowIndex:
    """Row indices of ids within a roster (``core.robots.rows_of`` with -1 for a missing id), the roster's sort
    kept while it stays the same: a roster changes at a spawn, the rows are asked for at every step."""

    def __init__(self) -> None:
        self.ids = np.empty(0, np.int64)
        self.order = np.empty(0, np.int64)
        self.sorted = np.empty(0, np.int64)

    def __call__(self, ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, np.int64)
        if len(ids) != len(self.ids) or not np.array_equal(ids, self.ids):
            self.ids, self.order = ids.copy(), np.argsort(ids, kind="stable")
            self.sorted = ids[self.order]
        if not len(ids):
            return np.full(len(wanted), -1, np.int64)
        pos = np.minimum(np.searchsorted(self.sorted, wanted), len(ids) - 1)
        return np.where(self.sorted[pos] == wanted, self.order[pos], -1)
