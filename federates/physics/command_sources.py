"""External command sources: the robots the scenario gives to another federate (ROS 2, MQTT, CAN, a hosted
federate, an FMU), merged by robot into the commands the vehicle models step with.

Each source publishes an event table (``core.ports.command_port``): one row per fresh command, the
newest row of a robot winning. A row may leave fields NaN ("not given"); they are completed here from the robot's
state, wheelbase and limits, so a source says what its middleware carries (a ROS 2 Twist: speed and yaw rate; a
CAN target-acceleration frame: acceleration and steering) and every vehicle model gets the pair its input mode uses:

- speed missing, acceleration given: the speed reference integrates the acceleration every physics step,
  within [0, max speed];
- acceleration missing, speed given: a proportional speed loop, ``(speed - v) / ACCEL_FROM_SPEED_TAU_S`` within the
  vehicle's acceleration and deceleration limits;
- steering missing, yaw rate given: ``atan(w L / max(|v|, 0.1 m/s))`` within the steering limit; yaw rate missing,
  steering given: ``v tan(delta) / L``.

Silence: a robot whose source sent nothing for ``command_timeout_s`` (counted from its spawn until the first
command) follows ``on_timeout``: ``brake`` (speed 0 at the vehicle's maximum deceleration, steering held), ``hold``
(the last command) or ``fail`` (the run stops naming the robot and the source). Falling silent and speaking again
are rows of ``command_events``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from controllers.conversions import steer_to_yaw_rate, yaw_rate_to_steer
from core.ports import COMMAND_EVENTS
from core.robots import RobotSpec, param_column, rows_of
from core.rowtable import RowTable
from core.spawn_columns import spec_column

ACCEL_FROM_SPEED_TAU_S = 0.5
"""Time constant [s] of the proportional loop that turns a speed-only command into an acceleration (for models
driven by acceleration)."""

_POLICIES = ("brake", "hold", "fail")
_FIELDS = ("speed", "accel", "steer", "yaw_rate")
_LIMITS = (("wheelbase", "wheelbase_m"), ("max_steer", "max_steer_rad"), ("max_speed", "max_speed_mps"),
           ("max_accel", "max_accel_mps2"), ("max_decel", "max_decel_mps2"))  # attribute, vehicle parameter
_EVENT_CODE = {name: code for code, name in enumerate(COMMAND_EVENTS)}
# an empty ``command_events`` table, shared: published values never change
NO_EVENTS: dict[str, np.ndarray] = {"t_ns": np.empty(0, np.int64), "robot": np.empty(0, np.int64),
                                    "event": np.empty(0, np.uint8)}


class SilentSourceError(RuntimeError):
    """An external command source fell silent and the scenario said ``on_timeout: fail``."""

    def __init__(self, robot: str, port: str, timeout_s: float) -> None:
        super().__init__(f"robot '{robot}' received no command on '{port}' for {timeout_s:g} s "
                         "(command_timeout_s, on_timeout: fail)")
        self.robot = robot


class CommandSources(RowTable):
    """Per-row external command state of the physics federate (rows follow its roster)."""

    ROW_COLUMNS = ("port", "timeout_ns", "policy", "last_ns", "silent", "speed_ref", *(attr for attr, _ in _LIMITS))

    def __init__(self, ports: Sequence[str], dt: float) -> None:
        self.ports = tuple(ports)
        self.dt = dt
        n = 0
        self.port = np.full(n, -1, np.int64)  # index into ports, -1: the control federate drives
        self.timeout_ns = np.zeros(n, np.int64)
        self.policy = np.zeros(n, np.int64)
        self.last_ns = np.zeros(n, np.int64)  # when the last command arrived (spawn time before the first)
        self.silent = np.zeros(n, bool)
        self.cmd = {key: np.zeros(n) for key in _FIELDS}  # the last command as given (NaN: not given)
        self.speed_ref = np.zeros(n)
        self.wheelbase = np.zeros(n)
        self.max_steer = np.zeros(n)
        self.max_speed = np.zeros(n)
        self.max_accel = np.zeros(n)
        self.max_decel = np.zeros(n)
        self.names: list[str] = []
        self.received = dict.fromkeys(self.ports, 0)
        """Commands taken per port (rows for robots the port drives)."""
        self.ignored = dict.fromkeys(self.ports, 0)
        """Rows naming a robot that port does not drive (another source's, or gone)."""
        self.timeouts = 0
        self._external = np.zeros(0, bool)
        self.any = False

    def add(self, robots: Sequence[RobotSpec], params: Sequence[Mapping[str, Any]], t_ns: int,
            speed: np.ndarray, names: Sequence[str] | None = None) -> None:
        """Rows for newly spawned robots (``speed``: their initial speeds; ``names``: theirs, when the caller has
        them already)."""
        sources = spec_column(robots, "command_source")
        if any(sources):  # a posed robot (``posed_by``) names its pose source but takes no commands from it
            sources = [None if r.posed_by is not None else s for r, s in zip(robots, sources, strict=True)]
        if any(sources):
            port = np.array([self.ports.index(s.port) if s else -1 for s in sources], np.int64)
            timeout = np.array([round(s.command_timeout_s * 1e9) if s else 0 for s in sources], np.int64)
            policy = np.array([_POLICIES.index(s.on_timeout) if s else 0 for s in sources], np.int64)
        else:  # the usual fleet: nobody outside commands (no per-robot work)
            port = np.full(len(robots), -1, np.int64)
            timeout = policy = np.zeros(len(robots), np.int64)
        limits = {attr: param_column(params, key) for attr, key in _LIMITS}
        self.append_rows(port=port, timeout_ns=timeout, policy=policy, last_ns=np.full(len(robots), t_ns, np.int64),
                         silent=np.zeros(len(robots), bool), speed_ref=speed, **limits)
        initial = {"speed": speed, "accel": np.zeros(len(robots)), "steer": np.zeros(len(robots)),
                   "yaw_rate": np.zeros(len(robots))}
        for key in _FIELDS:
            self.cmd[key] = np.concatenate([self.cmd[key], initial[key]])
        self.names.extend(spec_column(robots, "name") if names is None else names)
        self._changed()

    def remove(self, keep: np.ndarray) -> None:
        """Drop the rows where ``keep`` is False."""
        self.keep_rows(keep)
        for key in _FIELDS:
            self.cmd[key] = self.cmd[key][keep]
        self.names = [n for n, k in zip(self.names, keep, strict=True) if k]
        self._changed()

    def _changed(self) -> None:
        self._external = self.port >= 0
        self.any = bool(self._external.any())

    def receive(self, t_ns: int, port: str, tables: Sequence[Mapping[str, np.ndarray]], ids: np.ndarray) -> None:
        """Take every command published on ``port`` since the last step, oldest first (the newest row wins)."""
        index = self.ports.index(port)
        for table in tables:
            robots = np.asarray(table["robot"], np.int64)
            if not len(robots):
                continue
            rows = rows_of(ids, robots, missing=-1)
            mine = rows >= 0
            mine[mine] = self.port[rows[mine]] == index
            self.ignored[port] += int(len(rows) - mine.sum())
            if not mine.any():
                continue
            taken = rows[mine]
            self.received[port] += len(taken)
            for key in _FIELDS:
                self.cmd[key][taken] = np.asarray(table[key], np.float64)[mine]
            given_speed = np.isfinite(self.cmd["speed"][taken])
            self.speed_ref[taken[given_speed]] = self.cmd["speed"][taken[given_speed]]
            self.last_ns[taken] = t_ns

    def merge(self, t_ns: int, commands: dict[str, np.ndarray], state: Mapping[str, np.ndarray],
              ids: np.ndarray) -> dict[str, np.ndarray]:
        """Write the external rows of ``commands`` (a private, aligned copy) and return ``command_events`` rows."""
        rows = np.flatnonzero(self._external)
        cmd = {key: self.cmd[key][rows] for key in _FIELDS}
        v = state["v"][rows]
        silent = t_ns - self.last_ns[rows] > self.timeout_ns[rows]
        events = self._transitions(t_ns, rows, silent, ids)
        policy = self.policy[rows]
        if (silent & (policy == _POLICIES.index("fail"))).any():
            row = rows[np.flatnonzero(silent & (policy == _POLICIES.index("fail")))[0]]
            raise SilentSourceError(self.names[row], self.ports[self.port[row]], self.timeout_ns[row] / 1e9)
        accel_only = ~np.isfinite(cmd["speed"]) & np.isfinite(cmd["accel"])
        if accel_only.any():  # the speed reference integrates a commanded acceleration
            ref = self.speed_ref[rows]
            ref[accel_only] = np.clip(ref[accel_only] + cmd["accel"][accel_only] * self.dt, 0.0,
                                      self.max_speed[rows][accel_only])
            self.speed_ref[rows] = ref
            cmd["speed"] = np.where(accel_only, ref, cmd["speed"])
        speed = np.clip(np.where(np.isfinite(cmd["speed"]), cmd["speed"], v), 0.0, self.max_speed[rows])
        accel = np.where(np.isfinite(cmd["accel"]), cmd["accel"], (speed - v) / ACCEL_FROM_SPEED_TAU_S)
        accel = np.clip(accel, -self.max_decel[rows], self.max_accel[rows])
        wheelbase, max_steer = self.wheelbase[rows], self.max_steer[rows]
        steer = np.where(np.isfinite(cmd["steer"]), cmd["steer"],
                         yaw_rate_to_steer(np.nan_to_num(cmd["yaw_rate"]), speed, wheelbase, max_steer))
        steer = np.clip(np.where(np.isfinite(steer), steer, state["steer"][rows]), -max_steer, max_steer)
        yaw_rate = np.where(np.isfinite(cmd["yaw_rate"]), cmd["yaw_rate"], steer_to_yaw_rate(steer, speed, wheelbase))
        brake = silent & (policy == _POLICIES.index("brake"))
        if brake.any():
            speed = np.where(brake, 0.0, speed)
            accel = np.where(brake, np.where(v > 0, -self.max_decel[rows], 0.0), accel)
            yaw_rate = np.where(brake, steer_to_yaw_rate(steer, v, wheelbase), yaw_rate)
        for key, value in (("speed", speed), ("accel", accel), ("steer", steer), ("yaw_rate", yaw_rate)):
            commands[key][rows] = value
        return events

    def _transitions(self, t_ns: int, rows: np.ndarray, silent: np.ndarray, ids: np.ndarray) -> dict[str, np.ndarray]:
        was = self.silent[rows]
        if not (silent != was).any():
            return NO_EVENTS
        went, back = silent & ~was, ~silent & was
        self.silent[rows] = silent
        self.timeouts += int(went.sum())
        codes = np.where(self.policy[rows] == _POLICIES.index("hold"), _EVENT_CODE["timeout_hold"],
                         _EVENT_CODE["timeout_brake"])
        changed = went | back
        return {"t_ns": np.full(int(changed.sum()), t_ns, np.int64), "robot": ids[rows[changed]],
                "event": np.where(went, codes, _EVENT_CODE["resumed"])[changed].astype(np.uint8)}

    def summary(self) -> dict[str, Any]:
        """Counts for ``run.json``: commands taken and ignored per port, and timeouts."""
        return {"received": dict(self.received), "ignored": dict(self.ignored), "timeouts": self.timeouts}
