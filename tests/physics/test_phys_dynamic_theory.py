"""The dynamic single track against the linear bicycle theory (Rajamani, Vehicle Dynamics and Control, ch. 2-3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import signal

from federates.physics.models.dynamic import DynamicSingleTrack
from federates.physics.models.kinematic import KinematicBicycle
from federates.physics.presets import preset

from .helpers import CLEAN, commands, linear_ss, make

DELTA = 0.002  # [rad] small step: linear range


def understeer(p: dict) -> float:
    L, a = p["wheelbase_m"], p["cg_to_front_m"]
    return p["mass_kg"] / L * ((L - a) / p["cornering_stiffness_front_npr"] - a / p["cornering_stiffness_rear_npr"])


def crossover(p: dict) -> float:
    L, a = p["wheelbase_m"], p["cg_to_front_m"]
    return math.sqrt((L - a) * L * p["cornering_stiffness_rear_npr"] / (a * p["mass_kg"]))


def run_step(m: DynamicSingleTrack, steps: int, delta: float = DELTA) -> tuple[np.ndarray, np.ndarray]:
    n = len(m)
    vy, r = [], []
    for _ in range(steps):
        m.step(commands(n, steer=delta))
        vy.append(m.diagnostics["vy"].copy())
        r.append(m.state["yaw_rate"].copy())
    return np.array(vy), np.array(r)


@pytest.mark.parametrize("vehicle", ["g35_sedan", "passenger_car", "auna_rc_1to10"])
def test_steady_state_yaw_rate_gain_within_1pct(vehicle: str) -> None:
    p = preset(vehicle)
    speeds = [8.0, 15.0, 25.0] if p["wheelbase_m"] > 1 else [1.5, 2.5, 3.5]
    m, p = make(vehicle, ["linear"], speeds, dt=0.002)
    _, r = run_step(m, 3000)
    vx = m.state["v"]
    gain = vx / (p["wheelbase_m"] + understeer(p) * vx**2)
    np.testing.assert_allclose(r[-1] / DELTA, gain, rtol=0.01)


@pytest.mark.parametrize("vx", [10.0, 25.0])
def test_step_response_matches_transfer_functions(vx: float) -> None:
    dt = 0.002
    m, p = make("g35_sedan", ["linear"], vx, dt=dt)
    vy, r = run_step(m, 1500)
    A, B = linear_ss(p, vx)
    t = dt * np.arange(1, 1501)
    sys = signal.StateSpace(A, B, np.eye(2), np.zeros((2, 1)))
    _, y = signal.step(sys, T=np.concatenate([[0.0], t]))
    y = y[1:] * DELTA
    for got, want in ((vy[:, 0], y[:, 0]), (r[:, 0], y[:, 1])):
        assert np.max(np.abs(got - want)) < 0.02 * np.max(np.abs(want))


def test_crossover_speed_changes_the_lateral_velocity_response() -> None:
    p = preset("g35_sedan")
    v_star = crossover(p)
    assert 14.0 < v_star < 16.0
    m, p = make("g35_sedan", ["linear"], [0.7 * v_star, 1.3 * v_star], dt=0.002)
    vy, _ = run_step(m, 2500)
    slow, fast = vy[:, 0], vy[:, 1]
    # below Vx*: vy starts and ends positive; above: starts positive, ends negative (non-minimum phase)
    assert slow[0] > 0 and slow[-1] > 0 and np.all(slow > -1e-12)
    assert fast[0] > 0 and fast[-1] < 0
    # theory: the vy/delta transfer function has its zero in the right half plane exactly above Vx*
    for v, rhp in ((0.7 * v_star, False), (1.3 * v_star, True)):
        A, B = linear_ss(p, v)
        num, _ = signal.ss2tf(A, B, np.array([[1.0, 0.0]]), np.zeros((1, 1)))
        assert (np.roots(np.trim_zeros(num[0], "f")).real.max() > 0) == rhp


def test_constant_yaw_rate_command_is_reached() -> None:
    m, _ = make("g35_sedan", ["linear", "fiala", "pacejka"], 15.0, dt=0.01, mode="speed_yaw_rate")
    for _ in range(800):
        m.step(commands(3, speed=15.0, yaw_rate=0.1))
    np.testing.assert_allclose(m.state["yaw_rate"], 0.1, rtol=0.02)


def test_kinematic_model_is_the_low_speed_limit() -> None:
    dt, steer = 0.01, 0.3
    p = dict(preset("auna_rc_1to10"), tyre_model="fiala")
    v0 = 0.4  # below the blend speed 0.3 sqrt(g L) = 0.53 m/s
    dyn = DynamicSingleTrack(dt)
    kin = KinematicBicycle(dt)
    init = {"x": np.zeros(1), "y": np.zeros(1), "yaw": np.zeros(1), "v": np.full(1, v0), "steer": np.full(1, steer)}
    dyn.add([p], init)
    kin.add([p], init)
    for _ in range(500):
        cmd = commands(1, speed=v0, steer=steer)
        dyn.step(cmd)
        kin.step(cmd)
    for k in ("x", "y", "yaw", "yaw_rate"):
        assert dyn.state[k][0] == pytest.approx(kin.state[k][0], abs=2e-3)
    # above the blend the dynamic yaw rate departs from the kinematic one by ~K_us vx^2 / L, growing with speed
    m, p = make("passenger_car", ["fiala"], [4.0, 8.0, 16.0], dt=0.01, mode="speed_steer")
    for _ in range(600):
        m.step(commands(3, speed=m.state["v"].copy(), steer=0.02))
    kin_r = m.state["v"] * math.tan(0.02) / p["wheelbase_m"]
    rel = 1 - m.state["yaw_rate"] / kin_r
    assert np.all(np.diff(rel) > 0) and rel[0] < 0.02
    np.testing.assert_allclose(rel, 1 - 1 / (1 + understeer(p) * m.state["v"] ** 2 / p["wheelbase_m"]), atol=0.01)


@pytest.mark.parametrize("mode", ["speed_steer", "accel_steer", "speed_yaw_rate"])
@pytest.mark.parametrize("tyre", ["linear", "fiala", "fiala_unsaturated", "pacejka"])
def test_standstill_is_finite(mode: str, tyre: str) -> None:
    m, _ = make("mit_racecar_1to10", [tyre], [0.0, 0.0, 0.0, 0.0], dt=0.01, mode=mode)
    rng = np.random.default_rng(1)
    for k in range(300):
        if k < 100:  # zero commands: stays put
            cmd = commands(4)
        else:
            cmd = commands(4, speed=rng.uniform(-1, 0.05, 4), accel=rng.uniform(-5, 0.05, 4),
                           steer=rng.uniform(-1, 1, 4), yaw_rate=rng.uniform(-5, 5, 4))
        m.step(cmd)
        if k == 99:
            assert np.all(m.state["x"] == 0.0) and np.all(m.state["v"] == 0.0)
        for arr in (*m.state.values(), *m.diagnostics.values(), *m.wheel_odometry().values()):
            assert np.all(np.isfinite(arr))
        assert np.all(m.state["v"] >= 0.0)
    assert np.all(np.abs(m.state["x"]) < 0.05)


def test_substeps_keep_a_stiff_small_car_accurate() -> None:
    """The 1:10 car with Pacejka at 10 ms steps (sub-stepped) against the same at 0.5 ms."""
    res = []
    for dt in (0.01, 0.0005):
        m, _ = make("mit_racecar_1to10", ["pacejka"], 1.5, dt=dt, mode="speed_steer")
        for _ in range(round(2.0 / dt)):
            m.step(commands(1, speed=1.5, steer=0.15))
        res.append((m.state["yaw_rate"][0], m.diagnostics["vy"][0], m.diagnostics["substeps"][0]))
    assert res[0][2] >= 2  # the physics needed more than one sub-step at 10 ms
    assert res[0][0] == pytest.approx(res[1][0], rel=0.01)
    assert res[0][1] == pytest.approx(res[1][1], rel=0.05, abs=1e-3)


def test_longitudinal_load_transfer_and_acceleration_limit() -> None:
    # accelerating shifts load rearwards: the rear (driven) axle carries more force than the static share allows
    m, p = make("g35_sedan", ["fiala"], 10.0, dt=0.01, mode="accel_steer", accel_tau_s=0.0)
    for _ in range(50):
        m.step(commands(1, accel=2.5))
    assert m.state["a"][0] == pytest.approx(2.5, rel=0.02)
    assert m.diagnostics["ax"][0] == pytest.approx(2.5, rel=0.02)
    # demand beyond friction on a low-mu road: acceleration saturates below mu g times the driven-axle share
    m, p = make("g35_sedan", ["fiala"], 10.0, dt=0.01, mode="accel_steer", mu=0.2, max_accel_mps2=5.0)
    for _ in range(50):
        m.step(commands(1, accel=5.0))
    L, a, h = p["wheelbase_m"], p["cg_to_front_m"], p["cg_height_m"]
    ax_limit = 0.2 * 9.81 * a / (L - 0.2 * h)  # rear-drive traction limit with load transfer
    assert m.state["a"][0] == pytest.approx(ax_limit, rel=0.05)
    assert m.wheel_odometry()["slip_ratio"][0] > 0.02  # the driven wheels spin


def test_add_remove_keep_rows() -> None:
    m, _ = make("passenger_car", ["linear", "fiala", "pacejka"], [10.0, 11.0, 12.0], dt=0.01)
    m.remove(np.array([1]))
    assert len(m) == 2 and list(m.state["v"]) == [10.0, 12.0]
    m.add([dict(preset("passenger_car"), **CLEAN)], {"x": np.ones(1), "y": np.ones(1), "yaw": np.zeros(1),
                                                    "v": np.full(1, 5.0)})
    assert list(m.state["v"]) == [10.0, 12.0, 5.0]
    m.step(commands(3))
    assert np.all(np.isfinite(m.state["x"]))


def test_bad_parameters_are_named() -> None:
    m = DynamicSingleTrack(0.01)
    p = preset("passenger_car")
    del p["yaw_inertia_kgm2"]
    with pytest.raises(ValueError, match="yaw_inertia_kgm2"):
        m.add([p], {"x": np.zeros(1), "y": np.zeros(1), "yaw": np.zeros(1), "v": np.zeros(1)})
    with pytest.raises(ValueError, match="allowed"):
        DynamicSingleTrack(0.01, input_mode="torque")  # type: ignore[arg-type]


def test_rear_axle_reference_and_cg_conversion() -> None:
    m, p = make("g35_sedan", ["linear"], 20.0, dt=0.005)
    for _ in range(400):
        m.step(commands(1, steer=0.02))
    cg = m.cg_state()
    b = p["wheelbase_m"] - p["cg_to_front_m"]
    st = m.state
    assert cg["x"][0] == pytest.approx(st["x"][0] + b * math.cos(st["yaw"][0]))
    # steady turn: the rear axle moves on a circle of radius v/r about the instantaneous centre; check with the
    # kinematics of a rigid body: rear-axle lateral speed vy - b r equals the rear slip angle times vx
    assert math.atan((cg["vy"][0] - b * st["yaw_rate"][0]) / st["v"][0]) == pytest.approx(
        m.diagnostics["alpha_r"][0], abs=1e-5)
