"""Longitudinal laws in closed loop against their theory (Ploeg et al. 2014; Rajamani, Vehicle Dynamics and
Control, ch. 5 and 7).

Platoon of 7 (leader + 6 followers), double integrator + first-order lag, V2X delay buffer (harness.py).
String stability is measured two ways: the steady-state amplitude ratio of consecutive followers'
accelerations for a sinusoidal leader (which is |Gamma(jw)| at that frequency) and the L2 ratio for a
step-like leader.
"""

from __future__ import annotations

import numpy as np
import pytest
from harness import (
    PlatoonConfig,
    gamma_acc,
    gamma_ploeg,
    l2,
    ratios,
    simulate,
    sine_amplitude,
)

from controllers.acc import Acc, AccParams
from controllers.cruise import Cruise, CruiseParams
from controllers.path_cacc import PathCacc, PathCaccParams
from controllers.ploeg_cacc import PloegCacc, PloegCaccParams

KP, KD = 0.2, 0.7
OMEGA = np.logspace(-3, 1.5, 6000)  # [rad/s] grid for the analytic peak


def sine_leader(amp: float, omega: float):
    return lambda t: amp * np.sin(omega * t)


def pulse_leader(t: float) -> float:
    """+1 m/s^2 over 2-5 s, -1 m/s^2 over 10-13 s."""
    return 1.0 if 2.0 <= t < 5.0 else (-1.0 if 10.0 <= t < 13.0 else 0.0)


def follower_amplitude_ratios(ctrl, cfg: PlatoonConfig, omega: float, settle_s: float) -> np.ndarray:
    """a_i / a_{i-1} amplitude ratios between consecutive followers (the leader, without lag, is skipped)."""
    run = simulate(ctrl, cfg)
    m = run.t > settle_s
    amp = sine_amplitude(run.a[m], run.t[m], omega)
    return ratios(amp[1:])


# --- Ploeg CACC -------------------------------------------------------------------------------------------


def test_ploeg_without_delay_is_string_stable_for_a_pulse_leader():
    cfg = PlatoonConfig(duration_s=40.0, tau_s=0.1, leader_accel=pulse_leader)  # delay: one 10 ms step
    run = simulate(PloegCacc(PloegCaccParams(time_gap_s=0.5)), cfg)
    assert np.all(np.isfinite(run.a))
    accel_ratio = ratios(l2(run.a, cfg.dt))
    error_ratio = ratios(l2(run.spacing_error, cfg.dt))
    assert np.all(accel_ratio <= 1.0), accel_ratio
    assert np.all(error_ratio <= 1.0), error_ratio
    assert np.abs(run.spacing_error[-1]).max() < 0.05  # settles back to r + h v


@pytest.mark.parametrize("omega", [0.3, 1.0, 3.0])
def test_ploeg_without_delay_follows_gamma_below_one(omega):
    cfg = PlatoonConfig(duration_s=50.0, tau_s=0.1, leader_accel=sine_leader(0.5, omega))
    measured = follower_amplitude_ratios(PloegCacc(PloegCaccParams(time_gap_s=0.5)), cfg, omega, 25.0)
    # one controller step of effective delay
    theory = gamma_ploeg(omega, 0.5, KP, KD, 0.1, cfg.dt)
    assert theory <= 1.0
    assert np.all(measured <= 1.0), measured
    np.testing.assert_allclose(measured, theory, rtol=0.02)


def test_ploeg_with_delay_small_time_gap_amplifies_large_does_not():
    tau, theta = 0.1, 0.2
    g05 = gamma_ploeg(OMEGA, 0.5, KP, KD, tau, theta)
    g10 = gamma_ploeg(OMEGA, 1.0, KP, KD, tau, theta)
    assert g05.max() > 1.02 and g10.max() <= 1.0 + 1e-9
    w_peak = float(OMEGA[g05.argmax()])
    for h, gamma in ((0.5, g05.max()), (1.0, gamma_ploeg(w_peak, 1.0, KP, KD, tau, theta))):
        cfg = PlatoonConfig(duration_s=80.0, tau_s=tau, delay_s=theta, leader_accel=sine_leader(0.5, w_peak))
        measured = follower_amplitude_ratios(PloegCacc(PloegCaccParams(time_gap_s=h)), cfg, w_peak, 40.0)
        np.testing.assert_allclose(measured, gamma, rtol=0.02)
        if h == 0.5:
            assert np.all(measured > 1.02), measured
            assert np.prod(measured) > 1.2  # the disturbance grows by > 20 % over 5 followers
        else:
            assert np.all(measured < 1.0), measured


def test_ploeg_delay_needs_larger_time_gap_per_reference():
    """Ploeg et al. 2014: at tau = 0.1 s a delay of 0.1 s needs h of about 0.55 s; and h > 2 (theta + tau)."""
    tau, theta = 0.1, 0.1
    hs = np.arange(0.30, 0.80, 0.01)
    stable = [gamma_ploeg(OMEGA, h, KP, KD, tau, theta).max() <= 1.0 + 1e-9 for h in hs]
    h_min = hs[np.argmax(stable)]
    assert all(stable[np.argmax(stable):])
    assert 0.45 <= h_min <= 0.56
    assert h_min >= 2 * (theta + tau)  # the rule of thumb is a necessary condition


# --- ACC vs CACC --------------------------------------------------------------------------------------------


