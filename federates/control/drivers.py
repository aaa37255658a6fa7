"""Platoon leaders' drivers: a time profile (``controllers.profiles``) or a path (``WaypointDriver``).

Profiles depend on time only, so each distinct profile is evaluated once for every control tick of the run; path
drivers are grouped by path so that each path is one vectorised call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np

from controllers.profiles import ProfileParams, profile_inputs
from controllers.pure_pursuit import WaypointDriver, WaypointDriverParams
from core.robot_blocks import DriveSpec
from core.robots import RobotSpec, rows_of, shared_rows
from core.timebase import NS_PER_S

_EGO_FIELDS = ("x", "y", "yaw", "v")
_CONSTANT = DriveSpec()  # a leader without a drive of its own: constant speed (shared)


class Drivers:
    """The drivers of the leaders among the control federate's robots."""

    def __init__(self, period_ns: int, end_ns: int) -> None:
        self.period_ns = period_ns
        self.dt = period_ns / NS_PER_S
        self._last_tick = end_ns // period_ns + 1
        self._tables: dict[str, np.ndarray] = {}  # profile key -> (3, ticks) array of v, w, a on the control grid
        self._table_ids: dict[str, list[int]] = {}  # profile key -> leader ids
        self._paths: dict[str, tuple[WaypointDriver, list[int]]] = {}  # path key -> driver and its leader ids
        self._table_rows: list[tuple[np.ndarray, np.ndarray]] = []
        self._path_rows: list[tuple[WaypointDriver, np.ndarray]] = []

    @staticmethod
    def is_leader(spec: RobotSpec) -> bool:
        """Whether a robot is driven here (it has no predecessor)."""
        return spec.predecessor is None

    def add(self, specs: Sequence[RobotSpec]) -> None:
        """New leaders (in spawn order); each path driver gets its new rows in one call. Leaders that share a
        drive (one block) share its work."""
        drivers, driver_of = shared_rows([_CONSTANT if spec.driver is None else spec.driver for spec in specs])
        keys: list[tuple[bool, str]] = []  # (a path driver, its key) per distinct driver block
        for driver in drivers:
            if driver.profile == "waypoints":
                key = "path" + json.dumps(driver.path, sort_keys=True)
                if key not in self._paths:
                    self._paths[key] = (WaypointDriver(WaypointDriverParams(**driver.path)), [])
                keys.append((True, key))
            else:
                keys.append((False, self._table(driver)))
        new_rows: dict[str, int] = {}
        for spec, d in zip(specs, driver_of.tolist(), strict=True):
            is_path, key = keys[d]
            if is_path:
                self._paths[key][1].append(spec.id)
                new_rows[key] = new_rows.get(key, 0) + 1
            else:
                self._table_ids.setdefault(key, []).append(spec.id)
        for key, n in new_rows.items():
            self._paths[key][0].add_rows(n)

    def remove(self, gone: np.ndarray) -> None:
        """Drops the leaders whose ids are in ``gone``."""
        gone_set = set(gone.tolist())
        for key, ids in self._table_ids.items():
            self._table_ids[key] = [rid for rid in ids if rid not in gone_set]
        for driver, ids in self._paths.values():
            out = np.isin(np.asarray(ids, np.int64), gone)
            if out.any():
                driver.remove_rows(np.flatnonzero(out))
                ids[:] = [rid for rid, o in zip(ids, out, strict=True) if not o]

    def reindex(self, ids: np.ndarray) -> None:
        """Rows of every leader within the federate's rows ``ids`` (after a spawn or despawn)."""
        self._table_rows = [(self._tables[key], rows_of(ids, leaders)) for key, leaders in self._table_ids.items()
                            if leaders]
        self._path_rows = [(driver, rows_of(ids, leaders)) for driver, leaders in self._paths.values() if leaders]

    def _table(self, driver: DriveSpec) -> str:
        """Key of the precomputed (v, w, a) table of a profile driver."""
        key = json.dumps({"profile": driver.profile, "params": driver.params}, sort_keys=True)
        if key not in self._tables:
            ticks = np.arange(self._last_tick + 1, dtype=np.int64) * self.period_ns
            v, w, a = profile_inputs(driver.profile, ProfileParams(**driver.params), ticks / NS_PER_S)
            self._tables[key] = np.stack([v, w, a])
        return key

    def step(self, t_ns: int, est: Mapping[str, np.ndarray], speed: np.ndarray, yaw_rate: np.ndarray,
             accel: np.ndarray) -> None:
        """Writes the leaders' speed [m/s], yaw-rate [rad/s] and acceleration [m/s^2] commands at ``t_ns``."""
        tick = min(t_ns // self.period_ns, self._last_tick)
        for table, rows in self._table_rows:
            speed[rows] = table[0, tick]
            yaw_rate[rows] = table[1, tick]
            accel[rows] = table[2, tick]
        for driver, rows in self._path_rows:
            v, w, a = driver.step(*(est[name][rows] for name in _EGO_FIELDS), self.dt)
            speed[rows] = v
            yaw_rate[rows] = w
            accel[rows] = a
