"""SUMO as a federate: background traffic sharing the world with coopsim's robots.

Scenario entry (``type: sumo``; parameters in ``params.SumoParams``)::

    federates:
      - name: traffic
        type: sumo
        params: {net: sumo/highway.net.xml, routes: [sumo/highway.rou.xml], period_s: 0.1}

Each step at t (after physics, since it reads ``state``):

1. **Mirror.** Every robot coopsim simulates itself is put into SUMO with ``moveToXY`` (free positioning, matched
   to the nearest lane), at its pose extrapolated to t + period at its current speed and heading, so that SUMO,
   which places it during its next step, has it where it will be. SUMO's cars follow it, brake behind it and
   change lanes around it. The extrapolation ignores acceleration and turning: the mirror is off by
   ``a P^2 / 2`` along and ``v w P^2 / 2`` across the heading (2 cm at 4 m/s^2 and P = 0.1 s).
2. **Advance** SUMO by one step of ``period_s`` (SUMO's ``--step-length``), to t + period.
3. **Publish** the poses SUMO's own vehicles have at t + period on ``poses`` (``t_ns`` = t + period), converted to
   the local frame and the rear axle (``frames``). The physics federate teleports those robots at t + period: their
   pose is SUMO's, exactly, never integrated (``federates.physics.models.posed``). A vehicle that departed in this
   step becomes a robot spawned at t + period; one that arrived is despawned then (``traffic`` logs both).

A robot the scenario gives to this federate (``driver: {federate: <name>}``) is driven by SUMO along
``drive_route`` instead of being mirrored (``driving``). ``lane_changes`` tells SUMO's vehicles to change lanes at
given times, before step 2 (``scripted``); ``lateral_resolution_m`` makes those, and all of SUMO's lane changes,
continuous (SUMO's sublane model).

SUMO's vehicles are robots like any other: they get a V2X station (they send and receive CAMs, loading the
channel), the range sensors see them and contacts with them are collisions. They take no commands: their
``command_source`` names this federate only so that the control federate leaves them alone.

Determinism: SUMO's ``--seed`` is drawn from the scenario seed (``stream(seed, <name>, "sumo")``); with the same
files and seed SUMO, and so the run, is the same bit for bit.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.federate import Federate, FederateMeta, Input, PortData, SetupContext
from core.ports import STATE, command_port, fields_of, port
from core.rng import stream
from core.robot_blocks import CommandSourceSpec, Dims, InitialState, VehicleBlock
from core.robots import RobotSpec, rows_of
from core.scenario_dir import scenario_directory
from core.timebase import seconds_to_ns
from federates.physics.models.posed import POSED_MODEL
from federates.physics.poses import POSES

from . import backend
from .driving import SumoDrivers
from .frames import Frame, read_location, wrap
from .params import SumoParams, resolve_input
from .scripted import LANE_CHANGE_EVENTS, LaneChangeEvent, LaneChangeScript

TRAFFIC_EVENTS = ("departed", "arrived", *LANE_CHANGE_EVENTS)
TRAFFIC = port("traffic", {"t_ns": ("int64", "ns"), "robot": ("int64", "robot id"),
                           "event": ("uint8", "-", TRAFFIC_EVENTS), "sumo_id": ("str", "-"),
                           "lane_from": ("int64", "-"), "lane_to": ("int64", "-"), "detail": ("str", "-")},
               index="event", doc="SUMO vehicles that became robots (departed) and left (arrived); the scenario's "
               "lane changes: requested, delayed, done or refused, with the lanes (-1: not a lane change) and SUMO's "
               "reason")

MIRROR_PREFIX = "coopsim."
"""SUMO vehicle ids of coopsim's robots (mirrored, or the twins SUMO drives): ``coopsim.<robot name>``."""

WHEELBASE_SHARE = 0.6
"""Wheelbase of a SUMO vehicle as a share of its length (a sedan's: 2.85 m of 4.74 m); only the control
federate's bookkeeping and the range sensor's geometry use it."""