def test_acc_needs_a_much_larger_time_gap_than_cacc():
    tau = 0.5  # Plexe's default actuator lag
    # analytic: ACC string stable iff T >= 2 tau; Ploeg CACC (no delay) for any h
    assert gamma_acc(OMEGA, 0.5, 0.1, tau).max() > 1.1
    assert gamma_acc(OMEGA, 0.9, 0.1, tau).max() > 1.0
    assert gamma_acc(OMEGA, 1.0, 0.1, tau).max() <= 1.0 + 1e-9
    assert gamma_ploeg(OMEGA, 0.3, KP, KD, tau, 0.0).max() <= 1.0 + 1e-9

    w_peak = float(OMEGA[gamma_acc(OMEGA, 0.5, 0.1, tau).argmax()])
    fast_cc = {"desired_speed_mps": 60.0}  # keep min(CC, ACC) on the ACC branch
    base = {"duration_s": 50.0, "tau_s": tau, "leader_accel": sine_leader(0.3, w_peak)}
    acc_short = follower_amplitude_ratios(
        Acc(AccParams(time_gap_s=0.5, cruise=fast_cc)), PlatoonConfig(**base), w_peak, 25.0
    )
    acc_long = follower_amplitude_ratios(
        Acc(AccParams(time_gap_s=1.5, cruise=fast_cc)), PlatoonConfig(**base), w_peak, 25.0
    )
    cacc_short = follower_amplitude_ratios(
        PloegCacc(PloegCaccParams(time_gap_s=0.3)), PlatoonConfig(**base), w_peak, 25.0
    )
    np.testing.assert_allclose(acc_short, gamma_acc(w_peak, 0.5, 0.1, tau), rtol=0.03)
    assert np.all(acc_short > 1.1), acc_short
    assert np.all(acc_long < 1.0), acc_long
    assert np.all(cacc_short < 1.0), cacc_short


def test_acc_settles_on_its_time_gap_and_yields_to_cc():
    cfg = PlatoonConfig(n_vehicles=3, duration_s=120.0, tau_s=0.5, initial_gap_m=45.0)
    run = simulate(Acc(AccParams(cruise={"desired_speed_mps": 30.0})), cfg)
    np.testing.assert_allclose(run.gap[-1], 2.0 + 1.5 * 20.0, atol=0.05)
    np.testing.assert_allclose(run.v[-1], 20.0, atol=0.01)

    law = Acc(AccParams(cruise={"desired_speed_mps": 25.0}))
    v = np.full(4, 20.0)
    sensors = {"gap_m": np.array([300.0, np.nan, 10.0, 100.0]), "gap_rate_mps": np.array([0, np.nan, 0, 0])}
    out = law.compute({"v": v, "a": np.zeros(4)}, {"v": np.full(4, np.nan)}, {}, sensors, 0.01)["accel"]
    assert out[0] == pytest.approx(1.5) and out[1] == pytest.approx(1.5)  # CC: clamp(-(20 - 25)) = 1.5
    assert out[2] == pytest.approx(-(1 / 1.5) * 0.1 * (-10.0 + 30.0 + 2.0))  # ACC below CC
    assert out[3] == pytest.approx(1.5)  # ACC would accelerate harder: min() keeps CC


# --- PATH CACC and CC ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("v0", [5.0, 15.0, 30.0])
def test_path_cacc_keeps_a_constant_5m_gap(v0):
    cfg = PlatoonConfig(n_vehicles=5, duration_s=90.0, tau_s=0.5, v0_mps=v0, initial_gap_m=8.0)
    run = simulate(PathCacc(PathCaccParams()), cfg)
    np.testing.assert_allclose(run.gap[-1], 5.0, atol=0.02)
    np.testing.assert_allclose(run.v[-1], v0, atol=0.01)
    assert np.all(run.desired_gap == 5.0)


def test_path_cacc_gap_is_independent_of_speed_after_a_speed_change():
    cfg = PlatoonConfig(
        n_vehicles=7, duration_s=80.0, tau_s=0.5, v0_mps=10.0,
        leader_accel=lambda t: 1.0 if 5.0 <= t < 15.0 else 0.0,  # 10 -> 20 m/s
    )
    run = simulate(PathCacc(PathCaccParams()), cfg)
    error = run.gap - 5.0
    assert np.abs(error).max() < 1.2
    assert np.all(ratios(l2(error, cfg.dt)) < 1.0)  # spacing errors shrink down the chain
    assert np.all(np.diff(np.abs(error).max(axis=0)) < 0.0)
    np.testing.assert_allclose(run.gap[-1], 5.0, atol=0.02)
    np.testing.assert_allclose(run.v[-1], 20.0, atol=0.01)


@pytest.mark.parametrize("v0", [20.0, 30.0])
def test_cruise_tracks_its_set_speed(v0):
    law = Cruise(CruiseParams(desired_speed_mps=25.0))
    v, a, lag = np.array([v0]), np.zeros(1), 1.0 - np.exp(-0.01 / 0.5)
    first = law.compute({"v": v, "a": a}, {}, {}, {}, 0.01)["accel"][0]
    assert first == pytest.approx(np.sign(25.0 - v0) * 1.5)  # saturated at +-1.5 m/s^2
    for _ in range(3000):
        u = law.compute({"v": v, "a": a}, {}, {}, {}, 0.01)["accel"]
        a = a + (u - a) * lag
        v = v + a * 0.01
    assert abs(v[0] - 25.0) < 1e-3
