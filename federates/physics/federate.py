"""The physics federate: owns the robots' bodies, steps their vehicle models, publishes truth, estimate, range and
collisions.

Robots appear here first (spawn), so every other federate's per-robot parts follow the rows this federate keeps.
Vehicle models are grouped by (model, input mode); each group steps its robots in one vectorised call. With a
single group (the usual case) the group arrays are the published arrays and nothing is gathered or scattered.

Ports (robot-indexed ones in roster order, ``id`` first):

- ``state``: ground truth (``STATE_FIELDS``, rear-axle point).
- ``estimate``: what the robot believes, the same fields. ``physics.estimate`` picks the source:
  ``ground_truth`` (the state itself), ``odometry`` (dead reckoning from the rear wheels, slip included, heading
  from the gyro or the wheels) or ``odometry_gnss`` (an EKF: odometry predicts every step, a GNSS fix corrects every
  ``gnss.period_s``). With a sensor estimate, ``x, y, yaw`` come from the estimator, ``v`` is the odometric speed
  of the last step, ``yaw_rate`` the gyro reading, ``a`` the longitudinal accelerometer (true ``a`` plus
  ``imu.accel_noise_std`` white noise) and ``steer`` the steering actuator's position (a servo reports it).
- ``range``: forward range sensor towards the nearest vehicle ahead, ``range_m`` [m] from the front bumper to its
  rear bumper centre, ``range_rate_mps`` [m/s] (positive when opening), ``target`` (its robot id, -1 when nothing is
  seen, then NaN range). Measured every ``range_sensor.period_s`` (and right after a roster change); the port holds
  the last measurement in between.
- ``collisions``: one row per new contact between two bodies (``t_ns``, robot ids ``a`` < ``b`` in row order), a
  contact being new when the pair did not overlap at the previous step; published every step (empty when nothing
  new). ``collisions`` (the attribute) keeps every event of the run.

Randomness: per-step sensor noise is ``core.rng.KeyedNormal(seed, <federate name>, <purpose>)``, keyed by
robot id and time; constant errors (wheel scale factors, gyro bias) come from ``stream(seed, <federate name>,
<purpose>, robot id)``. A new robot never changes another robot's draws. Draws are keyed by a robot's ``draw_id``
and the range scan and contact test run per universe (``core.universes``), so many batch points can share this
federate and each gets what a run of it alone gets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.federate import Federate, FederateMeta, Input, SetupContext
from core.ports import (
    COLLISION_FIELDS,
    COLLISIONS,
    COMMAND_EVENT_PORT,
    COMMAND_FIELDS,
    COMMANDS,
    ESTIMATE,
    EXTERNAL_COMMAND_FIELDS,
    RANGE,
    STATE,
    STATE_FIELDS,
    port,
)
from core.rng import KeyedNormal, stream
from core.robots import RobotSpec, param_column, rows_of
from core.spawn_columns import block_column, shared_blocks, spec_column, vehicle_params
from core.timebase import ns_to_seconds, seconds_to_ns
from core.universes import universe_segments

from .collisions import CollisionError, ContactMonitor
from .command_sources import NO_EVENTS, CommandSources
from .config import PhysicsConfig
from .models import VEHICLE_MODELS
from .poses import POSES, PoseInbox
from .range_scan import RangeSensor, range_port
from .sensors import DeadReckoning, Gnss, Imu, PoseFusion
from .snapshot import state_snapshot

_STATE_KEYS = tuple(STATE_FIELDS)
_NO_COLLISIONS: dict[str, np.ndarray] = {key: np.empty(0, np.int64) for key in COLLISION_FIELDS}
GroupKey = tuple[str, str]  # (vehicle model, input mode)

class PhysicsFederate(Federate):
    """Steps all vehicle bodies every ``step_ns``; commands act from the step after they were issued."""

    def __init__(self, name: str, step_ns: int, config: PhysicsConfig | Mapping[str, Any] | None = None,
                 command_ports: Sequence[str] = ()) -> None:
        super().__init__(name)
        self.step_ns = step_ns
        # a hosted physics federate gets its configuration as plain data (``execution.remote``)
        self.config = PhysicsConfig.model_validate(config) if isinstance(config, Mapping) else config or PhysicsConfig()
        self.dt = ns_to_seconds(step_ns)
        self.sources = CommandSources(command_ports, self.dt)
        """The robots external sources drive (``command_sources``): their last commands and silences."""
        self._groups: dict[GroupKey, Any] = {}  # (model, input mode) -> VehicleModel
        self._group_number = np.empty(0, np.int64)  # per row: the position of its group in self._groups
        self._group_rows: dict[GroupKey, np.ndarray] = {}  # per group, its rows in roster order
        self._ids = np.empty(0, np.int64)
        self._draw_ids = np.empty(0, np.int64)  # the ids random draws are keyed by (``RobotSpec.draw_id``)
        self._universe = np.empty(0, np.int64)  # per row, its batch point (``RobotSpec.universe``)
        self._universes: tuple[np.ndarray, np.ndarray] | None = None  # universe_segments; None: one universe
        self._noises: list[KeyedNormal] = []
        self._names: list[str] = []
        self._stepped_once = False
        self._aligned_ids: np.ndarray | None = None
        self._bodies = ContactMonitor()  # body geometry per row and the pairs in contact
        self.collisions: list[tuple[int, int, int]] = []
        """Every new contact of the run: ``(t_ns, id_a, id_b)``."""
        self.poses = PoseInbox()
        """Poses of externally posed robots (``poses``) waiting for the time they are valid."""
        self._seed = 0
        self._odometry: DeadReckoning | None = None
        self._imu: Imu | None = None
        self._gnss: Gnss | None = None
        self._fusion: PoseFusion | None = None
        self._range: RangeSensor | None = None
        self._gnss_period_ns = 0
        self._next_gnss_ns = 0
        self._range_period_ns = 0
        self._bearing_noise: KeyedNormal | None = None
        self._next_range_ns = 0

    def setup(self, ctx: SetupContext) -> FederateMeta:
        cfg = self.config
        self._seed = ctx.seed
        if cfg.estimate != "ground_truth":
            odo, imu = cfg.odometry, cfg.imu
            self._odometry = DeadReckoning(self._keyed("odometry"), odo.noise_rel, odo.noise_abs_m,
                                           odo.scale_error_std, odo.heading_source)
            self._imu = Imu(self._keyed("imu"), imu.yaw_rate_noise_std, imu.yaw_rate_bias_std, imu.accel_noise_std)
        if cfg.estimate == "odometry_gnss":
            self._gnss = Gnss(self._keyed("gnss"), cfg.gnss.pos_std_m, cfg.gnss.yaw_std_rad)
            self._fusion = PoseFusion(cfg.fusion.odo_noise_rel, cfg.fusion.yaw_noise_per_m, cfg.gnss.pos_std_m,
                                      cfg.gnss.yaw_std_rad)
            self._gnss_period_ns = max(seconds_to_ns(cfg.gnss.period_s), 1)
        if cfg.range_sensor.enabled:
            r = cfg.range_sensor
            self._range = RangeSensor(self._keyed("range"), r.max_range_m, r.fov_rad, r.range_noise_std_m,
                                       r.range_rate_noise_std_mps, r.corridor_half_width_m, r.keep_factor)
            self._range_period_ns = max(seconds_to_ns(r.period_s), 1)
            self._bearing_noise = self._keyed("range_bearing") if r.bearing_noise_std_rad > 0 else None
        external = tuple(Input(name, delayed=True, queued=True,
                               fields=port(name, EXTERNAL_COMMAND_FIELDS, index="event").fields)
                         for name in self.sources.ports)  # act from the next step, like ``commands``
        # poses of externally driven robots (a traffic simulator): optional, taken like external commands
        posed = Input(POSES.name, delayed=True, queued=True, fields=POSES.fields, optional=True)
        return FederateMeta(
            inputs=(Input("commands", delayed=True, fields=COMMANDS.fields), *external, posed),
            outputs=(STATE, ESTIMATE, RANGE, COLLISIONS, *((COMMAND_EVENT_PORT,) if external else ())),
            period_ns=self.step_ns,
        )

    def _keyed(self, purpose: str) -> KeyedNormal:
        """Per-step sensor noise keyed by (seed, federate, purpose, robot id, time): one robot's noise never
        changes when other robots appear or leave."""
        noise = KeyedNormal(self._seed, self.name, purpose)
        noise.ids = self._draw_ids
        self._noises.append(noise)
        return noise

    def _stream(self, purpose: str, robot_id: int | None = None) -> np.random.Generator:
        labels: tuple[str | int, ...] = (self.name, purpose) if robot_id is None else (self.name, purpose, robot_id)
        return stream(self._seed, *labels)

    # -- robots -------------------------------------------------------------------------------------------------
    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        if not robots:
            return
        # per distinct vehicle block, not per robot: a fleet of one template is one block
        params = vehicle_params(robots)
        blocks, block_of = shared_blocks(spec_column(robots, "vehicle"))
        block_keys = [(block.model, block.input_mode) for block in blocks]
        starts = spec_column(robots, "initial")
        initial = {key: block_column(starts, key) for key in ("x", "y", "yaw", "v")}
        for key in dict.fromkeys(block_keys):
            if key not in self._groups:
                self._groups[key] = self._new_model(key)
            if self._odometry is not None and not hasattr(self._groups[key], "wheel_odometry"):
                raise ValueError(f"vehicle model '{key[0]}' has no wheel odometry; use physics.estimate: ground_truth")
        numbers = {key: g for g, key in enumerate(self._groups)}
        group_of = np.array([numbers[key] for key in block_keys], np.int64)[block_of]
        for key in dict.fromkeys(block_keys):  # rows keep spawn order within each group
            sel = np.flatnonzero(group_of == numbers[key])
            self._groups[key].add(params.take(sel), {name: arr[sel] for name, arr in initial.items()})
        self._group_number = np.concatenate([self._group_number, group_of])
        names = spec_column(robots, "name")
        self._names.extend(names)
        ids = np.array(spec_column(robots, "id"), np.int64)
        self._ids = np.concatenate([self._ids, ids])
        draw_ids = np.array(spec_column(robots, "draw_id"), np.int64)
        self._draw_ids = np.concatenate([self._draw_ids, draw_ids])
        self._universe = np.concatenate([self._universe, np.array(spec_column(robots, "universe"), np.int64)])
        for noise in self._noises:
            noise.ids = self._draw_ids
        dims = spec_column(robots, "dims")
        length, width, rear = (block_column(dims, key) for key in ("length_m", "width_m", "rear_overhang_m"))
        self._bodies.add(length, width, rear, params.column("max_accel_mps2", 10.0))
        self.sources.add(robots, params, max(min(spec_column(robots, "spawn_ns")), 0), initial["v"], names)
        self._spawn_sensors(robots, params, draw_ids, initial, length, rear, width)
        self._rows_changed()

    def _new_model(self, key: GroupKey) -> Any:
        model, mode = key
        cls = VEHICLE_MODELS.get(model)
        # models without input modes of their own take the default one and need not accept the argument
        return cls(self.dt) if mode == "speed_steer" else cls(self.dt, input_mode=mode)

    def _spawn_sensors(self, robots: Sequence[RobotSpec], params: list[dict[str, Any]], ids: np.ndarray,
                       initial: dict[str, np.ndarray], length: np.ndarray, rear: np.ndarray,
                       width: np.ndarray) -> None:
        """The robots' sensor rows; ``ids``: their draw ids (the constant errors' streams)."""
        cfg = self.config
        n = len(robots)
        x, y, yaw = initial["x"], initial["y"], initial["yaw"]
        if self._odometry is not None and self._imu is not None:
            track = param_column(params, "track_m", 0.0)
            if cfg.odometry.heading_source == "wheels" and np.any(track <= 0):
                bad = robots[int(np.flatnonzero(track <= 0)[0])].name
                raise ValueError(f"robot {bad}: odometry heading from the wheels needs track_m > 0")
            scale = [self._stream("odometry_scale", int(i)) for i in ids] if cfg.odometry.scale_error_std else None
            self._odometry.add(track, x, y, yaw, scale)
            self._odometry.speed[-n:] = initial["v"]  # before the first step the speed is the initial one
            bias = [self._stream("imu_bias", int(i)) for i in ids] if cfg.imu.yaw_rate_bias_std else None
            self._imu.add(n, bias)
        if self._fusion is not None:
            self._fusion.add(x, y, yaw)
        if self._range is not None:
            self._range.add(length - rear, rear, width)

    def despawn(self, robot_ids: Sequence[int]) -> None:
        gone = np.isin(self._ids, np.asarray(robot_ids, np.int64))
        if not gone.any():
            return
        for key, group in self._groups.items():
            local = np.flatnonzero(gone[self._group_rows[key]])
            if len(local):
                group.remove(local)
        rows = np.flatnonzero(gone)
        for sensor in (self._odometry, self._imu, self._fusion, self._range):
            if sensor is not None:
                sensor.remove(rows)
        keep = ~gone
        self._ids = self._ids[keep]
        self._draw_ids = self._draw_ids[keep]
        self._universe = self._universe[keep]
        for noise in self._noises:
            noise.ids = self._draw_ids
        self._group_number = self._group_number[keep]
        self._names = [n for n, k in zip(self._names, keep, strict=True) if k]
        self._bodies.remove(keep, self._ids.tolist())
        self.sources.remove(keep)
        self._rows_changed()

    def _rows_changed(self) -> None:
        self._group_rows = {key: np.flatnonzero(self._group_number == g) for g, key in enumerate(self._groups)}
        self._aligned_ids = None
        self._universes = universe_segments(self._universe)
        self._next_range_ns = 0  # the held range rows no longer match: measure at the next step

    def _hold_commands(self) -> dict[str, np.ndarray]:
        """Commands that keep the current speed and steering (used before a controller has spoken)."""
        state = self._state()
        return {
            "id": self._ids.copy(),
            "speed": state["v"].copy(),
            "accel": np.zeros(len(self._ids)),
            "steer": state["steer"].copy(),
            "yaw_rate": state["yaw_rate"].copy(),
        }

    # -- stepping -----------------------------------------------------------------------------------------------
    def _single_group(self) -> Any | None:
        return next(iter(self._groups.values())) if len(self._groups) == 1 else None

    def _gather(self, part: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """``part`` (``state`` or ``wheel_odometry``) of every group, in roster order (views with one group)."""
        single = self._single_group()
        if single is not None:
            got = single.state if part == "state" else single.wheel_odometry()
            return {key: got[key] for key in keys}
        out = {key: np.empty(len(self._ids)) for key in keys}
        for gkey, group in self._groups.items():
            rows = self._group_rows[gkey]
            if not len(rows):
                continue
            got = group.state if part == "state" else group.wheel_odometry()
            for key in keys:
                out[key][rows] = got[key]
        return out

    def _state(self) -> dict[str, np.ndarray]:
        single = self._single_group()
        return single.state if single is not None else self._gather("state", _STATE_KEYS)

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> dict[str, Any]:
        for noise in self._noises:
            noise.at(t_ns)
        moved = bool(len(self._ids)) and self._stepped_once
        sources = self.sources
        for name in sources.ports:
            sources.receive(t_ns, name, inputs.get(name) or (), self._ids)
        events = None
        if moved:
            commands = inputs.get("commands")
            if commands is None or commands["id"] is not self._aligned_ids:
                if commands is not None and np.array_equal(commands["id"], self._ids):
                    self._aligned_ids = commands["id"]  # same rows: trust this id array from now on
                else:
                    commands = self._align(commands)
            if sources.any:  # external rows replace the control federate's (NaN) ones, in a private copy
                commands = {key: np.array(commands[key], np.float64) for key in COMMAND_FIELDS}
                events = sources.merge(t_ns, commands, self._state(), self._ids)
            single = self._single_group()
            if single is not None:
                single.step(commands)
            else:
                for key, group in self._groups.items():
                    rows = self._group_rows[key]
                    if len(rows):
                        group.step({k: np.ascontiguousarray(commands[k][rows]) for k in COMMAND_FIELDS})
        self.poses.receive(inputs.get(POSES.name) or ())
        self.poses.apply(t_ns, self._ids, self._groups, self._group_rows)
        self._stepped_once = True
        state = self._state()
        copies, finite = state_snapshot(state, _STATE_KEYS)
        if not finite:
            self._check_finite(state, t_ns)  # names the robot
        snapshot = {"id": self._ids, **copies}
        out: dict[str, Any] = {"state": snapshot}
        out["estimate"] = snapshot if self._imu is None else self._estimate(t_ns, snapshot, moved)
        if self._range is not None and t_ns >= self._next_range_ns:
            out["range"] = self._measure_range(snapshot)
            self._next_range_ns = (t_ns // self._range_period_ns + 1) * self._range_period_ns
        if self.config.check_collisions:
            out["collisions"] = self._check_collisions(t_ns, snapshot)
        if sources.ports:
            out["command_events"] = events if events is not None else NO_EVENTS
        return out

    def _estimate(self, t_ns: int, truth: Mapping[str, np.ndarray], moved: bool) -> dict[str, np.ndarray]:
        """The sensor-based estimate (see the module docstring for where each field comes from)."""
        assert self._odometry is not None and self._imu is not None
        imu = self._imu.measure(truth["yaw_rate"], ax=truth["a"])
        odo = self._odometry
        if moved:
            wheels = self._gather("wheel_odometry", ("dist_rl", "dist_rr"))
            use_imu = self.config.odometry.heading_source == "imu"
            odo.step(wheels["dist_rl"], wheels["dist_rr"], self.dt, imu["yaw_rate"] if use_imu else None)
        pose = odo.pose
        if self._fusion is not None and self._gnss is not None:
            if moved:
                self._fusion.predict(odo.ds, odo.dth)
            if t_ns >= self._next_gnss_ns:
                self._fusion.update(self._gnss.measure(truth["x"], truth["y"], truth["yaw"]))
                self._next_gnss_ns = (t_ns // self._gnss_period_ns + 1) * self._gnss_period_ns
            pose = self._fusion.pose
        return {
            "id": self._ids,
            "x": pose["x"].copy(), "y": pose["y"].copy(), "yaw": pose["yaw"].copy(),
            "v": odo.speed.copy(), "a": imu["ax"], "yaw_rate": imu["yaw_rate"], "steer": truth["steer"],
        }

    def _measure_range(self, truth: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        assert self._range is not None
        return range_port(self._range, truth, self._ids, self._bearing_noise,
                          self.config.range_sensor.bearing_noise_std_rad, self._universes)

    def _check_collisions(self, t_ns: int, truth: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """New contacts at this step (``ContactMonitor``), kept in ``collisions`` and published as rows."""
        ids = self._ids
        new = self._bodies.new_contacts(t_ns, truth["x"], truth["y"], truth["yaw"], truth["v"], ids, self._universes)
        if not new:
            return _NO_COLLISIONS
        self.collisions.extend((t_ns, a, b) for a, b in new)
        if self.config.stop_on_collision:
            name = dict(zip(ids.tolist(), self._names, strict=True))
            raise CollisionError(name[new[0][0]], name[new[0][1]], t_ns)
        return {"t_ns": np.full(len(new), t_ns, np.int64), "a": np.array([p[0] for p in new], np.int64),
                "b": np.array([p[1] for p in new], np.int64)}

    def _align(self, commands: Mapping[str, np.ndarray] | None) -> dict[str, np.ndarray]:
        """Commands in this federate's row order; robots without a command hold speed and steering."""
        aligned = {k: v.copy() for k, v in self._hold_commands().items()}
        if commands is None or not len(commands["id"]):
            return aligned
        src = rows_of(commands["id"], self._ids, missing=-1)
        have = src >= 0
        for key in COMMAND_FIELDS:
            aligned[key][have] = np.asarray(commands[key])[src[have]]
        return aligned

    def _check_finite(self, state: Mapping[str, np.ndarray], t_ns: int) -> None:
        if np.isfinite(state["x"].sum() + state["y"].sum() + state["v"].sum()):
            return  # one cheap test per step; find the culprit only when it fails
        bad = ~np.isfinite(state["x"]) | ~np.isfinite(state["y"]) | ~np.isfinite(state["v"])
        if bad.any():
            error = FloatingPointError("vehicle state became non-finite")
            error.robot = self._names[int(np.flatnonzero(bad)[0])]  # type: ignore[attr-defined]
            raise error

    def run_summary(self) -> dict[str, Any]:
        """External commands taken and ignored per source port, and timeouts (empty without external sources)."""
        return self.sources.summary() if self.sources.ports else {}

    @property
    def names(self) -> list[str]:
        """Robot names in row order."""
        return list(self._names)
