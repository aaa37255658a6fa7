"""A body whose pose comes from outside (a traffic simulator, a replayed recording): the physics federate does not
integrate it, it teleports it to each pose it is given (``federates.physics.poses``).

Between two poses (a pose source slower than the physics step) the body moves on at its last speed and yaw rate
(the arc at constant v and w), so it does not stand still and jump; the next pose snaps it back. Commands are
ignored: nobody drives this body but its pose source. Its wheel odometry is what the rear wheels would have
rolled between two steps, pose updates included, so sensor-based estimates work for it as for any body.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.robots import param_column

from .base import VehicleModel

POSED_MODEL = "federates.physics.models.posed:PosedBody"
"""The ``vehicle.model`` of an externally posed robot (looked up as a ``package.module:Class`` path)."""

_STATE = ("x", "y", "yaw", "v", "a", "yaw_rate", "steer")


class PosedBody(VehicleModel):
    """Externally posed bodies for N robots (see the module docstring)."""

    def __init__(self, dt: float) -> None:
        super().__init__(dt)
        self._s = {name: np.empty(0) for name in _STATE}
        self._before = {name: np.empty(0) for name in ("x", "y", "yaw")}  # the pose at the start of the last step
        self._track = np.empty(0)
        self._wheel_radius = np.empty(0)

    def add(self, params: Sequence[Mapping[str, Any]], initial: Mapping[str, np.ndarray]) -> None:
        """Append robots at their initial ``x, y, yaw, v`` (vehicle parameters are not used)."""
        n = len(params)
        new = {"x": initial["x"], "y": initial["y"], "yaw": initial["yaw"], "v": initial["v"],
               "a": np.zeros(n), "yaw_rate": np.zeros(n), "steer": np.zeros(n)}
        for name in _STATE:
            self._s[name] = np.concatenate([self._s[name], np.asarray(new[name], dtype=np.float64)])
        for name in self._before:
            self._before[name] = np.concatenate([self._before[name], np.asarray(new[name], dtype=np.float64)])
        self._track = np.concatenate([self._track, param_column(params, "track_m", 0.0)])
        self._wheel_radius = np.concatenate([self._wheel_radius, param_column(params, "wheel_radius_m", 0.3)])

    def remove(self, rows: np.ndarray) -> None:
        """Delete robots at ``rows``."""
        for name in _STATE:
            self._s[name] = np.delete(self._s[name], rows)
        for name in self._before:
            self._before[name] = np.delete(self._before[name], rows)
        self._track = np.delete(self._track, rows)
        self._wheel_radius = np.delete(self._wheel_radius, rows)

    def step(self, commands: Mapping[str, np.ndarray]) -> None:
        """Move on for ``dt`` along the arc of the last speed and yaw rate (commands are ignored)."""
        s, dt = self._s, self.dt
        for name in self._before:
            self._before[name] = s[name].copy()
        v, w, yaw = s["v"], s["yaw_rate"], s["yaw"]
        dth = w * dt
        turning = np.abs(dth) > 1e-9
        safe_w = np.where(turning, w, 1.0)
        s["x"] += np.where(turning, v / safe_w * (np.sin(yaw + dth) - np.sin(yaw)), v * dt * np.cos(yaw))
        s["y"] += np.where(turning, v / safe_w * (np.cos(yaw) - np.cos(yaw + dth)), v * dt * np.sin(yaw))
        s["yaw"] = np.arctan2(np.sin(yaw + dth), np.cos(yaw + dth))

    def set_pose(self, rows: np.ndarray, pose: Mapping[str, np.ndarray]) -> None:
        """Teleport the robots at ``rows`` (of this group) to ``pose`` (``x, y, yaw, v, a, yaw_rate`` arrays)."""
        for name in ("x", "y", "yaw", "v", "a", "yaw_rate"):
            self._s[name][rows] = pose[name]

    def wheel_odometry(self) -> dict[str, np.ndarray]:
        """What rear wheel encoders would have seen over the last step, pose updates included (the keys of
        ``KinematicBicycle.wheel_odometry``): the rear axle's displacement along its mean heading -+ the heading
        change x track / 2, without slip."""
        s, before = self._s, self._before
        dth = np.arctan2(np.sin(s["yaw"] - before["yaw"]), np.cos(s["yaw"] - before["yaw"]))
        mid = before["yaw"] + 0.5 * dth
        ds = (s["x"] - before["x"]) * np.cos(mid) + (s["y"] - before["y"]) * np.sin(mid)
        half = 0.5 * self._track * dth
        dist_rl, dist_rr = ds - half, ds + half
        spin = self.dt * self._wheel_radius
        return {"omega_rl": dist_rl / spin, "omega_rr": dist_rr / spin, "dist_rl": dist_rl, "dist_rr": dist_rr,
                "slip_ratio": np.zeros(len(ds))}

    @property
    def state(self) -> dict[str, np.ndarray]:
        """``x, y, yaw, v, a, yaw_rate, steer`` (steer is always 0)."""
        return self._s
