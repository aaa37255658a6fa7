"""The manoeuvres of the handling tests: courses, the path-following driver, and one simulation per test kind.

Each test steps one ``DynamicSingleTrack`` holding one robot per tyre model, so all tyre models run in the same loop
and face the same commands.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from controllers.pure_pursuit import WaypointDriver, WaypointDriverParams
from federates.physics.models.dynamic import DynamicSingleTrack
from federates.physics.models.dynamic_kernel import G_MPS2
from federates.physics.models.tyres import TYRE_MODELS
from federates.physics.presets import preset


@dataclass
class Run:
    """Time series of one test (rows: time, columns: robots / tyre models)."""

    t: np.ndarray
    x: np.ndarray
    y: np.ndarray
    yaw: np.ndarray
    vx: np.ndarray
    vy: np.ndarray
    r: np.ndarray
    ay: np.ndarray
    steer: np.ndarray
    alpha_f: np.ndarray
    alpha_r: np.ndarray
    fy_f: np.ndarray
    fy_r: np.ndarray


def course_scale(params: dict[str, Any]) -> float:
    """Geometry scale for small vehicles: ``wheelbase / 2.85 m`` below 1 m wheelbase, else 1."""
    L = float(params["wheelbase_m"])
    return L / 2.85 if L < 1.0 else 1.0


def dlc_reference(scale: float = 1.0, ds_m: float = 0.05) -> np.ndarray:
    """ISO 3888-1 double-lane-change centreline (``k x 2`` [m]) with cosine transitions, 20 m run-in/out."""
    xs = np.arange(-20.0, 130.0 + ds_m, ds_m)
    y = np.zeros_like(xs)
    up = (xs >= 15.0) & (xs < 45.0)
    y[up] = 1.75 * (1.0 - np.cos(np.pi * (xs[up] - 15.0) / 30.0))
    y[(xs >= 45.0) & (xs < 70.0)] = 3.5
    down = (xs >= 70.0) & (xs < 95.0)
    y[down] = 1.75 * (1.0 + np.cos(np.pi * (xs[down] - 70.0) / 25.0))
    return np.stack([xs, y], axis=1) * scale


def circle_reference(radius_m: float, ds_m: float = 0.05) -> np.ndarray:
    """One counter-clockwise lap of the circle through the origin heading +x, centre ``(0, R)`` (``k x 2`` [m]);
    the last point stops short of the first (a closed path)."""
    th = np.arange(0.0, 2.0 * np.pi - 0.5 * ds_m / radius_m, ds_m / radius_m)
    return np.stack([radius_m * np.sin(th), radius_m * (1.0 - np.cos(th))], axis=1)


class PathDriver:
    """Steering angle [rad] that follows a reference path: the project's pure pursuit
    (``controllers.pure_pursuit.WaypointDriver``, Coulter, CMU-RI-TR-92-01) with look-ahead
    ``max(ld_min, k_s v)``, turned into the front-wheel angle of the single track, ``atan(L kappa)``.

    The driver's yaw rate is ``v_cmd kappa`` for its own speed command ``v_cmd``; the tests set the speed
    themselves, so only the arc's curvature ``kappa = w / v_cmd`` is used. Also returns the signed lateral error
    [m] (left of the path positive) at the driver's projection on the path.
    """

    def __init__(self, path: np.ndarray, wheelbase_m: float, n: int, dt: float, k_s: float, ld_min_m: float,
                 closed: bool = False) -> None:
        params = WaypointDriverParams(
            waypoints=[(float(px), float(py)) for px, py in path], closed=closed, lookahead_m=0.0,
            lookahead_time_s=k_s, min_lookahead_m=ld_min_m)
        self.driver = WaypointDriver(params)
        self.driver.add_rows(n)
        self.wheelbase_m = wheelbase_m
        self.dt = dt
        self._pts = np.vstack([path, path[:1]]) if closed else np.asarray(path, float)
        self._s = np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(self._pts, axis=0).T))])

    def __call__(self, x: np.ndarray, y: np.ndarray, yaw: np.ndarray, v: np.ndarray,
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Steering angle [rad] and lateral error [m] per robot."""
        v_cmd, w, _ = self.driver.step(x, y, yaw, v, self.dt)
        kappa = np.divide(w, v_cmd, out=np.zeros_like(w), where=v_cmd > 0.0)
        steer = np.arctan(self.wheelbase_m * kappa)
        k = np.clip(np.searchsorted(self._s, self.driver.progress_m, side="right") - 1, 0, len(self._pts) - 2)
        tan_x, tan_y = (self._pts[k + 1] - self._pts[k]).T
        err = (tan_x * (y - self._pts[k, 1]) - tan_y * (x - self._pts[k, 0])) / np.hypot(tan_x, tan_y)
        return steer, err


def build(vehicle: str, tyres: list[str], dt: float, speed_mps: float, overrides: dict[str, Any] | None = None,
          input_mode: str = "speed_steer", steer0: float = 0.0) -> tuple[DynamicSingleTrack, dict[str, Any]]:
    """One model with one robot per tyre model, at the origin heading +x at ``speed_mps``."""
    params = preset(vehicle)
    params.update(overrides or {})
    for t in tyres:
        if t not in TYRE_MODELS.builtin_names():
            raise KeyError(f"unknown tyre model '{t}'; allowed: {', '.join(TYRE_MODELS.builtin_names())}")
    model = DynamicSingleTrack(dt, input_mode=input_mode)  # type: ignore[arg-type]
    n = len(tyres)
    model.add([dict(params, tyre_model=t) for t in tyres],
              {"x": np.zeros(n), "y": np.zeros(n), "yaw": np.zeros(n), "v": np.full(n, speed_mps),
               "steer": np.full(n, steer0)})
    return model, params


