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
from numba import njit

from controllers import CONTROLLERS
from controllers.base import Arrays, Controller
from controllers.conversions import integrate_speed, yaw_rate_to_steer
from controllers.profiles import PROFILES, ProfileParams
from federates.physics.federate import vehicle_params
from orchestrator.core.federate import Federate, FederateMeta, Input, SetupContext
from orchestrator.core.ports import CAM_RX, COMMANDS, CONTROL_DIAG, ESTIMATE, RANGE, fields_of
from orchestrator.core.robots import RobotSpec
from orchestrator.core.timebase import NS_PER_S, ns_to_seconds, seconds_to_ns

_RX_FIELDS = ("x", "y", "yaw", "v", "a", "yaw_rate")
_EGO_FIELDS = ("x", "y", "yaw", "v", "a", "yaw_rate")


@dataclass
class _Group:
    """Followers sharing one law instance; ``ids`` in roster order."""

    law: Controller
    ids: list[int] = field(default_factory=list)
    predict: bool = False
    period_ns: int = 0  # the law's own rate; its outputs are held in between (zero-order hold); 0: every step
    lateral: Any = None  # PurePursuit on the predecessor's received path, for laws that do not steer
    fallback: Any = None  # _Fallback: CACC -> ACC on the range sensor when predecessor data goes stale
    sensed: Any = None  # PurePursuit on where the range sensor saw the vehicle ahead: steering while degraded

    def add_row(self, robot_id: int) -> None:
        self.ids.append(robot_id)
        for part in (self.law, self.lateral, self.fallback, self.sensed):
            if part is not None and hasattr(part, "add_rows"):
                part.add_rows(1)

    def remove_rows(self, rows: np.ndarray) -> None:
        for part in (self.law, self.lateral, self.fallback, self.sensed):
            if part is not None and hasattr(part, "remove_rows"):
                part.remove_rows(rows)

    def steer_by_sensor(self, ego: Arrays, sensors: Arrays, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """Yaw rate [rad/s] by pure pursuit on the positions where the range sensor saw the vehicle ahead (its rear
        bumper, placed from the robot's own estimate), and whether a row has such a path yet. Called every control
        step, degraded or not, so the path is there when the V2X data goes stale."""
        out = self.sensed.compute(ego, {"x": sensors["target_x"], "y": sensors["target_y"]}, {}, {}, dt)
        return out["yaw_rate"], out["has_path"]


class _Fallback:
    """Graceful degradation of one group (controllers.fallback.FallbackPolicy deciding, controllers.acc.Acc acting
    on the robot's own range sensor). The ACC's cruise part holds the speed the robot had when it degraded, so a
    degraded follower never speeds up beyond it when its sensor sees nothing. Steering while degraded comes from
    the range sensor too (``_Group.steer_by_sensor``)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        from controllers.acc import Acc, AccParams
        from controllers.fallback import FallbackParams, FallbackPolicy

        cfg = {k: v for k, v in config.items() if k not in ("steering", "steer_by_sensor")}  # the group steers
        self.acc = Acc(AccParams(**cfg.pop("acc", {})))
        self.policy = FallbackPolicy(FallbackParams(**cfg))
        self.hold_speed = np.empty(0)

    def add_rows(self, n: int) -> None:
        self.policy.add_rows(n)
        self.hold_speed = np.append(self.hold_speed, np.full(n, np.nan))

    def remove_rows(self, rows: np.ndarray) -> None:
        self.policy.remove_rows(rows)
        self.hold_speed = np.delete(self.hold_speed, rows)

    def apply(self, t_s: float, age_s: np.ndarray, ego: Arrays, pred: Arrays, sensors: Arrays, dt: float,
              accel: np.ndarray) -> np.ndarray:
        """Mode per row (0 CACC, 1 ACC); degraded rows get the ACC command written into ``accel``."""
        mode = self.policy.update(t_s, age_s, dt)
        degraded = mode == 1
        self.hold_speed = np.where(degraded & np.isnan(self.hold_speed), ego["v"], self.hold_speed)
        self.hold_speed = np.where(degraded, self.hold_speed, np.nan)
        if degraded.any():
            u_acc = self.policy.braking_floor(self.acc.compute(ego, pred, {}, sensors, dt)["accel"], sensors)
            kp = self.acc.params.cruise.kp  # type: ignore[attr-defined]
            u_hold = kp * (np.nan_to_num(self.hold_speed) - ego["v"])
            accel[degraded] = np.minimum(u_acc, u_hold)[degraded]
        return mode



@njit(cache=True)
def _receive_kernel(receiver, sender, generated, fields, row_of_id, wanted_sender, held_gen, held):  # pragma: no cover
    """For each delivery whose sender is the one its receiver wants and that is newer than what the receiver
    holds, store it (late or reordered messages never overwrite fresher data)."""
    for j in range(receiver.shape[0]):
        rid = receiver[j]
        if rid < 0 or rid >= row_of_id.shape[0]:
            continue
        row = row_of_id[rid]
        if row < 0 or wanted_sender[row] != sender[j] or generated[j] <= held_gen[row]:
            continue
        held_gen[row] = generated[j]
        for f in range(fields.shape[0]):
            held[f, row] = fields[f, j]


class _Received:
    """Newest received sample per robot row about one other robot (predecessor or leader)."""

    def __init__(self) -> None:
        self.generated_ns = np.empty(0, np.int64)
        self.held = np.empty((len(_RX_FIELDS), 0))  # one row per field, one column per robot
        self.values: dict[str, np.ndarray] = {}  # views of ``held`` by field name
        self._views()

    def _views(self) -> None:
        self.values = {name: self.held[f] for f, name in enumerate(_RX_FIELDS)}

    def rows(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The held samples of some robots, by field name (one gather for all fields)."""
        block = self.held[:, rows]
        return {name: block[f] for f, name in enumerate(_RX_FIELDS)}

    def add(self, n: int) -> None:
        self.generated_ns = np.concatenate([self.generated_ns, np.full(n, -1, np.int64)])
        self.held = np.ascontiguousarray(np.hstack([self.held, np.full((len(_RX_FIELDS), n), np.nan)]))
        self._views()

    def remove(self, keep: np.ndarray) -> None:
        self.generated_ns = self.generated_ns[keep]
        self.held = np.ascontiguousarray(self.held[:, keep])
        self._views()

    def receive(
        self, rx: Mapping[str, np.ndarray], fields: np.ndarray, row_of_id: np.ndarray, wanted_sender: np.ndarray
    ) -> None:
        """Take the deliveries addressed to each robot from the sender it wants (``fields``: the ``_RX_FIELDS``
        columns of ``rx`` stacked)."""
        _receive_kernel(
            np.asarray(rx["receiver"], np.int64), np.asarray(rx["sender"], np.int64),
            np.asarray(rx["generated_ns"], np.int64), fields, row_of_id, wanted_sender, self.generated_ns, self.held,
        )


def predict_ctrv(sample: Mapping[str, np.ndarray], age_s: np.ndarray) -> dict[str, np.ndarray]:
    """Received states moved forward by their age with constant turn rate and velocity (the CTRV motion model):
    x += v/w (sin(th + w dt) - sin th), y += v/w (cos th - cos(th + w dt)), th += w dt; straight for w -> 0."""
    dt = np.where(np.isfinite(age_s) & (age_s > 0), age_s, 0.0)
    v, w, th = sample["v"], sample["yaw_rate"], sample["yaw"]
    dth = w * dt
    small = np.abs(dth) < 1e-6
    safe_w = np.where(small, 1.0, w)
    dx = np.where(small, v * dt * np.cos(th + 0.5 * dth), v / safe_w * (np.sin(th + dth) - np.sin(th)))
    dy = np.where(small, v * dt * np.sin(th + 0.5 * dth), v / safe_w * (np.cos(th) - np.cos(th + dth)))
    out = dict(sample)
    out["x"], out["y"], out["yaw"] = sample["x"] + dx, sample["y"] + dy, th + dth
    return out


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
        self._sensor_offset = np.empty(0)  # [m] range sensor (front bumper) ahead of the rear axle
        self._last_range: Any = None  # the range port value already turned into sensed positions
        self._speed_cmd = np.empty(0)
        self._yaw_rate_cmd = np.empty(0)
        self._accel_cmd = np.empty(0)
        self._stop = np.empty(0, bool)
        self._follower_rows = np.empty(0, np.int64)
        self._desired_gap = np.empty(0)
        self._degraded = np.empty(0, bool)
        self._pred_id = np.empty(0, np.int64)
        self._leader_id = np.empty(0, np.int64)
        self._pred = _Received()
        self._leader = _Received()
        self._groups: dict[str, _Group] = {}
        self._drivers: dict[int, str] = {}  # leader id -> key of its driver table
        self._driver_tables: dict[str, np.ndarray] = {}  # key -> (3, ticks) array of v, w, a on the control grid
        self._driver_rows: list[tuple[np.ndarray, np.ndarray]] = []
        self._path_drivers: dict[str, _Group] = {}
        self._path_rows: list[tuple[_Group, np.ndarray]] = []
        self._end_ns = 0
        self._row_of_id = np.full(1, -1, np.int64)
        self._group_rows: list[tuple[_Group, np.ndarray]] = []

    def setup(self, ctx: SetupContext) -> FederateMeta:
        self._end_ns = ctx.end_ns
        return FederateMeta(
            inputs=(
                Input("estimate", fields=ESTIMATE.fields),
                Input("cam_rx", queued=True, fields=CAM_RX.fields),
                Input("range", fields=fields_of(RANGE, ("range_m", "range_rate_mps", "bearing_rad"))),
            ),
            outputs=(COMMANDS, CONTROL_DIAG),
            period_ns=self.period_ns,
        )

    # -- robots -------------------------------------------------------------------------------------------------
    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        for spec in robots:
            params = vehicle_params(spec.config)
            self._specs.append(spec)
            self._wheelbase = np.append(self._wheelbase, params["wheelbase_m"])
            self._max_steer = np.append(self._max_steer, params["max_steer_rad"])
            self._max_speed = np.append(self._max_speed, params["max_speed_mps"])
            dims = {**{k: params[k] for k in ("length_m", "rear_overhang_m")}, **spec.config.get("dims", {})}
            front = float(dims["length_m"]) - float(dims["rear_overhang_m"])
            self._sensor_offset = np.append(self._sensor_offset, front)
            self._speed_cmd = np.append(self._speed_cmd, float(spec.config.get("initial", {}).get("v", 0.0)))
            self._yaw_rate_cmd = np.append(self._yaw_rate_cmd, 0.0)
            self._accel_cmd = np.append(self._accel_cmd, 0.0)
            self._stop = np.append(self._stop, False)
            self._desired_gap = np.append(self._desired_gap, np.nan)
            self._degraded = np.append(self._degraded, False)
            self._pred_id = np.append(self._pred_id, -1 if spec.predecessor is None else spec.predecessor)
            self._leader_id = np.append(self._leader_id, -1 if spec.leader is None else spec.leader)
            driver = spec.config.get("driver", {"profile": "constant"})
            if spec.predecessor is None and driver.get("profile") == "waypoints":
                self._path_driver_for(driver).add_row(spec.id)
            elif spec.predecessor is None:
                self._drivers[spec.id] = self._driver_table(driver)
            else:
                self._group_for(spec).add_row(spec.id)
        self._ids = np.concatenate([self._ids, np.array([s.id for s in robots], np.int64)])
        self._pred.add(len(robots))
        self._leader.add(len(robots))
        self._reindex()

    def despawn(self, robot_ids: Sequence[int]) -> None:
        gone = set(int(r) for r in robot_ids)
        keep = np.array([int(i) not in gone for i in self._ids], bool)
        for group in [*self._groups.values(), *self._path_drivers.values()]:
            removed_rows = [k for k, rid in enumerate(group.ids) if rid in gone]
            if removed_rows:
                group.remove_rows(np.asarray(removed_rows))
            group.ids = [rid for rid in group.ids if rid not in gone]
        for rid in gone:
            self._drivers.pop(rid, None)
        self._specs = [s for s, k in zip(self._specs, keep, strict=True) if k]
        for name in ("_ids", "_wheelbase", "_max_steer", "_max_speed", "_sensor_offset", "_speed_cmd", "_yaw_rate_cmd",
                     "_accel_cmd",
                     "_stop", "_desired_gap", "_degraded", "_pred_id", "_leader_id"):
            setattr(self, name, getattr(self, name)[keep])
        self._pred.remove(keep)
        self._leader.remove(keep)
        self._reindex()

    def _group_for(self, spec: RobotSpec) -> _Group:
        cfg = dict(spec.config["controller"])
        kind = cfg.pop("type")
        period_ns = seconds_to_ns(cfg.pop("period_s", self.dt))
        if period_ns % self.period_ns:
            raise ValueError(f"robot {spec.name}: controller period {period_ns / 1e9:g} s is not a multiple of the "
                             f"control federate's period {self.dt:g} s")
        predict = cfg.pop("predict", "none") == "ctrv"
        lateral_cfg = cfg.pop("lateral", None) or {}
        fallback_cfg = cfg.pop("fallback", None)
        key = kind + json.dumps([cfg, predict, lateral_cfg, fallback_cfg, period_ns], sort_keys=True)
        group = self._groups.get(key)
        if group is None:
            law_cls = CONTROLLERS.get(kind)
            law = law_cls(law_cls.Params(**cfg))
            lateral = None
            if not law_cls.steers:
                from controllers.pure_pursuit import PurePursuit, PurePursuitParams

                lateral = PurePursuit(PurePursuitParams(**lateral_cfg))
            fallback = _Fallback(fallback_cfg) if fallback_cfg else None
            # degraded followers (a fallback block, or a law with one built in) steer on their range sensor:
            # stale V2X poses would lead them off the road in a curve
            sensed = None
            degrades = fallback_cfg is not None or "policy" in law_cls.Params.model_fields
            if degrades and (fallback_cfg or {}).get("steer_by_sensor", True):
                from controllers.pure_pursuit import PurePursuit, PurePursuitParams

                sensed = PurePursuit(PurePursuitParams(**((fallback_cfg or {}).get("steering") or lateral_cfg)))
            group = self._groups[key] = _Group(law, predict=predict, lateral=lateral, fallback=fallback,
                                               period_ns=period_ns, sensed=sensed)
        return group

    def _path_driver_for(self, driver: Mapping[str, Any]) -> _Group:
        """The waypoint-following driver group of leaders sharing one path."""
        from controllers.pure_pursuit import WaypointDriver, WaypointDriverParams

        key = "path" + json.dumps(driver["path"], sort_keys=True)
        group = self._path_drivers.get(key)
        if group is None:
            group = self._path_drivers[key] = _Group(WaypointDriver(WaypointDriverParams(**driver["path"])))
        return group

    def _driver_table(self, driver: Mapping[str, Any]) -> str:
        """Key of the precomputed (v, w, a) table of a driver: profiles depend on time only, so they are evaluated
        once for every control tick of the run instead of once per step."""
        key = json.dumps(driver, sort_keys=True)
        if key not in self._driver_tables:
            profile = PROFILES[driver.get("profile", "constant")]
            ticks = np.arange(self._end_ns // self.period_ns + 2, dtype=np.int64) * self.period_ns
            v, w, a = profile(ticks / NS_PER_S, ProfileParams(**driver.get("params", {})))
            self._driver_tables[key] = np.stack([v, w, a])
        return key

    def _reindex(self) -> None:
        size = int(self._ids.max()) + 1 if len(self._ids) else 1
        self._row_of_id = np.full(size, -1, np.int64)
        self._row_of_id[self._ids] = np.arange(len(self._ids))
        self._group_rows = [
            (g, self._row_of_id[np.asarray(g.ids, np.int64)]) for g in self._groups.values() if g.ids
        ]
        self._path_rows = [
            (g, self._row_of_id[np.asarray(g.ids, np.int64)]) for g in self._path_drivers.values() if g.ids
        ]
        self._follower_rows = np.sort(np.concatenate([rows for _, rows in self._group_rows] or
                                                     [np.empty(0, np.int64)]))
        by_table: dict[str, list[int]] = {}
        for rid, key in self._drivers.items():
            by_table.setdefault(key, []).append(rid)
        self._driver_rows = [
            (self._driver_tables[key], self._row_of_id[np.asarray(ids, np.int64)]) for key, ids in by_table.items()
        ]

    # -- stepping -----------------------------------------------------------------------------------------------
    def _receive(self, rx: Mapping[str, np.ndarray] | None) -> None:
        if rx is None or not len(rx["receiver"]):
            return
        fields = np.stack([np.asarray(rx[name], np.float64) for name in _RX_FIELDS])
        self._pred.receive(rx, fields, self._row_of_id, self._pred_id)
        self._leader.receive(rx, fields, self._row_of_id, self._leader_id)

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> dict[str, Any]:
        est = inputs["estimate"]
        if est is None or not np.array_equal(est["id"], self._ids):
            raise RuntimeError("estimate rows do not match the control federate's robots")
        for rx in inputs.get("cam_rx") or ():  # every reception since the last control step, oldest first
            self._receive(rx)
        accel = self._accel_cmd  # held between a law's own steps (zero-order hold)
        yaw_rate = self._yaw_rate_cmd  # held where a law does not speak (no data yet, stopped)
        stop = self._stop
        tick = min(t_ns // self.period_ns, self._end_ns // self.period_ns + 1)
        for table, rows in self._driver_rows:
            self._speed_cmd[rows] = table[0, tick]
            yaw_rate[rows] = table[1, tick]
            accel[rows] = table[2, tick]
        for group, rows in self._path_rows:
            out = group.law.compute({name: est[name][rows] for name in _EGO_FIELDS}, {}, {}, {}, self.dt)
            self._speed_cmd[rows] = out["speed"]
            yaw_rate[rows] = out["yaw_rate"]
            accel[rows] = out["accel"]
        sensors_all = self._sensors(inputs.get("range"), est)
        for group, rows in self._group_rows:
            if t_ns % group.period_ns == 0:
                self._control_group(group, rows, t_ns, est, sensors_all, accel, yaw_rate, stop)
        rows = self._follower_rows  # the speed command integrates the (held) acceleration every step
        follower_speed = integrate_speed(self._speed_cmd[rows], accel[rows], self.dt, self._max_speed[rows])
        self._speed_cmd[rows] = np.where(stop[rows], 0.0, follower_speed)
        steer = yaw_rate_to_steer(yaw_rate, self._speed_cmd, self._wheelbase, self._max_steer)
        age = np.where(self._pred.generated_ns >= 0, (t_ns - self._pred.generated_ns) / NS_PER_S, np.nan)
        return {
            "commands": {
                "id": self._ids,  # replaced, never mutated, on spawn/despawn
                "speed": self._speed_cmd.copy(),
                "accel": accel.copy(),
                "steer": steer,
                "yaw_rate": yaw_rate.copy(),
            },
            "control_diag": {
                "id": self._ids,
                "pred_age_s": age,
                "desired_gap_m": self._desired_gap.copy(),
                "pred_x": self._pred.values["x"].copy(),
                "pred_y": self._pred.values["y"].copy(),
                "pred_v": self._pred.values["v"].copy(),
                "degraded": self._degraded.astype(np.float64),
            }
        }

    def _sensors(self, range_port: Mapping[str, np.ndarray] | None, est: Mapping[str, np.ndarray]) -> dict:
        """What on-board sensors measure per robot row: the range sensor's gap to the vehicle ahead and its rate
        (bumper to bumper), and where that vehicle's rear bumper is (world frame, from the robot's own estimate).
        Without a range sensor, NaN (laws then act on V2X data alone)."""
        n = len(self._ids)
        if range_port is None or range_port["id"] is None or not np.array_equal(range_port["id"], self._ids):
            return {name: np.full(n, np.nan) for name in ("gap_m", "gap_rate_mps", "target_x", "target_y")}
        gap = np.asarray(range_port["range_m"], float)
        fresh = range_port is not self._last_range  # the port holds its last measurement between scans
        self._last_range = range_port
        if fresh:
            # where the vehicle ahead is (its rear bumper), from where this robot believes it is now: the sensor
            # sits on the front bumper, the target is ``range`` away at ``bearing`` from the heading
            heading = est["yaw"] + np.asarray(range_port.get("bearing_rad", np.full(n, np.nan)), float)
            target_x = est["x"] + self._sensor_offset * np.cos(est["yaw"]) + gap * np.cos(heading)
            target_y = est["y"] + self._sensor_offset * np.sin(est["yaw"]) + gap * np.sin(heading)
        else:  # an old scan placed from a newer pose would be off by the distance driven since
            target_x = target_y = np.full(n, np.nan)
        return {"gap_m": gap, "gap_rate_mps": np.asarray(range_port["range_rate_mps"], float),
                "target_x": target_x, "target_y": target_y}

    def _control_group(self, group: _Group, rows: np.ndarray, t_ns: int, est: Mapping[str, np.ndarray],
                       sensors_all: Mapping[str, np.ndarray], accel: np.ndarray, yaw_rate: np.ndarray,
                       stop: np.ndarray) -> None:
        """One vectorised call of a group's law, with prediction, lateral path following and fallback."""
        ego = {name: est[name][rows] for name in _EGO_FIELDS}
        pred = self._pred.rows(rows)
        leader = self._leader.rows(rows)
        pred_age = (t_ns - self._pred.generated_ns[rows]) / NS_PER_S
        pred_age = np.where(self._pred.generated_ns[rows] >= 0, pred_age, np.inf)
        if group.predict:
            pred = predict_ctrv(pred, pred_age)
            leader = predict_ctrv(leader, (t_ns - self._leader.generated_ns[rows]) / NS_PER_S)
        pred["age_s"] = pred_age
        sensors = {name: values[rows] for name, values in sensors_all.items()}
        have = np.isfinite(pred["x"])
        dt = group.period_ns / NS_PER_S
        out = group.law.compute(ego, pred, leader, sensors, dt)
        # steering laws need the predecessor's pose: without any, hold speed and yaw rate
        a = np.where(have, out["accel"], 0.0) if group.law.steers else np.array(out["accel"], dtype=float)
        w = out.get("yaw_rate")
        if group.lateral is not None:
            lateral = group.lateral.compute(ego, pred, leader, sensors, dt)
            w = np.where(lateral["has_path"], lateral["yaw_rate"], yaw_rate[rows])
        degraded = np.zeros(len(rows), bool)
        if group.fallback is not None:
            degraded = group.fallback.apply(t_ns / NS_PER_S, pred_age, ego, pred, sensors, dt, a) == 1
        if "degraded" in out:
            degraded |= np.asarray(out["degraded"], bool)
        steered_by_sensor = np.zeros(len(rows), bool)
        if group.sensed is not None:
            w_sensed, seen_path = group.steer_by_sensor(ego, sensors, dt)
            steered_by_sensor = degraded & seen_path
            if w is not None:
                w = np.where(steered_by_sensor, w_sensed, w)
        self._degraded[rows] = degraded
        accel[rows] = a
        if "stop" in out:
            stop[rows] = out["stop"] & have & ~degraded
        if w is not None:
            usable = (have | (group.lateral is not None) | steered_by_sensor) & ~stop[rows]
            yaw_rate[rows] = np.where(usable, w, yaw_rate[rows])
        curvature = np.where(pred["v"] > 0.1, pred["yaw_rate"] / np.maximum(pred["v"], 0.1), 0.0)
        self._desired_gap[rows] = group.law.desired_gap(ego["v"], curvature)

    def law_of(self, robot_id: int) -> Controller | None:
        """The control law instance a follower runs (None for leaders)."""
        for group in self._groups.values():
            if robot_id in group.ids:
                return group.law
        return None

    def gap_reference(self, robot_id: int) -> str:
        """How a follower's law measures its gap: "axle" (rear axle to rear axle) or "bumper"."""
        for group in self._groups.values():
            if robot_id in group.ids:
                return getattr(group.law, "gap_reference", "axle")
        return "axle"
