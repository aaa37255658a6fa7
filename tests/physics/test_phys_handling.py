"""Handling tests: constant radius (understeer gradient, friction-limited lateral acceleration) and the
``run_vehicle_test`` outputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from federates.physics.models.dynamic_kernel import G_MPS2
from orchestrator.vehicle_test import (
    ay_max,
    fit_understeer,
    quasi_steady,
    run_vehicle_test,
    simulate_constant_radius,
)

from .helpers import CLEAN


@pytest.mark.slow
def test_constant_radius_understeer_and_saturation() -> None:
    run, p, _, radius = simulate_constant_radius(
        "g35_sedan", 24.0, ["linear", "fiala", "pacejka"], dt=0.01, overrides=CLEAN, radius_m=60.0, ramp_mps2=0.2)
    dt = 0.01
    valid = quasi_steady(run, radius, max_yaw_accel_radps2=10 * 0.2 / radius)
    k = fit_understeer(run, p["wheelbase_m"], p["mu"], valid, ay_frac=0.3)
    L, a = p["wheelbase_m"], p["cg_to_front_m"]
    k_theory = p["mass_kg"] / L * ((L - a) / p["cornering_stiffness_front_npr"] - a / p["cornering_stiffness_rear_npr"])
    # linear tyres: least squares recovers K_us (the residual is the cos(delta) of the front force, < 2 %)
    assert k[0] == pytest.approx(k_theory, rel=0.02)
    # saturating tyres: the lateral acceleration levels off near mu g (7.06 m/s^2 for the G35 preset)
    top = ay_max(run, dt)
    mu_g = p["mu"] * G_MPS2
    assert top[0] > 1.2 * mu_g  # linear tyres never saturate
    assert top[1] == pytest.approx(mu_g, rel=0.06)
    assert top[2] == pytest.approx(mu_g, rel=0.06)
    assert np.all(top[1:] <= mu_g * 1.001)


def test_run_vehicle_test_writes_plots_and_metrics(tmp_path: Path) -> None:
    res = run_vehicle_test("step-steer", "g35_sedan", 20.0, ["linear", "pacejka"], tmp_path)
    assert [r["tyre_model"] for r in res["rows"]] == ["linear", "pacejka"]
    # 20 m/s is above the crossover speed (15.1 m/s): the lateral velocity starts the wrong way
    assert all(r["vy_starts_wrong_way"] for r in res["rows"])
    for plot in res["plots"]:
        assert Path(plot).stat().st_size > 10_000
    assert json.loads(Path(res["metrics_json"]).read_text())["rows"] == json.loads(json.dumps(res["rows"]))
    with pytest.raises(ValueError, match="allowed"):
        run_vehicle_test("slalom", "g35_sedan", 20.0, ["linear"], tmp_path)


def test_double_lane_change_small_car(tmp_path: Path) -> None:
    # the 1:10 car on the scaled ISO course at a Froude-scaled 10 m/s (10 sqrt(0.32/2.85) = 3.35 m/s)
    res = run_vehicle_test("dlc", "auna_rc_1to10", 3.35, ["linear", "fiala", "pacejka"], tmp_path)
    for row in res["rows"]:
        assert np.isfinite(row["path_rmse_m"])
        assert row["path_error_max_m"] < 0.25  # scaled lane half-widths are about 0.1-0.15 m plus margin
