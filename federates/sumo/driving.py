"""SUMO as a robot's driver: a leader that the scenario gives to the SUMO federate (``driver: {federate: <name>}``)
is driven by a SUMO vehicle along a route of the route files, and coopsim's vehicle model follows it.

SUMO drives a twin ``coopsim.<robot name>`` of the robot: inserted where the robot is, on the rest of route
``drive_route`` from the robot's edge, at its speed, lane changes off. SUMO's car-following model sets its speed
(traffic ahead, speed limits, the vehicle type's desired speed). Each step the federate commands the robot towards
where its twin is at t + period, compared with the robot's pose extrapolated to then, by a tracking law on the
unicycle (Kanayama et al., "A stable tracking control method for an autonomous mobile robot", ICRA 1990):

    v = v_r cos(e_yaw) + e_x / TAU_S,    w = w_r + v_r (e_y / L + sin(e_yaw)) / L    (L = LOOKAHEAD_M)

with (e_x, e_y) the twin's rear axle in the extrapolated robot's frame and e_yaw the heading difference. The
robot's vehicle model stays coopsim's (its lags and limits), so the robot is off its twin by what the model adds;
the twin is not moved to the robot. Commands go out on ``commands_<federate>`` like any external command source's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.federate import PortData
from core.ports import COMMAND_FIELDS
from core.robots import RobotSpec, rows_of

from .frames import Frame, wrap

TAU_S = 1.0
"""Time constant [s] in which a distance along the heading is made up."""

LOOKAHEAD_M = 10.0
"""Distance [m] over which a sideways offset and a heading error are steered out."""

TWIN_PREFIX = "coopsim."


class SumoDrivers:
    """The robots SUMO drives: their twins in SUMO and the commands that make the robots follow them."""

    def __init__(self, federate: str, route: str | None, vtype: str | None, frame: Frame, period_s: float) -> None:
        self.federate = federate
        self.route = route
        self.vtype = vtype
        self.frame = frame
        self.period_s = period_s
        self.ids = np.empty(0, np.int64)
        self.names: list[str] = []
        self.length = np.empty(0)
        self.rear = np.empty(0)
        self.width = np.empty(0)
        self.inserted: set[str] = set()
        self._yaw: dict[str, float] = {}

    @staticmethod
    def drives(spec: RobotSpec, federate: str) -> bool:
        """Whether the scenario gives this robot's driving to SUMO federate ``federate``."""
        return spec.driven_by(federate) and spec.posed_by is None

    def add(self, robots: Sequence[RobotSpec]) -> None:
        """Robots SUMO drives from their first step."""
        if robots and self.route is None:
            raise ValueError(f"robot '{robots[0].name}' is driven by '{self.federate}', which has no drive_route")
        dims = [r.dims for r in robots]
        self.ids = np.concatenate([self.ids, np.array([r.id for r in robots], np.int64)])
        self.names.extend(r.name for r in robots)
        self.length = np.concatenate([self.length, [d.length_m for d in dims]])
        self.rear = np.concatenate([self.rear, [d.rear_overhang_m for d in dims]])
        self.width = np.concatenate([self.width, [d.width_m for d in dims]])

    def remove(self, sumo: Any, robot_ids: Sequence[int]) -> None:
        """Robots that left coopsim: their twins leave SUMO."""
        gone = np.isin(self.ids, np.asarray(robot_ids, np.int64))
        for k in np.flatnonzero(gone):
            vid = TWIN_PREFIX + self.names[k]
            if vid in self.inserted:
                sumo.vehicle.remove(vid)
                self.inserted.discard(vid)
        keep = ~gone
        self.ids, self.length, self.rear, self.width = (a[keep] for a in (self.ids, self.length, self.rear,
                                                                          self.width))
        self.names = [n for n, k in zip(self.names, keep, strict=True) if k]

    def insert(self, sumo: Any, state: PortData | None) -> None:
        """Put the twins of robots not yet in SUMO where the robots are (they enter in SUMO's next step)."""
        if state is None or len(self.inserted) == len(self.names):
            return
        rows = rows_of(state["id"], self.ids, missing=-1)
        for k, name in enumerate(self.names):
            vid = TWIN_PREFIX + name
            if vid in self.inserted or rows[k] < 0:
                continue
            r = rows[k]
            x, y, yaw, v = (np.asarray([state[key][r]], float) for key in ("x", "y", "yaw", "v"))
            ahead = v * self.period_s  # it enters during SUMO's next step: where the robot will be then
            fx, fy, _ = self.frame.to_sumo(x + ahead * np.cos(yaw), y + ahead * np.sin(yaw), yaw,
                                           self.length[k:k + 1], self.rear[k:k + 1])
            edge, pos, lane = sumo.simulation.convertRoad(float(fx[0]), float(fy[0]))
            edges = list(sumo.route.getEdges(self.route))
            if edge not in edges:
                raise ValueError(f"robot '{name}' is on edge '{edge}', which route '{self.route}' does not take")
            route = f"{TWIN_PREFIX}drive.{name}"
            sumo.route.add(route, edges[edges.index(edge):])
            vtype = f"{TWIN_PREFIX}drive.{name}"
            sumo.vehicletype.copy(self.vtype or "DEFAULT_VEHTYPE", vtype)
            sumo.vehicletype.setLength(vtype, float(self.length[k]))
            sumo.vehicletype.setWidth(vtype, float(self.width[k]))
            sumo.vehicle.add(vid, route, vtype, depart="now", departLane=str(lane), departPos=f"{pos:.6f}",
                             departSpeed=f"{float(v[0]):.6f}")
            sumo.vehicle.setLaneChangeMode(vid, 0)
            sumo.vehicle.subscribe(vid, (0x42, 0x43, 0x40))  # position, angle, speed
            self.inserted.add(vid)

    def commands(self, sumo: Any, results: Mapping[str, Any], state: PortData | None) -> dict[str, np.ndarray]:
        """Commands that take each robot to where its twin is after SUMO's step (a ``commands_<federate>`` table;
        robots whose twin is not on the road yet get none)."""
        k_live = [k for k, name in enumerate(self.names) if TWIN_PREFIX + name in results]
        if state is None or not k_live:
            return {"robot": np.empty(0, np.int64), **{f: np.empty(0) for f in COMMAND_FIELDS}}
        k = np.array(k_live)
        got = [results[TWIN_PREFIX + self.names[i]] for i in k_live]
        fx = np.array([g[0x42][0] for g in got])
        fy = np.array([g[0x42][1] for g in got])
        xr, yr, yaw_r = self.frame.to_local(fx, fy, np.array([g[0x43] for g in got]), self.length[k], self.rear[k])
        v_r = np.array([g[0x40] for g in got])
        before = np.array([self._yaw.get(self.names[i], np.nan) for i in k_live])
        w_r = np.where(np.isfinite(before), wrap(yaw_r - before) / self.period_s, 0.0)
        self._yaw.update((self.names[i], float(y)) for i, y in zip(k_live, yaw_r, strict=True))
        rows = rows_of(state["id"], self.ids[k])
        x, y, yaw, v = (np.asarray(state[key])[rows] for key in ("x", "y", "yaw", "v"))
        # the twin is where it is at t + period; compare it with where the robot will be then on its course
        reach = v * self.period_s
        dx, dy = xr - (x + reach * np.cos(yaw)), yr - (y + reach * np.sin(yaw))
        e_x = np.cos(yaw) * dx + np.sin(yaw) * dy  # the twin in the robot's frame
        e_y = -np.sin(yaw) * dx + np.cos(yaw) * dy
        e_yaw = wrap(yaw_r - yaw)
        speed = np.maximum(v_r * np.cos(e_yaw) + e_x / TAU_S, 0.0)
        yaw_rate = w_r + v_r * (e_y / LOOKAHEAD_M + np.sin(e_yaw)) / LOOKAHEAD_M
        n = len(k)
        return {"robot": self.ids[k].copy(), "speed": speed, "accel": np.full(n, np.nan),
                "steer": np.full(n, np.nan), "yaw_rate": yaw_rate}
