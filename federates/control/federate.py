"""The control federate: adapts the leaders' drivers and the followers' control pipelines to ports.

Inputs: ``estimate`` (what each robot believes about itself), ``cam_rx`` (queued: every reception since the last
control step) and ``range`` (the forward range sensor). Outputs: ``commands`` and ``control_diag``. A follower's
predecessor and leader data are only what the channel delivered; the federate keeps the newest received sample per
follower and reports its age at use (age of information). Followers sharing one controller block form a group run
by one ``controllers.pipeline.ControlPipeline``, at the block's own period; commands are held in between
(zero-order hold by the bus).

In a scenario with maneuvers (``federates.control.maneuvering``) every robot also runs a maneuver state machine on
its partner's messages: robots change role at run time (a leader's drive or a group to the maneuver layer, which
drives joiners and mergers to their slot and steers lane changes, and into a platoon's group), whose messages they
use changes, and two more ports go out: ``platoon_state`` (which the V2X federate sends and builds its interest
from) and ``maneuver_events``. With the ``open_gap`` or ``leave`` reaction to misbehaviour, ``suspicions`` (queued)
come in and ``federates.control.reactions`` widens gaps or requests leaves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat
from operator import is_
from typing import Any

import numpy as np

from controllers.base import Controller
from controllers.columns import LazyColumns
from controllers.conversions import integrate_speed_rows, yaw_rate_to_steer
from controllers.maneuvers.machine import FREE
from controllers.pipeline import ControlOutput
from core.federate import Federate, FederateMeta, Input, SetupContext
from core.ports import (
    CAM_RX,
    CAM_RX_PLATOONING,
    COMMANDS,
    CONTROL_DIAG,
    ESTIMATE,
    MANEUVER_EVENT_PORT,
    PLATOON_STATE,
    RANGE,
    fields_of,
)
from core.robots import RobotSpec, rows_of
from core.rowtable import RowTable
from core.spawn_columns import block_column, optional_ids, spec_column, vehicle_params
from core.timebase import NS_PER_S, ns_to_seconds
from federates.control.diagnostics import control_diagnostics, with_gaps
from federates.control.drivers import Drivers
from federates.control.groups import FollowerGroups, Group
from federates.control.maneuvering import ManeuverLayer
from federates.control.reactions import Reactions, widen
from federates.control.received import RX_FIELDS, Received
from federates.control.sensing import RangeSensing

_EGO_FIELDS = ("x", "y", "yaw", "v", "a", "yaw_rate")
_ROW_ARRAYS: dict[str, type] = {  # per-robot arrays, in row order, and their dtypes
    "_wheelbase": np.float64, "_max_steer": np.float64, "_max_speed": np.float64, "_speed_cmd": np.float64,
    "_yaw_rate_cmd": np.float64, "_accel_cmd": np.float64, "_stop": np.bool_, "_desired_gap": np.float64,
    "_degraded": np.bool_, "_external": np.bool_,
}


def is_external(spec: RobotSpec) -> bool:
    """Whether the scenario gives this robot's commands to an external source (not this federate)."""
    return spec.external


