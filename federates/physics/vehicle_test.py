"""Standard handling tests of the dynamic single-track model, several tyre models side by side.

- ``dlc``: ISO 3888-1 double lane change (entry 15 m, transition 30 m, offset lane 25 m at +3.5 m, transition 25 m,
  exit 15 m) followed by a pure-pursuit driver at constant speed. For vehicles with a wheelbase under 1 m the course
  is scaled by ``wheelbase / 2.85 m`` (pass a Froude-scaled speed, ``v_car sqrt(scale)``).
- ``constant-radius``: circle of radius 40 m (scaled likewise), speed ramped slowly up to ``speed_mps``; the
  understeer gradient is fitted by least squares from ``delta - L kappa = K_us a_y`` over the linear range
  (``a_y < 0.4 mu g``) and the largest steady lateral acceleration is reported (SAE J266 / ISO 4138 method).
- ``step-steer``: constant speed, steering step at 1 s sized for a steady ``a_y`` of ``0.4 mu g`` in the linear
  model (ISO 7401); yaw-rate gain, rise time, overshoot and whether the lateral velocity starts the wrong way.

Each robot of one ``DynamicSingleTrack`` uses one tyre model, so all run in the same loop. Outputs: PNG plots
(lateral velocity and yaw rate over time, path, force-slip curves with the operating points, and for the constant
radius the understeer plot) and ``metrics.json``.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .models.actuators import G_MPS2
from .models.dynamic import DynamicSingleTrack
from .models.tyres import TYRE_MODELS, lateral_force
from .presets import preset

KINDS = ("dlc", "constant-radius", "step-steer")


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


def circle_reference(radius_m: float, laps: float = 3.0, ds_m: float = 0.05) -> np.ndarray:
    """Counter-clockwise circle through the origin heading +x, centre ``(0, R)`` (``k x 2`` [m])."""
    th = np.arange(0.0, 2.0 * np.pi * laps, ds_m / radius_m)
    return np.stack([radius_m * np.sin(th), radius_m * (1.0 - np.cos(th))], axis=1)


class PurePursuit:
    """Pure-pursuit path follower at the rear axle (Coulter, CMU-RI-TR-92-01): ``delta = atan(2 L sin(eta) / ld)``
    with look-ahead ``ld = max(ld_min, k v)``; vectorised over robots, progress kept per robot."""

    def __init__(self, path: np.ndarray, wheelbase_m: float, n: int, k_s: float = 0.6, ld_min_m: float = 2.0,
                 window: int = 400) -> None:
        self.path = path
        self.L = wheelbase_m
        self.k_s = k_s
        self.ld_min = ld_min_m
        self.idx = np.zeros(n, dtype=np.int64)
        self.window = window
        seg = np.diff(path, axis=0)
        self.s = np.concatenate([[0.0], np.cumsum(np.hypot(seg[:, 0], seg[:, 1]))])

    def __call__(self, x: np.ndarray, y: np.ndarray, yaw: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, ...]:
        """Steering angle [rad] and signed lateral error [m] (left of the path positive) per robot."""
        k = len(self.path)
        offs = np.arange(self.window)
        cand = np.minimum(self.idx[:, None] + offs[None, :], k - 1)
        d2 = (self.path[cand, 0] - x[:, None]) ** 2 + (self.path[cand, 1] - y[:, None]) ** 2
        self.idx = cand[np.arange(len(x)), np.argmin(d2, axis=1)]
        ld = np.maximum(self.ld_min, self.k_s * v)
        target_s = self.s[self.idx] + ld
        j = np.minimum(np.searchsorted(self.s, target_s), k - 1)
        tx, ty = self.path[j, 0], self.path[j, 1]
        eta = np.arctan2(ty - y, tx - x) - yaw
        steer = np.arctan2(2.0 * self.L * np.sin(eta), np.hypot(tx - x, ty - y))
        i2 = np.minimum(self.idx + 1, k - 1)
        tan_x, tan_y = self.path[i2, 0] - self.path[self.idx, 0], self.path[i2, 1] - self.path[self.idx, 1]
        norm = np.maximum(np.hypot(tan_x, tan_y), 1e-12)
        err = (tan_x * (y - self.path[self.idx, 1]) - tan_y * (x - self.path[self.idx, 0])) / norm
        return steer, err


def build(vehicle: str, tyres: list[str], dt: float, speed_mps: float, overrides: dict[str, Any] | None = None,
          input_mode: str = "speed_steer", steer0: float = 0.0) -> tuple[DynamicSingleTrack, dict[str, Any]]:
    """One model with one robot per tyre model, at the origin heading +x at ``speed_mps``."""
    params = preset(vehicle)
    params.update(overrides or {})
    for t in tyres:
        if t not in TYRE_MODELS:
            raise KeyError(f"unknown tyre model '{t}'; allowed: {', '.join(TYRE_MODELS)}")
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


def _run(model: DynamicSingleTrack, steps: int, command: Any, dt: float) -> Run:
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
    driver = PurePursuit(path, p["wheelbase_m"], len(tyres), k_s=0.5, ld_min_m=2.5 * scale)
    n = len(tyres)
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
    distance = 0.5 * (v0 + speed_mps) * steps * dt
    path = circle_reference(radius, laps=distance / (2.0 * np.pi * radius) + 1.0)
    driver = PurePursuit(path, p["wheelbase_m"], len(tyres), k_s=0.3, ld_min_m=0.15 * radius)
    n = len(tyres)
    zeros = np.zeros(n)

    def command(k: int) -> dict[str, np.ndarray]:
        st = model.state
        steer, _ = driver(st["x"], st["y"], st["yaw"], st["v"])
        v_cmd = min(v0 + ramp * k * dt, speed_mps)
        return {"speed": np.full(n, v_cmd), "accel": zeros, "steer": steer, "yaw_rate": zeros}

    return _run(model, steps, command, dt), p, path, radius


def quasi_steady(run: Run, radius_m: float, tol: float = 0.05, max_yaw_accel_radps2: float = 0.05) -> np.ndarray:
    """Mask (time x robot) of the quasi-steady part of a constant-radius run: True until the rear axle first leaves
    ``R (1 +- tol)`` around the centre ``(0, R)`` or the yaw acceleration first exceeds ``max_yaw_accel_radps2``."""
    dev = np.abs(np.hypot(run.x, run.y - radius_m) - radius_m) > tol * radius_m
    dt = float(run.t[1, 0] - run.t[0, 0])
    r_dot = np.abs(np.gradient(run.r, dt, axis=0))
    # ignore the first second (driver settling on the circle)
    r_dot[run.t < 1.0] = 0.0
    return np.cumsum(dev | (r_dot > max_yaw_accel_radps2), axis=0) == 0


def fit_understeer(run: Run, wheelbase_m: float, mu: float, valid: np.ndarray | None = None,
                   ay_frac: float = 0.4) -> np.ndarray:
    """Least-squares ``K_us`` [rad/(m/s^2)] per robot from ``delta - L r/vx = K_us vx r`` over ``a_y < ay_frac mu g``
    (steady-state relation of Rajamani eq. 3.15, with the measured path curvature ``r/vx``), where ``valid``."""
    out = np.full(run.vx.shape[1], np.nan)
    ok = np.ones_like(run.vx, dtype=bool) if valid is None else valid
    for j in range(run.vx.shape[1]):
        vx, r, d = run.vx[:, j], run.r[:, j], run.steer[:, j]
        ay = vx * r
        sel = (ay > 0.05 * mu * G_MPS2) & (ay < ay_frac * mu * G_MPS2) & (vx > 0.5) & ok[:, j]
        if sel.sum() < 10:
            continue
        lhs = d[sel] - wheelbase_m * r[sel] / vx[sel]
        out[j] = float(np.dot(ay[sel], lhs) / np.dot(ay[sel], ay[sel]))
    return out


def ay_max(run: Run, dt: float, window_s: float = 0.5) -> np.ndarray:
    """Largest moving-average (``window_s``) lateral acceleration of the CG from the tyre forces [m/s^2] per robot
    (in steady cornering equal to ``vx r``; bounded by the friction limit, also during a spin)."""
    w = max(1, int(window_s / dt))
    kernel = np.ones(w) / w
    return np.array([float(np.max(np.abs(np.convolve(run.ay[:, j], kernel, mode="valid"))))
                     for j in range(run.ay.shape[1])])


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


def _step_metrics(run: Run, t_step: float, p: dict[str, Any], steer: float) -> list[dict[str, Any]]:
    rows = []
    L = p["wheelbase_m"]
    for j in range(run.r.shape[1]):
        t, r, vy = run.t[:, j], run.r[:, j], run.vy[:, j]
        after = t >= t_step
        r_ss = float(np.mean(r[t >= t[-1] - 0.5]))
        vy_ss = float(np.mean(vy[t >= t[-1] - 0.5]))
        ta = t[after] - t_step
        ra = r[after]
        rise = np.nan
        if r_ss != 0:
            i10 = np.argmax(ra >= 0.1 * r_ss)
            i90 = np.argmax(ra >= 0.9 * r_ss)
            rise = float(ta[i90] - ta[i10])
        vy_a = vy[after]
        big = np.abs(vy_a) > 0.02 * max(np.max(np.abs(vy_a)), 1e-12)
        first = float(vy_a[np.argmax(big)]) if big.any() else 0.0
        vx = float(np.mean(run.vx[t >= t[-1] - 0.5, j]))
        rows.append({
            "yaw_rate_ss_radps": r_ss, "yaw_rate_gain_1ps": r_ss / steer, "kinematic_gain_1ps": vx / L,
            "yaw_rate_rise_time_s": rise, "yaw_rate_overshoot_pct": float(100 * (np.max(ra) / r_ss - 1)),
            "vy_ss_mps": vy_ss, "vy_starts_wrong_way": bool(first * vy_ss < 0),
            "ay_ss_mps2": float(np.mean(run.ay[t >= t[-1] - 0.5, j])),
        })
    return rows


def _plot_timeseries(run: Run, tyres: list[str], title: str, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for j, name in enumerate(tyres):
        ax[0].plot(run.t[:, j], run.vy[:, j], label=name)
        ax[1].plot(run.t[:, j], run.r[:, j], label=name)
    ax[0].set(xlabel="t [s]", ylabel="lateral velocity at CG vy [m/s]", title="lateral velocity")
    ax[1].set(xlabel="t [s]", ylabel="yaw rate r [rad/s]", title="yaw rate")
    for a in ax:
        a.grid(True, alpha=0.3)
        a.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_path(run: Run, tyres: list[str], ref: np.ndarray | None, title: str, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 4))
    if ref is not None:
        ax.plot(ref[:, 0], ref[:, 1], "k--", lw=1, label="reference")
    for j, name in enumerate(tyres):
        ax.plot(run.x[:, j], run.y[:, j], label=name)
    ax.set(xlabel="x [m]", ylabel="y [m]", title=title)
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_tyres(run: Run, tyres: list[str], p: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    L, a, m = p["wheelbase_m"], p["cg_to_front_m"], p["mass_kg"]
    loads = {"front": m * G_MPS2 * (L - a) / L, "rear": m * G_MPS2 * a / L}
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    alpha = np.linspace(-0.3, 0.3, 601)
    for k, axle in enumerate(("front", "rear")):
        c = p[f"cornering_stiffness_{axle}_npr"]
        pac = tuple(p.get(f"pacejka_lat_{axle}") or (1.0, 1.0, p["mu"], 0.0))
        for j, name in enumerate(tyres):
            line = ax[k].plot(np.degrees(alpha), lateral_force(name, alpha, loads[axle], c, p["mu"], pac),
                              label=name)
            op_a = run.alpha_f[:, j] if axle == "front" else run.alpha_r[:, j]
            op_f = run.fy_f[:, j] if axle == "front" else run.fy_r[:, j]
            ax[k].plot(np.degrees(op_a), op_f, ".", ms=2, color=line[0].get_color(), alpha=0.4)
        lim = 1.3 * p["mu"] * loads[axle]
        ax[k].set(xlabel="slip angle [deg]", ylabel="lateral force [N]", ylim=(-lim, lim),
                  title=f"{axle} axle, Fz = {loads[axle]:.0f} N (dots: operating points)")
        ax[k].grid(True, alpha=0.3)
        ax[k].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_understeer(run: Run, tyres: list[str], p: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for j, name in enumerate(tyres):
        ax.plot(run.vx[:, j] * run.r[:, j], np.degrees(run.steer[:, j]), label=name)
    ax.set(xlabel="lateral acceleration vx r [m/s^2]", ylabel="steer angle [deg]",
           title=f"constant radius, mu g = {p['mu'] * G_MPS2:.2f} m/s^2")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_vehicle_test(kind: str, vehicle: str, speed_mps: float, tyres: list[str], out_dir: Path) -> dict:
    """Run one handling test for several tyre models, write PNG plots and ``metrics.json`` into ``out_dir``.

    Returns ``{"kind", "vehicle", "speed_mps", "rows": [one metrics dict per tyre model], "plots": [paths],
    "metrics_json": path}``.
    """
    import matplotlib

    matplotlib.use("Agg")
    if kind not in KINDS:
        raise ValueError(f"unknown vehicle test '{kind}'; allowed: {', '.join(KINDS)}")
    if not tyres:
        raise ValueError("give at least one tyre model")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{kind}_{vehicle}_{speed_mps:g}mps"
    title = f"{kind} {vehicle} at {speed_mps:g} m/s"
    plots: list[Path] = []
    ref: np.ndarray | None
    if kind == "dlc":
        run, p, ref, err = simulate_dlc(vehicle, speed_mps, tyres)
        dt = float(run.t[1, 0] - run.t[0, 0])
        rows = [{
            "path_error_max_m": float(np.max(np.abs(err[:, j]))),
            "path_rmse_m": float(np.sqrt(np.mean(err[:, j] ** 2))),
            "path_ise_m2s": float(np.sum(err[:, j] ** 2) * dt),
            "vy_max_mps": float(np.max(np.abs(run.vy[:, j]))),
            "yaw_rate_max_radps": float(np.max(np.abs(run.r[:, j]))),
            "ay_max_mps2": float(np.max(np.abs(run.ay[:, j]))),
            "steer_max_rad": float(np.max(np.abs(run.steer[:, j]))),
        } for j in range(len(tyres))]
    elif kind == "constant-radius":
        run, p, ref, radius = simulate_constant_radius(vehicle, speed_mps, tyres)
        dt = float(run.t[1, 0] - run.t[0, 0])
        valid = quasi_steady(run, radius, max_yaw_accel_radps2=10.0 * ramp_rate(p) / radius)
        k_fit = fit_understeer(run, p["wheelbase_m"], p["mu"], valid)
        ay_top = ay_max(run, dt)
        m, L, a = p["mass_kg"], p["wheelbase_m"], p["cg_to_front_m"]
        k_theory = m / L * ((L - a) / p["cornering_stiffness_front_npr"] - a / p["cornering_stiffness_rear_npr"])
        rows = [{"radius_m": radius, "k_us_fit_radpmps2": float(k_fit[j]), "k_us_linear_theory_radpmps2": k_theory,
                 "ay_max_mps2": float(ay_top[j]), "mu_g_mps2": p["mu"] * G_MPS2,
                 "ay_quasi_steady_max_mps2": float(np.max(run.vx[valid[:, j], j] * run.r[valid[:, j], j])),
                 "quasi_steady_until_speed_mps": float(run.vx[np.argmin(valid[:, j]), j]) if not valid[-1, j]
                 else None}
                for j in range(len(tyres))]
        plots.append(out_dir / f"{stem}_understeer.png")
        _plot_understeer(run, tyres, p, plots[-1])
    else:
        run, p, steer = simulate_step_steer(vehicle, speed_mps, tyres)
        ref = None
        rows = _step_metrics(run, 1.0, p, steer)
        for row in rows:
            row["steer_step_rad"] = steer
    for j, row in enumerate(rows):
        row["tyre_model"] = tyres[j]
    plots += [out_dir / f"{stem}_timeseries.png", out_dir / f"{stem}_path.png", out_dir / f"{stem}_tyres.png"]
    _plot_timeseries(run, tyres, title, plots[-3])
    _plot_path(run, tyres, ref, title, plots[-2])
    _plot_tyres(run, tyres, p, plots[-1])
    result = {"kind": kind, "vehicle": vehicle, "speed_mps": speed_mps, "rows": rows,
              "plots": [str(q) for q in plots], "metrics_json": str(out_dir / f"{stem}_metrics.json")}
    Path(result["metrics_json"]).write_text(json.dumps(result, indent=2, default=float))
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m federates.physics.vehicle_test dlc --vehicle g35_sedan --speed 20 --out out/``"""
    ap = argparse.ArgumentParser(description="Handling tests of the dynamic single-track model.")
    ap.add_argument("kind", choices=KINDS)
    ap.add_argument("--vehicle", default="g35_sedan")
    ap.add_argument("--speed", type=float, default=20.0, help="test speed [m/s]")
    ap.add_argument("--tyres", default="linear,fiala,pacejka", help="comma-separated tyre models")
    ap.add_argument("--out", type=Path, default=Path("vehicle_test_out"))
    a = ap.parse_args(argv)
    res = run_vehicle_test(a.kind, a.vehicle, a.speed, [t.strip() for t in a.tyres.split(",") if t.strip()], a.out)
    for row in res["rows"]:
        print(json.dumps(row))
    print("plots:", ", ".join(res["plots"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
