"""The policy driver: the federate through which a Gymnasium agent commands its robots, one more command source.

The scenario gives the agent's robots to this federate (``drivers:``), so the physics federate takes their commands
from ``commands_<name>`` like those of a ROS 2 or MQTT bridge. Each robot keeps its scenario control law for what the
agent does not decide: the driver runs the law's pipeline (``controllers.pipeline``) on the same inputs the control
federate reads (``estimate``, ``cam_rx``, ``range``) for the yaw rate, and the agent's action replaces the law's
acceleration. The speed and steering commands then follow as in the control federate (``controllers.conversions``).

Two steps per decision, so that an action acts exactly when the law's acceleration would have:

- **sense** at ``k P`` (P: the law's period): after the physics, V2X and control steps of that instant (the driver
  reads their outputs without delay), it takes the receptions, runs the pipeline and keeps what the observation
  needs (``Sensed``). The environment stops the scheduler here and hands the observation to the agent.
- **act** at ``k P + 1 ns``: publishes the command made from the agent's action. No other federate steps at that
  instant, and the physics federate takes external commands from the next step on, so a command published at
  ``k P + 1 ns`` acts from the same physics step as one the control federate published at ``k P``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from controllers.columns import LazyColumns
from controllers.conversions import integrate_speed_rows, yaw_rate_to_steer
from controllers.pipeline import ControlPipeline
from core.federate import Federate, FederateMeta, Input, SetupContext
from core.ports import CAM_RX, ESTIMATE, RANGE, command_port, fields_of
from core.robot_blocks import ControllerSpec
from core.robots import RobotSpec, rows_of
from core.spawn_columns import block_column, optional_ids, spec_column, vehicle_params
from core.timebase import NS_PER_S
from federates.control.received import RX_FIELDS, Received
from federates.control.sensing import RangeSensing

_EGO_FIELDS = ("x", "y", "yaw", "v", "a", "yaw_rate")
_SENSED_EGO = ("x", "y", "v", "a")  # what the observation reads of the estimate
ACT_DELAY_NS = 1
"""[ns] from a sense step to its act step: an instant nothing else steps at, before the next physics step."""


@dataclass
class Sensed:
    """What the agent's robots knew at the last sense step, one entry per agent row (``PolicyDriver.agent_ids``
    order): their estimate, range sensor, the newest received predecessor and leader samples with their ages, and
    what their law computed (its acceleration, yaw rate and desired gap)."""

    t_ns: int
    ego: dict[str, np.ndarray]
    sensors: dict[str, np.ndarray]
    pred: dict[str, np.ndarray]
    leader: dict[str, np.ndarray]
    pred_age_s: np.ndarray
    leader_age_s: np.ndarray
    law_accel: np.ndarray
    yaw_rate: np.ndarray
    desired_gap_m: np.ndarray


class PolicyDriver(Federate):
    """Commands the robots the scenario gives it with the accelerations ``set_action`` holds (module docstring).

    ``laws``: each agent robot's control block by robot id, all of one period (the agent's decision period)."""

    def __init__(self, name: str, laws: Mapping[int, ControllerSpec] | None = None, period_ns: int = 0) -> None:
        super().__init__(name)
        self.laws = dict(laws or {})
        self.period_ns = period_ns
        if self.laws and period_ns <= 0:
            raise ValueError("the policy driver needs the agents' control period")
        self.agent_ids = np.array(sorted(self.laws), np.int64)
        self.action = np.zeros(len(self.agent_ids))  # [m/s^2] the agent's acceleration per agent row
        self.sensed: Sensed | None = None
        self._port = command_port(name)
        self._pipelines: list[tuple[ControlPipeline, np.ndarray]] = []  # per law block: pipeline, agent rows
        self._ids = np.empty(0, np.int64)  # every robot, roster order (the inputs' rows)
        self._rows = np.empty(0, np.int64)  # the agents' rows among them
        self._row_of_id = np.full(1, -1, np.int64)
        self._pred = Received()
        self._leader = Received()
        self._sensing = RangeSensing()
        self._speed_cmd = np.zeros(len(self.agent_ids))
        self._limits = {key: np.zeros(len(self.agent_ids)) for key in ("wheelbase", "max_steer", "max_speed")}
        self.accel_bounds = (np.zeros(len(self.agent_ids)), np.zeros(len(self.agent_ids)))
        self._next_ns = 0

    def setup(self, ctx: SetupContext) -> FederateMeta:
        blocks: dict[str, tuple[ControllerSpec, list[int]]] = {}
        for k, rid in enumerate(self.agent_ids.tolist()):
            spec = self.laws[rid]
            blocks.setdefault(repr(sorted(spec.settings.items())), (spec, []))[1].append(k)
        self._pipelines = [(ControlPipeline.from_block(spec.settings, self.period_ns / NS_PER_S),
                            np.array(rows, np.int64)) for spec, rows in blocks.values()]
        for pipeline, rows in self._pipelines:
            pipeline.add_rows(len(rows))
        self._next_ns = 0
        return FederateMeta(
            inputs=(Input("estimate", fields=ESTIMATE.fields),
                    Input("cam_rx", queued=True, fields=CAM_RX.fields),
                    Input("range", fields=fields_of(RANGE, ("range_m", "range_rate_mps", "bearing_rad")),
                          optional=True)),
            outputs=(self._port,),
        )

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        if not robots:
            return
        dims = spec_column(robots, "dims")
        self._sensing.add(block_column(dims, "length_m") - block_column(dims, "rear_overhang_m"))
        self._pred.add(optional_ids(spec_column(robots, "predecessor")))
        self._leader.add(optional_ids(spec_column(robots, "leader")))
        self._ids = np.concatenate([self._ids, np.array(spec_column(robots, "id"), np.int64)])
        mine = {r.id: r for r in robots if r.id in self.laws}
        if mine:
            params = vehicle_params([mine[rid] for rid in self.agent_ids.tolist() if rid in mine])
            rows = rows_of(self.agent_ids, np.array(list(mine), np.int64))
            for key, column in (("wheelbase", "wheelbase_m"), ("max_steer", "max_steer_rad"),
                                ("max_speed", "max_speed_mps")):
                self._limits[key][rows] = params.column(column)
            self.accel_bounds[0][rows] = -params.column("max_decel_mps2")
            self.accel_bounds[1][rows] = params.column("max_accel_mps2")
            self._speed_cmd[rows] = [mine[rid].initial.v for rid in self.agent_ids[rows].tolist()]
        self._reindex()

    def despawn(self, robot_ids: Sequence[int]) -> None:
        keep = ~np.isin(self._ids, np.asarray(list(robot_ids), np.int64))
        if np.isin(self.agent_ids, np.asarray(list(robot_ids), np.int64)).any():
            raise ValueError("an agent's robot despawned: the environment cannot go on without it")
        self._ids = self._ids[keep]
        self._sensing.remove(keep)
        self._pred.remove(keep)
        self._leader.remove(keep)
        self._reindex()

    def _reindex(self) -> None:
        size = int(self._ids.max()) + 1 if len(self._ids) else 1
        self._row_of_id = rows_of(self._ids, np.arange(size, dtype=np.int64), missing=-1)
        present = np.isin(self.agent_ids, self._ids)
        self._rows = rows_of(self._ids, self.agent_ids) if present.all() else np.empty(0, np.int64)

    def next_time(self) -> int | None:
        return self._next_ns

    def set_action(self, accel: np.ndarray) -> None:
        """The agents' accelerations [m/s^2] for the next act step, clipped to each vehicle's limits."""
        given = np.asarray(accel, np.float64).reshape(-1)
        if not np.isfinite(given).all():  # clipping keeps NaN, which would reach the vehicles' commands
            raise ValueError(f"the action must be finite accelerations [m/s^2], got {given.tolist()}")
        np.clip(given, self.accel_bounds[0], self.accel_bounds[1], out=self.action)

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> dict[str, Any]:
        if t_ns % self.period_ns:  # the act step
            self._next_ns = t_ns - ACT_DELAY_NS + self.period_ns
            return {self._port.name: self._command()}
        self._next_ns = t_ns + ACT_DELAY_NS
        est = inputs["estimate"]
        for rx in inputs.get("cam_rx") or ():
            if len(rx["receiver"]):
                n = len(rx["receiver"])
                fields = tuple(np.asarray(rx[f], np.float64) if f in rx else np.full(n, np.nan) for f in RX_FIELDS)
                self._pred.receive(rx, fields, self._row_of_id, also=self._leader)
        if len(self._rows):
            self.sensed = self._sense(t_ns, est, inputs.get("range"))
        return {}

    def _sense(self, t_ns: int, est: Mapping[str, np.ndarray], range_port: Any) -> Sensed:
        """Runs each agent law on this instant's inputs and keeps what the observation reads."""
        rows = self._rows
        sensors = self._sensing.measure(range_port, est, self._ids).take(rows)
        sensed_cols = {name: np.asarray(sensors[name], np.float64) for name in ("gap_m", "gap_rate_mps")}
        n = len(rows)
        law_accel, yaw_rate, gap = np.zeros(n), np.zeros(n), np.full(n, np.nan)
        pred_age, leader_age = self._pred.age_s(t_ns, rows), self._leader.age_s(t_ns, rows)
        for pipeline, agent_rows in self._pipelines:
            sub = rows[agent_rows]
            # read in place by a compiled law, gathered when a stage reads it (as the control federate does)
            ego = LazyColumns(_EGO_FIELDS, lambda name, sub=sub: est[name][sub], (est.__getitem__, sub))
            out = pipeline.step(t_ns / NS_PER_S, ego, self._pred.rows(sub), self._leader.rows(sub),
                                pred_age[agent_rows], leader_age[agent_rows], sensors.take(agent_rows))
            law_accel[agent_rows] = out.accel
            yaw_rate[agent_rows] = out.yaw_rate
            gap[agent_rows] = out.desired_gap_m
        pred, leader = self._pred.held[:, rows], self._leader.held[:, rows]  # one gather each, a row per field
        return Sensed(t_ns, {name: est[name][rows] for name in _SENSED_EGO}, sensed_cols,
                      {name: pred[f] for f, name in enumerate(RX_FIELDS)},
                      {name: leader[f] for f, name in enumerate(RX_FIELDS)},
                      pred_age, leader_age, law_accel, yaw_rate, gap)

    def _command(self) -> dict[str, np.ndarray]:
        """The agents' commands from the held action: the speed integrates it over the period (never below 0,
        never past the vehicle's maximum), the steering follows the law's yaw rate at that speed."""
        n = len(self.agent_ids)
        accel = self.action.copy()
        yaw_rate = self.sensed.yaw_rate.copy() if self.sensed is not None else np.zeros(n)
        limits = self._limits
        integrate_speed_rows(self._speed_cmd, accel, np.zeros(n, bool), limits["max_speed"],
                             np.arange(n, dtype=np.int64), self.period_ns / NS_PER_S)
        steer = yaw_rate_to_steer(yaw_rate, self._speed_cmd, limits["wheelbase"], limits["max_steer"])
        return {"robot": self.agent_ids, "speed": self._speed_cmd.copy(), "accel": accel, "steer": steer,
                "yaw_rate": yaw_rate}
