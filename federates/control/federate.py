"""The control federate: a driver for each platoon leader, a control law for each follower.

Followers are grouped by (law, parameters) so each group is one vectorised call. A follower's predecessor and leader
data are only what the channel delivered (``cam_rx``); the federate keeps the newest received sample per follower and
reports its age at use (age of information). Commands are held between control steps (zero-order hold by the bus).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from controllers import CONTROLLERS
from controllers.base import Controller
from controllers.conversions import integrate_speed, yaw_rate_to_steer
from controllers.profiles import PROFILES, ProfileParams
from federates.physics.federate import vehicle_params
from orchestrator.federate import Federate, FederateMeta, Input, SetupContext
from orchestrator.ports import COMMAND_FIELDS, units
from orchestrator.robots import RobotSpec
from orchestrator.timebase import NS_PER_S, ns_to_seconds

_RX_FIELDS = ("x", "y", "yaw", "v", "a", "yaw_rate")
_EGO_FIELDS = ("x", "y", "yaw", "v", "a", "yaw_rate")


@dataclass
class _Group:
    """Followers sharing one law instance; ``ids`` in roster order."""

    law: Controller
    ids: list[int] = field(default_factory=list)


class _Received:
    """Newest received sample per robot row about one other robot (predecessor or leader)."""

    def __init__(self) -> None:
        self.generated_ns = np.empty(0, np.int64)
        self.values = {name: np.empty(0) for name in _RX_FIELDS}

    def add(self, n: int) -> None:
        self.generated_ns = np.concatenate([self.generated_ns, np.full(n, -1, np.int64)])
        for name in _RX_FIELDS:
            self.values[name] = np.concatenate([self.values[name], np.full(n, np.nan)])

    def remove(self, keep: np.ndarray) -> None:
        self.generated_ns = self.generated_ns[keep]
        for name in _RX_FIELDS:
            self.values[name] = self.values[name][keep]

    def update(self, rows: np.ndarray, rx: Mapping[str, np.ndarray], select: np.ndarray) -> None:
        """Store the rows of ``rx`` picked by the mask ``select`` (receiver rows in ``rows``) when newer than what
        is held: late or reordered messages never overwrite fresher data."""
        idx = np.flatnonzero(select)
        rows = rows[idx]
        gen = rx["generated_ns"][idx]
        newer = gen > self.generated_ns[rows]
        idx, rows, gen = idx[newer], rows[newer], gen[newer]
        order = np.argsort(gen, kind="stable")  # assignments in time order: the newest sample is written last
        idx, rows, gen = idx[order], rows[order], gen[order]
        self.generated_ns[rows] = gen
        for name in _RX_FIELDS:
            self.values[name][rows] = rx[name][idx]


class ControlFederate(Federate):
    """Runs drivers and control laws every ``period_ns`` and publishes ``commands`` for all robots."""

    def __init__(self, name: str, period_ns: int) -> None:
        super().__init__(name)
        self.period_ns = period_ns
        self.dt = ns_to_seconds(period_ns)
        self._ids = np.empty(0, np.int64)
        self._specs: list[RobotSpec] = []
        self._wheelbase = np.empty(0)
        self._max_steer = np.empty(0)
        self._max_speed = np.empty(0)
        self._speed_cmd = np.empty(0)
        self._yaw_rate_cmd = np.empty(0)
        self._desired_gap = np.empty(0)
        self._pred_id = np.empty(0, np.int64)
        self._leader_id = np.empty(0, np.int64)
        self._pred = _Received()
        self._leader = _Received()
        self._groups: dict[str, _Group] = {}
        self._drivers: dict[int, tuple[Any, ProfileParams]] = {}
        self._row_of_id = np.full(1, -1, np.int64)
        self._group_rows: list[tuple[_Group, np.ndarray]] = []

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(
            inputs=(Input("estimate"), Input("cam_rx")),
            outputs=("commands",),
            period_ns=self.period_ns,
            units=units(
                "commands",
                {**COMMAND_FIELDS, "pred_age_s": "s", "desired_gap_m": "m", "pred_x": "m", "pred_y": "m",
                 "pred_v": "m/s"},
            ),
        )

    # -- robots -------------------------------------------------------------------------------------------------
    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        for spec in robots:
            params = vehicle_params(spec.config)
            self._specs.append(spec)
            self._wheelbase = np.append(self._wheelbase, params["wheelbase_m"])
            self._max_steer = np.append(self._max_steer, params["max_steer_rad"])
            self._max_speed = np.append(self._max_speed, params["max_speed_mps"])
            self._speed_cmd = np.append(self._speed_cmd, float(spec.config.get("initial", {}).get("v", 0.0)))
            self._yaw_rate_cmd = np.append(self._yaw_rate_cmd, 0.0)
            self._desired_gap = np.append(self._desired_gap, np.nan)
            self._pred_id = np.append(self._pred_id, -1 if spec.predecessor is None else spec.predecessor)
            self._leader_id = np.append(self._leader_id, -1 if spec.leader is None else spec.leader)
            if spec.predecessor is None:
                driver = spec.config.get("driver", {"profile": "constant"})
                profile = PROFILES[driver.get("profile", "constant")]
                self._drivers[spec.id] = (profile, ProfileParams(**driver.get("params", {})))
            else:
                self._group_for(spec).ids.append(spec.id)
        self._ids = np.concatenate([self._ids, np.array([s.id for s in robots], np.int64)])
        self._pred.add(len(robots))
        self._leader.add(len(robots))
        self._reindex()

    def despawn(self, robot_ids: Sequence[int]) -> None:
        gone = set(int(r) for r in robot_ids)
        keep = np.array([int(i) not in gone for i in self._ids], bool)
        for group in self._groups.values():
            removed_rows = [k for k, rid in enumerate(group.ids) if rid in gone]
            if removed_rows and hasattr(group.law, "remove_rows"):
                group.law.remove_rows(np.asarray(removed_rows))
            group.ids = [rid for rid in group.ids if rid not in gone]
        for rid in gone:
            self._drivers.pop(rid, None)
        self._specs = [s for s, k in zip(self._specs, keep, strict=True) if k]
        for name in ("_ids", "_wheelbase", "_max_steer", "_max_speed", "_speed_cmd", "_yaw_rate_cmd", "_desired_gap",
            "_pred_id", "_leader_id",
        ):
            setattr(self, name, getattr(self, name)[keep])
        self._pred.remove(keep)
        self._leader.remove(keep)
        self._reindex()

    def _group_for(self, spec: RobotSpec) -> _Group:
        cfg = dict(spec.config["controller"])
        kind = cfg.pop("type")
        cfg.pop("period_s", None)
        key = kind + json.dumps(cfg, sort_keys=True)
        group = self._groups.get(key)
        if group is None:
            law_cls = CONTROLLERS.get(kind)
            group = self._groups[key] = _Group(law_cls(law_cls.Params(**cfg)))
        if hasattr(group.law, "add_rows"):
            group.law.add_rows(1)
        return group

    def _reindex(self) -> None:
        size = int(self._ids.max()) + 1 if len(self._ids) else 1
        self._row_of_id = np.full(size, -1, np.int64)
        self._row_of_id[self._ids] = np.arange(len(self._ids))
        self._group_rows = [
            (g, self._row_of_id[np.asarray(g.ids, np.int64)]) for g in self._groups.values() if g.ids
        ]
        self._leader_rows = self._row_of_id[np.asarray(sorted(self._drivers), np.int64)] if self._drivers else None

    def _rows_of(self, ids: np.ndarray) -> np.ndarray:
        rows = np.full(len(ids), -1, np.int64)
        inside = (ids >= 0) & (ids < len(self._row_of_id))
        rows[inside] = self._row_of_id[ids[inside]]
        return rows

    # -- stepping -----------------------------------------------------------------------------------------------
    def _receive(self, rx: Mapping[str, np.ndarray] | None) -> None:
        if rx is None or not len(rx["receiver"]):
            return
        rows = self._rows_of(rx["receiver"])
        valid = rows >= 0
        safe_rows = np.where(valid, rows, 0)
        from_pred = valid & (self._pred_id[safe_rows] == rx["sender"])
        if from_pred.any():
            self._pred.update(safe_rows, rx, from_pred)
        from_leader = valid & (self._leader_id[safe_rows] == rx["sender"])
        if from_leader.any():
            self._leader.update(safe_rows, rx, from_leader)

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> dict[str, Any]:
        est = inputs["estimate"]
        n = len(self._ids)
        if est is None or not np.array_equal(est["id"], self._ids):
            raise RuntimeError("estimate rows do not match the control federate's robots")
        self._receive(inputs.get("cam_rx"))
        accel = np.zeros(n)
        yaw_rate = self._yaw_rate_cmd  # held where a law does not speak (no data yet, stopped)
        stop = np.zeros(n, bool)
        t = np.array([ns_to_seconds(t_ns)])
        for rid, (profile, params) in self._drivers.items():
            v, w, a = profile(t, params)
            row = self._row_of_id[rid]
            self._speed_cmd[row] = v[0]
            accel[row] = a[0]
            yaw_rate[row] = w[0]
        for group, rows in self._group_rows:
            ego = {name: est[name][rows] for name in _EGO_FIELDS}
            pred = {name: self._pred.values[name][rows] for name in _RX_FIELDS}
            leader = {name: self._leader.values[name][rows] for name in _RX_FIELDS}
            have = np.isfinite(pred["x"])
            out = group.law.compute(ego, pred, leader, {}, self.dt)
            a = np.where(have, out["accel"], 0.0)
            accel[rows] = a
            if "stop" in out:
                stop[rows] = out["stop"] & have
            if "yaw_rate" in out:
                yaw_rate[rows] = np.where(have & ~stop[rows], out["yaw_rate"], yaw_rate[rows])
            self._desired_gap[rows] = group.law.desired_gap(ego["v"])
            follower_speed = integrate_speed(self._speed_cmd[rows], a, self.dt, self._max_speed[rows])
            self._speed_cmd[rows] = np.where(stop[rows], 0.0, follower_speed)
        steer = yaw_rate_to_steer(yaw_rate, self._speed_cmd, self._wheelbase, self._max_steer)
        age = np.where(self._pred.generated_ns >= 0, (t_ns - self._pred.generated_ns) / NS_PER_S, np.nan)
        return {
            "commands": {
                "id": self._ids.copy(),
                "speed": self._speed_cmd.copy(),
                "accel": accel,
                "steer": steer,
                "yaw_rate": yaw_rate.copy(),
                "pred_age_s": age,
                "desired_gap_m": self._desired_gap.copy(),
                "pred_x": self._pred.values["x"].copy(),
                "pred_y": self._pred.values["y"].copy(),
                "pred_v": self._pred.values["v"].copy(),
            }
        }

    def gap_reference(self, robot_id: int) -> str:
        """How a follower's law measures its gap: "axle" (rear axle to rear axle) or "bumper"."""
        for group in self._groups.values():
            if robot_id in group.ids:
                return getattr(group.law, "gap_reference", "axle")
        return "axle"
