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

Modules: ``simulate`` (courses, driver, manoeuvres), ``analysis`` (metrics), ``plots``. This is the
``coopsim vehicle-test`` command.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from federates.physics.models.dynamic_kernel import G_MPS2

from .analysis import ay_max, fit_understeer, quasi_steady, step_metrics
from .plots import plot_path, plot_timeseries, plot_tyres, plot_understeer
from .simulate import (
    Run,
    build,
    circle_reference,
    course_scale,
    dlc_reference,
    ramp_rate,
    simulate_constant_radius,
    simulate_dlc,
    simulate_step_steer,
)

KINDS = ("dlc", "constant-radius", "step-steer")

__all__ = [
    "KINDS", "Run", "ay_max", "build", "circle_reference", "course_scale", "dlc_reference", "fit_understeer",
    "main", "quasi_steady", "ramp_rate", "run_vehicle_test", "simulate_constant_radius", "simulate_dlc",
    "simulate_step_steer",
]


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
        plot_understeer(run, tyres, p, plots[-1])
    else:
        run, p, steer = simulate_step_steer(vehicle, speed_mps, tyres)
        ref = None
        rows = step_metrics(run, 1.0, p, steer)
        for row in rows:
            row["steer_step_rad"] = steer
    for j, row in enumerate(rows):
        row["tyre_model"] = tyres[j]
    plots += [out_dir / f"{stem}_timeseries.png", out_dir / f"{stem}_path.png", out_dir / f"{stem}_tyres.png"]
    plot_timeseries(run, tyres, title, plots[-3])
    plot_path(run, tyres, ref, title, plots[-2])
    plot_tyres(run, tyres, p, plots[-1])
    result = {"kind": kind, "vehicle": vehicle, "speed_mps": speed_mps, "rows": rows,
              "plots": [str(q) for q in plots], "metrics_json": str(out_dir / f"{stem}_metrics.json")}
    Path(result["metrics_json"]).write_text(json.dumps(result, indent=2, default=float))
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m orchestrator.vehicle_test dlc --vehicle g35_sedan --speed 20 --out out/``"""
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