class ControlFederate(RowTable, Federate):
    """Runs drivers and control pipelines every ``period_ns`` and publishes ``commands`` for all robots."""

    ROW_COLUMNS = (*_ROW_ARRAYS, "_kmax")

    def __init__(self, name: str, period_ns: int, maneuvers: Mapping[str, Any] | None = None,
                 reactions: Mapping[str, Any] | None = None) -> None:
        super().__init__(name)
        self._plan = maneuvers  # the world's maneuver plan (``federates.control.maneuvering``), None without
        self.period_ns = period_ns
        self.dt = ns_to_seconds(period_ns)
        self._ids = np.empty(0, np.int64)
        self._checked_ids: np.ndarray | None = None  # the estimate's id array last found equal to ``_ids``
        self._wheelbase = np.empty(0)
        self._max_steer = np.empty(0)
        self._max_speed = np.empty(0)
        self._speed_cmd = np.empty(0)
        self._yaw_rate_cmd = np.empty(0)
        self._accel_cmd = np.empty(0)
        self._stop = np.empty(0, bool)
        self._desired_gap = np.empty(0)  # per row, as of the parts below (replaced, never written into)
        self._gap_parts: dict[int, tuple[np.ndarray, ControlOutput]] = {}  # per group: its rows and last output
        self._degraded = np.empty(0, bool)
        self._external = np.empty(0, bool)  # rows an external source drives
        self._pred = Received()
        self._leader = Received()
        self._sensing = RangeSensing()
        self._drivers = Drivers(period_ns, 0)
        self._groups = FollowerGroups(period_ns, self.dt)  # followers by controller block
        self._group_rows: list[tuple[Group, np.ndarray]] = []
        self._follower_rows = np.empty(0, np.int64)
        self._any_external = False
        self._row_of_id = np.full(1, -1, np.int64)  # robot id -> row (-1: not ours), for the receive kernel
        self._maneuvers = None if maneuvers is None else ManeuverLayer(maneuvers, self._platoon_law)
        self._kmax = np.empty(0)  # [1/m] tightest curvature per row (lane steering)
        self._reactions = None if reactions is None else Reactions(reactions)  # to misbehaviour

    def setup(self, ctx: SetupContext) -> FederateMeta:
        self._drivers = Drivers(self.period_ns, ctx.end_ns)
        maneuvering = self._maneuvers is not None
        range_fields = ("range_m", "range_rate_mps", "bearing_rad", *(("target",) if maneuvering else ()))
        return FederateMeta(
            inputs=(
                Input("estimate", fields=ESTIMATE.fields),
                Input("cam_rx", queued=True, fields=(CAM_RX_PLATOONING if maneuvering else CAM_RX).fields),
                Input("range", fields=fields_of(RANGE, range_fields)),
                *((Input("suspicions", queued=True, optional=True, fields=Reactions.port.fields),)
                  if self._reactions is not None else ()),
            ),
            outputs=(COMMANDS, CONTROL_DIAG, *((PLATOON_STATE, MANEUVER_EVENT_PORT) if maneuvering else ())),
            period_ns=self.period_ns,
        )

    # -- robots -------------------------------------------------------------------------------------------------
    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        """Rows for ``robots`` at the end, appended once per call (and once per group) whatever their number; the
        vehicle and controller work is done once per distinct block (robots of one template share theirs)."""
        if not robots:
            return
        self._flush_gaps()
        params = vehicle_params(robots)
        external = ~np.fromiter(map(is_, spec_column(robots, "command_source"), repeat(None)), bool,
                                count=len(robots))  # is_external
        predecessors = spec_column(robots, "predecessor")
        leader = np.array(list(map(is_, predecessors, repeat(None))), bool)
        new: dict[str, np.ndarray] = {
            "_wheelbase": params.column("wheelbase_m"), "_max_steer": params.column("max_steer_rad"),
            "_max_speed": params.column("max_speed_mps"), "_external": external,
            "_speed_cmd": block_column(spec_column(robots, "initial"), "v"),
        }
        for name, fill in (("_yaw_rate_cmd", 0.0), ("_accel_cmd", 0.0), ("_stop", False), ("_desired_gap", np.nan),
                           ("_degraded", False)):
            new[name] = np.full(len(robots), fill)
        self.append_rows(**{name: np.asarray(new[name], dtype) for name, dtype in _ROW_ARRAYS.items()},
                         _kmax=np.tan(new["_max_steer"]) / new["_wheelbase"])
        dims = spec_column(robots, "dims")
        length, rear = block_column(dims, "length_m"), block_column(dims, "rear_overhang_m")
        self._sensing.add(length - rear)  # the range sensor sits on the front bumper

        ids = np.array(spec_column(robots, "id"), np.int64)
        followers = np.flatnonzero(~leader & ~external)
        if len(followers):
            self._groups.spawn(robots, followers, ids)
        self._drivers.add([robots[k] for k in np.flatnonzero(leader & ~external).tolist()])

        self._ids = np.concatenate([self._ids, ids])
        self._checked_ids = None
        self._pred.add(optional_ids(predecessors))
        self._leader.add(optional_ids(spec_column(robots, "leader")))
        if self._maneuvers is not None:
            self._maneuvers.spawn(robots, external.tolist())
        if self._reactions is not None:
            self._reactions.add(len(robots))
        self._reindex()

    def despawn(self, robot_ids: Sequence[int]) -> None:
        self._flush_gaps()
        gone = np.asarray(list(robot_ids), np.int64)
        keep = ~np.isin(self._ids, gone)
        self._groups.despawn(gone)
        self._drivers.remove(gone)
        self._ids = self._ids[keep]
        self._checked_ids = None
        self.keep_rows(keep)
        self._sensing.remove(keep)
        self._pred.remove(keep)
        self._leader.remove(keep)
        if self._maneuvers is not None:
            self._maneuvers.despawn(keep)
        if self._reactions is not None:
            self._reactions.keep(keep)
        self._reindex()

    def _reindex(self) -> None:
        """Rows by id, rebuilt once per roster change so that no step looks anything up."""
        size = int(self._ids.max()) + 1 if len(self._ids) else 1
        self._row_of_id = rows_of(self._ids, np.arange(size, dtype=np.int64), missing=-1)
        self._group_rows = self._groups.rows(self._ids)
        self._follower_rows = np.sort(np.concatenate([rows for _, rows in self._group_rows] or
                                                     [np.empty(0, np.int64)]))
        if self._maneuvers is not None:  # robots driven by the maneuver layer integrate their speed too
            free = np.flatnonzero(self._maneuvers.machine.a["role"] == FREE)
            self._follower_rows = np.sort(np.concatenate([self._follower_rows, free]))
        self._drivers.reindex(self._ids)
        self._any_external = bool(self._external.any())

    # -- stepping -----------------------------------------------------------------------------------------------
    def _receive(self, rx: Mapping[str, np.ndarray] | None) -> None:
        if rx is None or not len(rx["receiver"]):
            return
        n = len(rx["receiver"])  # u_des: only where a platooning message travelled (NaN, or absent, otherwise)
        # one array per field, read in place by the compiled kernel (no stacked copy)
        fields = tuple(np.asarray(rx[name], np.float64) if name in rx else np.full(n, np.nan) for name in RX_FIELDS)
        self._pred.receive(rx, fields, self._row_of_id, also=self._leader)
        if self._maneuvers is not None:
            self._maneuvers.receive(rx, self._row_of_id)

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> dict[str, Any]:
        est = inputs["estimate"]
        if est is None or (est["id"] is not self._checked_ids and not np.array_equal(est["id"], self._ids)):
            raise RuntimeError("estimate rows do not match the control federate's robots")
        self._checked_ids = est["id"]  # the producer replaces, never mutates, its id array: compare once
        for rx in inputs.get("cam_rx") or ():  # every reception since the last control step, oldest first
            self._receive(rx)
        accel = self._accel_cmd  # held between a law's own steps (zero-order hold)
        yaw_rate = self._yaw_rate_cmd
        maneuver = None
        if self._reactions is not None:
            self._react(t_ns, inputs.get("suspicions"))
        if self._maneuvers is not None:
            maneuver = self._maneuvers.step(t_ns, est, self._pred, self._leader, self._kmax)
            self._apply(maneuver.actions)
        self._drivers.step(t_ns, est, self._speed_cmd, yaw_rate, accel)
        sensors = self._sensing.measure(inputs.get("range"), est, self._ids)
        for group, rows in self._group_rows:
            if t_ns % group.period_ns == 0:
                pred = self._pred.rows(rows)
                group_sensors = sensors.take(rows)  # gathered only if a stage reads them
                extra = self._extra_gap(t_ns, group, rows, maneuver, est)
                if maneuver is not None:
                    self._widen_gaps(group, rows, extra, pred, group_sensors, inputs.get("range"), est)
                elif extra is not None:
                    widen(pred, group_sensors, extra, getattr(group.pipeline.law, "gap_reference", "axle"))
                # the followers' estimates, gathered when read (or read in place by a compiled law)
                ego = LazyColumns(_EGO_FIELDS, lambda name, rows=rows: est[name][rows], (est.__getitem__, rows))
                out = group.pipeline.step(
                    t_ns / NS_PER_S, ego, pred,
                    self._leader.rows(rows), self._pred.age_s(t_ns, rows), self._leader.age_s(t_ns, rows),
                    group_sensors,
                )
                accel[rows] = out.accel
                yaw_rate[rows] = out.yaw_rate
                self._stop[rows] = out.stop
                self._degraded[rows] = out.degraded
                self._gap_parts[id(group)] = (rows, out)  # its desired gap: computed when the diagnostics are read
        if maneuver is not None:  # robots driven here (slot, cruise) and lanes steered here
            driven = np.isfinite(maneuver.accel)
            accel[driven] = maneuver.accel[driven]
            self._stop[driven] = False
            steered = np.isfinite(maneuver.yaw_rate)
            yaw_rate[steered] = maneuver.yaw_rate[steered]
            self._maneuvers.machine.settle_lanes(t_ns / NS_PER_S)
        rows = self._follower_rows  # the speed command integrates the (held) acceleration every step
        integrate_speed_rows(self._speed_cmd, accel, self._stop, self._max_speed, rows, self.dt)
        steer = yaw_rate_to_steer(yaw_rate, self._speed_cmd, self._wheelbase, self._max_steer)
        commands = {
            "id": self._ids,  # replaced, never mutated, on spawn/despawn
            "speed": self._speed_cmd.copy(),
            "accel": accel.copy(),
            "steer": steer,
            "yaw_rate": yaw_rate.copy(),
        }
        if self._any_external:  # robots an external source drives: no command from here (NaN, by contract)
            for key in ("speed", "accel", "steer", "yaw_rate"):
                commands[key][self._external] = np.nan
        return {
            "commands": commands,
            "control_diag": control_diagnostics(self._ids, self._pred, t_ns, self._degraded, self._desired_gap,
                                                self._gap_parts.values()),
            **self._maneuver_outputs(),
        }

    def _flush_gaps(self) -> None:
        """Writes the groups' pending desired gaps into ``_desired_gap`` (a new array), before rows change."""
        if self._gap_parts:
            self._desired_gap = with_gaps(self._desired_gap, self._gap_parts.values())
            self._gap_parts = {}

    # -- reactions to misbehaviour ------------------------------------------------------------------------------
    def _react(self, t_ns: int, suspicions: Sequence[Mapping[str, np.ndarray]] | None) -> None:
        """Suspicions heard; with ``leave``, the requests of the followers that suspect their platoon."""
        assert self._reactions is not None
        self._reactions.hear(suspicions, self._row_of_id, self._pred.wanted, self._leader.wanted)
        if self._reactions.kind == "leave" and self._maneuvers is not None and self._plan is not None:
            machine = self._maneuvers.machine
            for request in self._reactions.leaves(t_ns, self._ids, machine.a["role"], machine.a["st"],
                                                  int(self._plan["reactive_platoons"])):
                machine.request(request)

    def _extra_gap(self, t_ns: int, group: Group, rows: np.ndarray, maneuver: Any,
                   est: Mapping[str, np.ndarray]) -> np.ndarray | None:
        """The distance [m] a group's rows keep beyond their law's gap: a maneuver's, plus open_gap's."""
        extra = None if maneuver is None else maneuver.extra_gap[rows]
        if self._reactions is None or self._reactions.kind != "open_gap":
            return extra
        own = self._reactions.gap(t_ns, rows, np.asarray(group.pipeline.law.desired_gap(est["v"][rows]), float),
                                  group.period_ns / NS_PER_S)
        return own if extra is None else extra + own

    # -- maneuvers ----------------------------------------------------------------------------------------------
    def _maneuver_outputs(self) -> dict[str, Any]:
        if self._maneuvers is None:
            return {}
        return {"platoon_state": self._maneuvers.platoon_state(self._ids, self._pred, self._leader),
                "maneuver_events": self._maneuvers.machine.drain_events()}

    def _platoon_law(self, platoon: int, robot: int | None = None) -> Controller:
        """The control law a follower joining a platoon runs, with the platoon's block's parameters (its group is
        created on first use); given a follower ``robot`` of it, that robot's law with its own parameters (a
        leaver's gap is its own)."""
        assert self._maneuvers is not None
        law = None if robot is None else self._groups.law_at(robot)
        if law is None:
            law = self._groups.law_of_block(self._maneuvers.blocks[platoon], f"of platoon {platoon}")
        return law

    def _apply(self, actions: Sequence[Any]) -> None:
        """Applies the maneuver layer's changes: whose messages a robot uses, and robots changing role (out of
        their drive or group to the maneuver layer, or into a platoon's group)."""
        assert self._maneuvers is not None
        if actions:
            self._flush_gaps()  # group rows are about to change
        changed = False
        for action in actions:
            row = int(self._row_of_id[action.robot])
            if action.kind == "pred":
                self._pred.retarget(row, action.value)
                self._groups.forget_path(action.robot)  # the old predecessor's trail is not the new one's
            elif action.kind == "leader":
                self._leader.retarget(row, action.value)
            elif action.kind == "peer":
                self._maneuvers.peer.retarget(row, action.value)
            elif action.kind == "free":
                self._drivers.remove(np.array([action.robot], np.int64))
                self._groups.leave(action.robot)
                changed = True
            elif action.kind == "follow":
                block = self._maneuvers.blocks[action.value]
                self._groups.join(self._groups.key(block, f"of platoon {action.value}"),
                                  np.array([action.robot], np.int64), [block])
                changed = True
        if changed:
            self._reindex()

    def _widen_gaps(self, group: Group, rows: np.ndarray, extra: np.ndarray, pred: dict[str, np.ndarray],
                    sensors: dict[str, np.ndarray], range_port: Mapping[str, np.ndarray] | None,
                    ego: Mapping[str, np.ndarray]) -> None:
        """Gaps in a scenario with maneuvers. A follower opening (or closing) a gap sees its predecessor ``extra``
        [m] closer than it is: laws on the rear-axle pose get the pose moved back along its heading, laws on the
        range sensor a shorter gap where the sensor sees that predecessor (not a vehicle cutting in). A follower
        whose range sensor sees nothing (a new predecessor beyond its range after a leave) takes the gap from its
        predecessor's messages (rear axle to rear axle, less the two overhangs)."""
        assert self._maneuvers is not None
        if getattr(group.pipeline.law, "gap_reference", "axle") == "axle":
            if extra.any():
                pred["x"] = pred["x"] - extra * np.cos(pred["yaw"])
                pred["y"] = pred["y"] - extra * np.sin(pred["yaw"])
            return
        wanted = self._pred.wanted[rows]
        target = None
        if range_port is not None and "target" in range_port and np.array_equal(range_port["id"], self._ids):
            target = np.asarray(range_port["target"])[rows]
        sensed = sensors["gap_m"]
        heard = np.hypot(pred["x"] - ego["x"][rows], pred["y"] - ego["y"][rows]) \
            - self._maneuvers.rear_overhang(wanted) - self._sensing.sensor_offset[rows]
        blind = np.isnan(sensed) & np.isfinite(heard) & (wanted >= 0)
        mine = blind | (np.ones(len(rows), bool) if target is None else target == wanted)
        gap = np.where(blind, heard, sensed)
        sensors["gap_m"] = np.where(mine, gap - extra, gap)
        if blind.any():
            sensors["gap_rate_mps"] = np.where(blind, pred["v"] - ego["v"][rows], sensors["gap_rate_mps"])

    # -- lookups by robot id (tools and tests; metrics rebuild laws from the resolved scenario) ------------------
    def law_of(self, robot_id: int) -> Controller | None:
        """The control law instance a follower runs (None for leaders)."""
        return self._groups.law_of(robot_id)

    def gap_reference(self, robot_id: int) -> str:
        """How a follower's law measures its gap: "axle" (rear axle to rear axle) or "bumper"."""
        law = self.law_of(robot_id)
        return "axle" if law is None else getattr(law, "gap_reference", "axle")
