"""The default detector: the F2MD plausibility checks (``checks``) on every message a station receives, fused by
counting (a message is misbehaving when at least ``min_failed`` of the enabled checks fail)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from pydantic import Field, field_validator

from core.robots import rows_of

from . import checks as ck
from .base import Detector, DetectorParams
from .history import PairHistory, pair_keys
from .kalman import KalmanParams, KalmanTracks, cam_residuals
from .roles import receiver_roles, role_checks


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
    min_interval_s: float | None = Field(None, ge=0, description="[s] beacon frequency: shortest honest gap between "
                                         "two CAMs of a sender (default: the channel's)")
    warmup_s: float = Field(2.0, ge=0, description="[s] sudden appearance: a receiver listens this long first")
    appearance_range_m: float = Field(50.0, gt=0, description="[m] sudden appearance: a new sender this close")
    sensor_tol_m: float = Field(1.0, ge=0, description="[m] sensor overlap: slack between the claimed and the "
                                "measured range (plus the sender's speed times the message's age and 0.1 s)")
    accel_tol_mps2: float = Field(1.5, gt=0, description="[m/s^2] desired acceleration: largest plausible gap between "
                                  "a platooning message's desired acceleration and the sender's measured one")
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
        self.ids = np.empty(0, np.int64)  # stations: spawn time, bumpers ahead of / behind the rear axle
        self.spawn_ns = np.empty(0, np.int64)
        self.front_m = np.empty(0)
        self.rear_m = np.empty(0)

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

    def judge(self, t_ns: int, messages: Mapping[str, np.ndarray], own: Mapping[str, np.ndarray],
              sensor: Mapping[str, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
        n = len(messages["receiver"])
        mask = np.zeros(n, np.int64)
        if n == 0:
            return mask, np.zeros(0, bool)
        m = {name: np.asarray(col) for name, col in messages.items()}
        kind = m.get("kind")
        cam = np.ones(n, bool) if kind is None else kind == 0
        o_rows = rows_of(np.asarray(own["id"], np.int64), m["receiver"], missing=-1)
        ox, oy, oyaw = (np.where(o_rows >= 0, np.asarray(own[c], np.float64)[np.maximum(o_rows, 0)], np.nan)
                        for c in ("x", "y", "yaw"))
        distance = np.hypot(m["x"] - ox, m["y"] - oy)
        p = self.p
        fails = {"acceptance_range": cam & ck.acceptance_range(distance, p.max_range_m),
                 "speed": cam & ck.speed(m["v"], p.max_speed_mps, p.max_reverse_mps)}
        fails.update(self._against_history(np.flatnonzero(cam), m, distance, t_ns))
        if kind is not None and self.enabled & (ck.bit("leader_consistency") | ck.bit("maneuver_entitlement")):
            fails.update(role_checks(np.flatnonzero(kind == 1), m, receiver_roles(own, o_rows, m["receiver"]),
                                     self.history, p))
        fails["sensor_overlap"] = cam & self._sensor_overlap(t_ns, m, ox, oy, oyaw, sensor)
        if self.tracks is not None:
            fails["kalman"] = cam_residuals(self.tracks, m)
        u = m.get("u_des")
        if u is not None:
            pm_rows = np.isfinite(u) & (np.ones(n, bool) if kind is None else kind == 1)
            fails["desired_accel"] = pm_rows & ck.desired_accel(u, m["a"], p.max_accel_mps2, p.accel_tol_mps2)
        for name, failed in fails.items():
            mask |= np.where(failed, ck.bit(name), 0)
        mask &= self.enabled
        return mask, np.bitwise_count(mask) >= p.min_failed

    def _against_history(self, rows: np.ndarray, m: Mapping[str, np.ndarray], distance: np.ndarray,
                         t_ns: int) -> dict[str, np.ndarray]:
        """The checks that compare a CAM with the previous one of its pair (within the step, or held before)."""
        n, p = len(m["receiver"]), self.p
        out = {name: np.zeros(n, bool) for name in ("position_consistency", "speed_consistency", "position_speed",
                                                    "beacon_frequency", "sudden_appearance", "freshness")}
        if not len(rows):
            return out
        keys = pair_keys(m["receiver"][rows], m["sender"][rows])
        gen = np.asarray(m["generated_ns"], np.int64)[rows]
        order = np.lexsort((gen, keys))
        rows, keys, gen = rows[order], keys[order], gen[order]
        x, y, v = m["x"][rows], m["y"][rows], m["v"][rows]
        within = np.r_[False, keys[1:] == keys[:-1]]  # the previous CAM of the pair came in this step
        pos, found = self.history.find(keys)
        h = self.history.cols
        hp = np.minimum(pos, max(len(self.history.keys) - 1, 0))

        def previous(name: str, now: np.ndarray) -> np.ndarray:
            held = h[name][hp] if len(self.history.keys) else np.zeros(len(rows), now.dtype)
            return np.where(within, np.r_[now[:1], now[:-1]], np.where(found, held, now))

        has_prev = within | found
        dt = np.where(has_prev, (gen - previous("gen", gen)) / 1e9, np.nan)
        moved = np.hypot(x - previous("x", x), y - previous("y", y))
        v_prev = previous("v", v)
        with np.errstate(invalid="ignore"):
            ok = has_prev & (dt > 0)
            out["position_consistency"][rows] = ok & ck.position_consistency(moved, v_prev, v, dt, p.max_accel_mps2,
                                                                             p.position_tol_m)
            out["speed_consistency"][rows] = ok & ck.speed_consistency(v_prev, v, dt, p.max_accel_mps2,
                                                                       p.speed_tol_mps)
            out["position_speed"][rows] = ok & ck.position_speed(moved, v_prev, v, dt, p.position_speed_tol_m,
                                                                 p.position_speed_tol_mps)
            min_gap = self.min_interval_s if p.min_interval_s is None else p.min_interval_s
            out["beacon_frequency"][rows] = has_prev & ck.beacon_frequency(dt, min_gap)
            received = m.get("received_ns")  # (a judge fed by hand may leave it out: received now)
            age = ((t_ns if received is None else np.asarray(received, np.int64)[rows]) - gen) / 1e9
            out["freshness"][rows] = ck.freshness(age, has_prev & (dt < 0), p.max_age_s, p.max_future_s)
        r_rows = rows_of(self.ids, m["receiver"][rows], missing=-1)
        listening = np.where(r_rows >= 0, (t_ns - self.spawn_ns[np.maximum(r_rows, 0)]) / 1e9, 0.0)
        out["sudden_appearance"][rows] = ck.sudden_appearance(~has_prev, listening, distance[rows], p.warmup_s,
                                                              p.appearance_range_m)
        last = np.r_[keys[1:] != keys[:-1], True]
        self.history.store(keys[last], {"gen": gen[last], "x": x[last], "y": y[last], "yaw": m["yaw"][rows][last],
                                        "v": v[last]})
        return out

    def _sensor_overlap(self, t_ns: int, m: Mapping[str, np.ndarray], ox: np.ndarray, oy: np.ndarray,
                        oyaw: np.ndarray, sensor: Mapping[str, np.ndarray] | None) -> np.ndarray:
        """Claimed range (receiver's front bumper to the sender's claimed rear bumper) against the measured one,
        where the receiver's range sensor tracks the sender."""
        n = len(m["receiver"])
        if sensor is None or not len(sensor["id"]):
            return np.zeros(n, bool)
        s_rows = rows_of(np.asarray(sensor["id"], np.int64), m["receiver"], missing=-1)
        at = np.maximum(s_rows, 0)
        tracked = (s_rows >= 0) & (np.asarray(sensor["target"], np.int64)[at] == m["sender"])
        measured = np.where(tracked, np.asarray(sensor["range_m"], np.float64)[at], np.nan)
        r_rows = rows_of(self.ids, m["receiver"], missing=-1)
        t_rows = rows_of(self.ids, m["sender"], missing=-1)
        front = np.where(r_rows >= 0, self.front_m[np.maximum(r_rows, 0)], np.nan)
        rear = np.where(t_rows >= 0, self.rear_m[np.maximum(t_rows, 0)], np.nan)
        sx, sy = ox + front * np.cos(oyaw), oy + front * np.sin(oyaw)
        tx, ty = m["x"] - rear * np.cos(m["yaw"]), m["y"] - rear * np.sin(m["yaw"])
        age_s = (t_ns - np.asarray(m["generated_ns"], np.int64)) / 1e9
        tol = self.p.sensor_tol_m + np.abs(m["v"]) * (np.maximum(age_s, 0.0) + 0.1)
        return ck.sensor_overlap(np.hypot(tx - sx, ty - sy), measured, tol)