_POSE_VARS = (0x42, 0x43, 0x40, 0x72)  # VAR_POSITION, VAR_ANGLE, VAR_SPEED, VAR_ACCELERATION (TraCI constants)
_EMPTY_POSES = {"t_ns": np.empty(0, np.int64), "robot": np.empty(0, np.int64),
                **{k: np.empty(0) for k in ("x", "y", "yaw", "v", "a", "yaw_rate")}}


class SumoFederate(Federate):
    """Steps SUMO in lock-step with the scheduler (see the module docstring)."""

    Params = SumoParams
    period_multiple_of_step = True
    """Validation refuses a ``period_s`` that is not a whole number of the scenario's steps."""
    reads_scenario_files = True
    """Built with ``scenario_dir`` (the directory its relative file names are resolved against) and
    ``scenario_origin`` (the local frame's WGS84 origin)."""

    def __init__(self, name: str, scenario_dir: Path | None = None,
                 scenario_origin: tuple[float, float] | None = None, **params: Any) -> None:
        super().__init__(name)
        self.scenario_origin = scenario_origin  # WGS84 (lat, lon) of the local frame: places geo-referenced nets
        with scenario_directory(scenario_dir):
            self.params = SumoParams(**params)
        p = self.params
        self.scenario_dir = scenario_dir
        self.net = resolve_input(p.net, "net", scenario_dir, p.allow_absolute_paths)
        self.routes = [resolve_input(r, f"routes[{k}]", scenario_dir, p.allow_absolute_paths)
                       for k, r in enumerate(p.routes)]
        self.period_ns = seconds_to_ns(p.period_s)
        self._sumo: Any = None
        self._ctx: SetupContext | None = None
        self._frame = Frame((0.0, 0.0))
        self._next_id = p.id_base
        # SUMO's own vehicles, in departure order
        self._own: dict[str, int] = {}  # SUMO id -> robot id
        self._own_length: dict[str, float] = {}
        self._own_yaw: dict[str, float] = {}  # last published yaw (for the yaw rate)
        # coopsim's robots mirrored into SUMO, in spawn order
        self._mirror_ids = np.empty(0, np.int64)
        self._mirror_names: list[str] = []
        self._mirror_length = np.empty(0)
        self._mirror_rear = np.empty(0)
        self._mirror_width = np.empty(0)
        self._in_sumo: set[str] = set()
        self._fresh: dict[str, float] = {}  # mirrored vehicles added for SUMO's next step -> their robot's speed
        self._routes_by_edge: dict[str, str] = {}
        self._vtypes: dict[tuple[float, float], str] = {}
        self._startup_events: PortData | None = None
        self._drivers = SumoDrivers(name, self.params.drive_route, self.params.drive_type, self._frame,
                                    self.params.period_s)
        self._lane_changes = LaneChangeScript(self.params.lane_changes)
        self._results: Mapping[str, Any] = {}
        self.departed = 0
        self.arrived = 0

    # -- setup ----------------------------------------------------------------------------------------------
    def setup(self, ctx: SetupContext) -> FederateMeta:
        p = self.params
        self._ctx = ctx
        self._frame = Frame.of(read_location(self.net), p.offset_m, self.scenario_origin)
        self._drivers.frame = self._frame
        fcd = None
        if ctx.out_dir is not None:
            self._keep_inputs(Path(ctx.out_dir))
            if p.fcd_output:
                fcd = Path(ctx.out_dir) / f"{self.name}.fcd.xml"
        seed = int(stream(ctx.seed, self.name, "sumo").integers(0, 2**31 - 1))
        args = backend.sumo_options(self.net, self.routes, p.period_s, seed, p.collision_action, fcd,
                                    p.lateral_resolution_m)
        self._sumo = backend.start(p.backend, args)
        # SUMO's state after a step is labelled with the time the step started (fcd-output, getDepartedIDList):
        # one step now gives its state at 0 (the vehicles departing at 0, spawned at 0 at their SUMO pose), so the
        # step made at instant t gives its state at t + period, which is published for then
        self._sumo.simulationStep()
        self._startup_events = self._collect(0)[TRAFFIC.name]  # published with the first step's
        reads = p.mirror or p.drive_route is not None
        inputs = (Input(STATE.name, fields=fields_of(STATE, ("x", "y", "yaw", "v"))),) if reads else ()
        drives = (command_port(self.name),) if p.drive_route is not None else ()
        return FederateMeta(inputs=inputs, outputs=(POSES, TRAFFIC, *drives), period_ns=self.period_ns)

    def _keep_inputs(self, out_dir: Path) -> None:
        """Copy the files named relative to the scenario next to the run's resolved scenario, under the same
        names, so that ``coopsim run <run dir>/scenario.resolved.yaml`` finds them (absolute names need nothing)."""
        p = self.params
        for given, path in ((p.net, self.net), *zip(p.routes, self.routes, strict=True)):
            if Path(given).is_absolute():
                continue
            target = out_dir / given
            if target.resolve() == path:
                continue  # a rerun from the run directory itself
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)

    # -- robots -----------------------------------------------------------------------------------------------
    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        """coopsim's own robots are mirrored from the next step on, those SUMO drives get their twins then; SUMO's
        are already known."""
        self._drivers.add([r for r in robots if SumoDrivers.drives(r, self.name)])
        if not self.params.mirror:
            return
        mirrored = [r for r in robots if r.posed_by != self.name and not SumoDrivers.drives(r, self.name)]
        if not mirrored:
            return
        dims = [r.dims for r in mirrored]
        self._mirror_ids = np.concatenate([self._mirror_ids, np.array([r.id for r in mirrored], np.int64)])
        self._mirror_names.extend(r.name for r in mirrored)
        self._mirror_length = np.concatenate([self._mirror_length, [d.length_m for d in dims]])
        self._mirror_rear = np.concatenate([self._mirror_rear, [d.rear_overhang_m for d in dims]])
        self._mirror_width = np.concatenate([self._mirror_width, [d.width_m for d in dims]])

    def despawn(self, robot_ids: Sequence[int]) -> None:
        """A mirrored or driven robot that leaves coopsim leaves SUMO too."""
        self._drivers.remove(self._sumo, robot_ids)
        gone = np.isin(self._mirror_ids, np.asarray(robot_ids, np.int64))
        if not gone.any():
            return
        for k in np.flatnonzero(gone):
            vid = MIRROR_PREFIX + self._mirror_names[k]
            self._fresh.pop(vid, None)
            if vid in self._in_sumo:
                self._sumo.vehicle.remove(vid)
                self._in_sumo.discard(vid)
        keep = ~gone
        self._mirror_ids = self._mirror_ids[keep]
        self._mirror_names = [n for n, k in zip(self._mirror_names, keep, strict=True) if k]
        self._mirror_length = self._mirror_length[keep]
        self._mirror_rear = self._mirror_rear[keep]
        self._mirror_width = self._mirror_width[keep]

    # -- stepping ---------------------------------------------------------------------------------------------
    def step(self, t_ns: int, inputs: Mapping[str, PortData]) -> Mapping[str, PortData]:
        state = inputs.get(STATE.name)
        if self.params.mirror:
            self._mirror(state)
        self._drivers.insert(self._sumo, state)
        told = self._lane_changes.issue(self._sumo, t_ns)
        self._sumo.simulationStep()
        told += self._lane_changes.watch(self._sumo, t_ns + self.period_ns)  # before _collect forgets arrivals
        told_robots = [self._own.get(e.vehicle, -1) for e in told]
        out = self._collect(t_ns + self.period_ns)
        if told:
            out[TRAFFIC.name] = _join_events(_lane_change_rows(told, told_robots), out[TRAFFIC.name])
        if self.params.drive_route is not None:
            out[command_port(self.name).name] = self._drivers.commands(self._sumo, self._results, state)
        if self._startup_events is not None:
            first, self._startup_events = self._startup_events, None
            out[TRAFFIC.name] = _join_events(first, out[TRAFFIC.name])
        return out

    def unmet_requests(self) -> list[str]:
        """The scenario's lane changes SUMO delayed or refused, one line each (``run.json`` notes and outcomes)."""
        return [f"{self.name}: {line}" for line in self._lane_changes.unmet]

    def _mirror(self, state: PortData | None) -> None:
        """Put every mirrored robot where it will be at the end of SUMO's next step."""
        if state is None or not len(self._mirror_ids):
            return
        rows = rows_of(state["id"], self._mirror_ids, missing=-1)
        have = rows >= 0
        r = rows[have]
        x, y, yaw, v = (np.asarray(state[k])[r] for k in ("x", "y", "yaw", "v"))
        ahead = v * self.params.period_s  # SUMO places it during its next step: where it will be then
        fx, fy, angle = self._frame.to_sumo(x + ahead * np.cos(yaw), y + ahead * np.sin(yaw), yaw,
                                            self._mirror_length[have], self._mirror_rear[have])
        vehicle = self._sumo.vehicle
        for k, index in enumerate(np.flatnonzero(have)):
            vid = MIRROR_PREFIX + self._mirror_names[index]
            if vid not in self._in_sumo:
                if not self._insert(vid, float(fx[k]), float(fy[k]), index):
                    continue  # not on the network (yet): SUMO cannot hold it
                self._fresh[vid] = float(v[k])
            vehicle.moveToXY(vid, "", -1, float(fx[k]), float(fy[k]), float(angle[k]), keepRoute=2)

    def _insert(self, vid: str, x: float, y: float, index: int) -> bool:
        """Add a mirrored robot to SUMO on the edge under it (False when it is off the network)."""
        sumo = self._sumo
        try:
            edge, _, _ = sumo.simulation.convertRoad(x, y)
        except Exception:  # libsumo and TraCI raise their own TraCIException
            return False
        if not edge or edge.startswith(":"):
            return False
        route = self._routes_by_edge.get(edge)
        if route is None:
            route = self._routes_by_edge[edge] = f"{MIRROR_PREFIX}route.{edge}"
            sumo.route.add(route, [edge])
        size = (round(float(self._mirror_length[index]), 3), round(float(self._mirror_width[index]), 3))
        vtype = self._vtypes.get(size)
        if vtype is None:
            vtype = self._vtypes[size] = f"{MIRROR_PREFIX}type{len(self._vtypes)}"
            sumo.vehicletype.copy("DEFAULT_VEHTYPE", vtype)
            sumo.vehicletype.setLength(vtype, size[0])
            sumo.vehicletype.setWidth(vtype, size[1])
        sumo.vehicle.add(vid, route, vtype, depart="now")
        sumo.vehicle.setLaneChangeMode(vid, 0)  # it goes where coopsim puts it
        self._in_sumo.add(vid)
        return True

    def _collect(self, t_ns: int) -> dict[str, PortData]:
        """SUMO's vehicles after its step (valid at ``t_ns``): spawn and despawn requests, poses, events."""
        sumo, ctx = self._sumo, self._ctx
        assert ctx is not None
        events_robot: list[int] = []
        events_code: list[int] = []
        events_vid: list[str] = []
        arrived = sumo.simulation.getArrivedIDList()
        for vid in arrived:
            if vid.startswith(MIRROR_PREFIX):
                self._in_sumo.discard(vid)  # it drove off its edge's end: inserted again if still on the network
                self._drivers.inserted.discard(vid)
                continue
            robot = self._own.pop(vid, None)
            if robot is None:
                continue
            self._own_length.pop(vid)
            self._own_yaw.pop(vid, None)
            ctx.request_despawn(robot, t_ns)
            events_robot.append(robot)
            events_code.append(1)
            events_vid.append(vid)
            self.arrived += 1
        for vid in sumo.simulation.getDepartedIDList():
            if vid in self._fresh:  # SUMO gave it speed 0 (no previous position): its followers see the robot's
                sumo.vehicle.setPreviousSpeed(vid, self._fresh.pop(vid))
        gone = set(arrived)  # a vehicle may depart and arrive within one step: it never becomes a robot
        new = [vid for vid in sumo.simulation.getDepartedIDList() if not vid.startswith(MIRROR_PREFIX)
               and vid not in gone]
        for vid in new:
            self._own[vid] = self._next_id
            self._next_id += 1
            self._own_length[vid] = sumo.vehicle.getLength(vid)
            sumo.vehicle.subscribe(vid, _POSE_VARS)
        results = self._results = sumo.vehicle.getAllSubscriptionResults()
        vids = [vid for vid in self._own if vid in results]
        if not vids:
            poses = dict(_EMPTY_POSES)
        else:
            got = [results[vid] for vid in vids]
            fx = np.array([g[0x42][0] for g in got])
            fy = np.array([g[0x42][1] for g in got])
            angle = np.array([g[0x43] for g in got])
            length = np.array([self._own_length[vid] for vid in vids])
            x, y, yaw = self._frame.to_local(fx, fy, angle, length, self.params.rear_overhang_share * length)
            before = np.array([self._own_yaw.get(vid, np.nan) for vid in vids])
            yaw_rate = np.where(np.isfinite(before), wrap(yaw - before) / self.params.period_s, 0.0)
            self._own_yaw.update(zip(vids, yaw.tolist(), strict=True))
            poses = {"t_ns": np.full(len(vids), t_ns, np.int64),
                     "robot": np.array([self._own[vid] for vid in vids], np.int64),
                     "x": x, "y": y, "yaw": yaw, "v": np.array([g[0x40] for g in got]),
                     "a": np.array([g[0x72] for g in got]), "yaw_rate": yaw_rate}
        if new:
            row = {vid: k for k, vid in enumerate(vids)}
            for vid in new:
                k = row.get(vid)
                if k is None:
                    continue
                robot = self._own[vid]
                ctx.request_spawn(self._spec(vid, robot, {key: float(poses[key][k]) for key in ("x", "y", "yaw", "v")},
                                             t_ns), t_ns)
                events_robot.append(robot)
                events_code.append(0)
                events_vid.append(vid)
                self.departed += 1
        n = len(events_robot)
        events = {"t_ns": np.full(n, t_ns, np.int64), "robot": np.array(events_robot, np.int64),
                  "event": np.array(events_code, np.uint8), "sumo_id": np.array(events_vid, dtype=object),
                  "lane_from": np.full(n, -1, np.int64), "lane_to": np.full(n, -1, np.int64),
                  "detail": np.full(n, "", dtype=object)}
        return {POSES.name: poses, TRAFFIC.name: events}

    def _spec(self, vid: str, robot: int, initial: dict[str, float], t_ns: int) -> RobotSpec:
        """The robot of SUMO vehicle ``vid``: its SUMO size, a posed body, its pose when it appears."""
        sumo = self._sumo
        length = self._own_length[vid]
        dims = Dims(length, float(sumo.vehicle.getWidth(vid)), self.params.rear_overhang_share * length,
                    WHEELBASE_SHARE * length)
        return RobotSpec(id=robot, name=f"{self.name}.{vid}", spawn_ns=t_ns, platoon=-1,
                         vehicle=VehicleBlock("g35_sedan", POSED_MODEL, dims.plain()), dims=dims,
                         initial=InitialState.from_plain(initial),
                         command_source=CommandSourceSpec(self.name, POSES.name), posed_by=self.name)

    def finalize(self) -> None:
        """Close SUMO (its outputs are written then)."""
        if self._sumo is not None:
            sumo, self._sumo = self._sumo, None
            backend.stop(sumo)


def _lane_change_rows(events: Sequence[LaneChangeEvent], robots: Sequence[int]) -> dict[str, np.ndarray]:
    """``traffic`` rows of scripted lane-change events (``robots``: their robot ids, -1 for a vehicle not a robot)."""
    return {"t_ns": np.array([e.t_ns for e in events], np.int64), "robot": np.array(robots, np.int64),
            "event": np.array([TRAFFIC_EVENTS.index(e.event) for e in events], np.uint8),
            "sumo_id": np.array([e.vehicle for e in events], dtype=object),
            "lane_from": np.array([e.lane_from for e in events], np.int64),
            "lane_to": np.array([e.lane_to for e in events], np.int64),
            "detail": np.array([e.detail for e in events], dtype=object)}


def _join_events(first: PortData, then: PortData) -> dict[str, np.ndarray]:
    """Two batches of ``traffic`` rows as one, ``first`` first (events stay in time order)."""
    return {k: np.concatenate([first[k], v]) for k, v in then.items()}