def _record(model: DynamicSingleTrack, rows: dict[str, list[np.ndarray]], t: float) -> None:
    st, dg = model.state, model.diagnostics
    rows["t"].append(np.full(len(model), t))
    for name, src in (("x", st["x"]), ("y", st["y"]), ("yaw", st["yaw"]), ("vx", st["v"]), ("vy", dg["vy"]),
                      ("r", st["yaw_rate"]), ("ay", dg["ay"]), ("steer", st["steer"]), ("alpha_f", dg["alpha_f"]),
                      ("alpha_r", dg["alpha_r"]), ("fy_f", dg["fy_f"]), ("fy_r", dg["fy_r"])):
        rows[name].append(src.copy())


def _run(model: DynamicSingleTrack, steps: int, command: Callable[[int], dict[str, np.ndarray]], dt: float) -> Run:
    rows: dict[str, list[np.ndarray]] = {f: [] for f in Run.__dataclass_fields__}
    _record(model, rows, 0.0)
    for k in range(steps):
        model.step(command(k))
        _record(model, rows, (k + 1) * dt)
    return Run(**{f: np.array(v) for f, v in rows.items()})


def simulate_dlc(vehicle: str, speed_mps: float, tyres: list[str], dt: float = 0.005,
                 overrides: dict[str, Any] | None = None) -> tuple[Run, dict[str, Any], np.ndarray, np.ndarray]:
    """Double lane change; returns the run, parameters, reference path and lateral errors (time x robot)."""
    model, p = build(vehicle, tyres, dt, speed_mps, overrides)
    scale = course_scale(p)
    path = dlc_reference(scale)
    path[:, 0] += 20.0 * scale  # run-in starts at the vehicle (x = 0)
    n = len(tyres)
    driver = PathDriver(path, p["wheelbase_m"], n, dt, k_s=0.5, ld_min_m=2.5 * scale)
    errors: list[np.ndarray] = []
    zeros = np.zeros(n)

    def command(_k: int) -> dict[str, np.ndarray]:
        st = model.state
        steer, err = driver(st["x"], st["y"], st["yaw"], st["v"])
        errors.append(err)
        return {"speed": np.full(n, speed_mps), "accel": zeros, "steer": steer, "yaw_rate": zeros}

    steps = int((path[-1, 0] - 5.0 * scale) / speed_mps / dt)
    run = _run(model, steps, command, dt)
    return run, p, path, np.array(errors)


def ramp_rate(params: dict[str, Any]) -> float:
    """Default speed ramp of the constant-radius test [m/s^2]: 0.15, Froude-scaled for small vehicles."""
    return 0.15 * math.sqrt(course_scale(params))


def simulate_constant_radius(vehicle: str, speed_mps: float, tyres: list[str], dt: float = 0.01,
                             overrides: dict[str, Any] | None = None, radius_m: float | None = None,
                             ramp_mps2: float | None = None) -> tuple[Run, dict[str, Any], np.ndarray, float]:
    """Constant-radius test with a slow speed ramp up to ``speed_mps``; returns run, parameters, path, radius."""
    p0 = preset(vehicle)
    p0.update(overrides or {})
    scale = course_scale(p0)
    radius = radius_m if radius_m is not None else 40.0 * scale
    v0 = 0.25 * math.sqrt(G_MPS2 * radius * 0.1)
    model, p = build(vehicle, tyres, dt, v0, overrides, steer0=math.atan(p0["wheelbase_m"] / radius))
    ramp = ramp_mps2 if ramp_mps2 is not None else ramp_rate(p0)
    steps = int((speed_mps - v0) / ramp / dt) + int(2.0 / dt)
    path = circle_reference(radius)
    n = len(tyres)
    driver = PathDriver(path, p["wheelbase_m"], n, dt, k_s=0.3, ld_min_m=0.15 * radius, closed=True)
    zeros = np.zeros(n)

    def command(k: int) -> dict[str, np.ndarray]:
        st = model.state
        steer, _ = driver(st["x"], st["y"], st["yaw"], st["v"])
        v_cmd = min(v0 + ramp * k * dt, speed_mps)
        return {"speed": np.full(n, v_cmd), "accel": zeros, "steer": steer, "yaw_rate": zeros}

    return _run(model, steps, command, dt), p, path, radius


def simulate_step_steer(vehicle: str, speed_mps: float, tyres: list[str], dt: float = 0.002,
                        overrides: dict[str, Any] | None = None, steer_rad: float | None = None,
                        t_step_s: float = 1.0, duration_s: float = 5.0) -> tuple[Run, dict[str, Any], float]:
    """Steering step at ``t_step_s``; returns run, parameters and the step size [rad]."""
    ov = {"max_steer_rate_radps": math.inf, "steer_tau_s": 0.0, **(overrides or {})}
    model, p = build(vehicle, tyres, dt, speed_mps, ov)
    if steer_rad is None:
        L, k_us = p["wheelbase_m"], float(model.understeer_gradient()[0])
        ay = 0.4 * p["mu"] * G_MPS2
        steer_rad = (L + k_us * speed_mps**2) * ay / speed_mps**2
    n = len(tyres)
    zeros = np.zeros(n)
    k_step = round(t_step_s / dt)

    def command(k: int) -> dict[str, np.ndarray]:
        return {"speed": np.full(n, speed_mps), "accel": zeros,
                "steer": np.full(n, steer_rad if k >= k_step else 0.0), "yaw_rate": zeros}

    return _run(model, int(duration_s / dt), command, dt), p, float(steer_rad)
