"""CACC -> ACC degradation: switch timing, hysteresis, the log, and safety under the Plexe braking profile."""

from __future__ import annotations

import numpy as np
import pytest
from harness import PlatoonConfig, simulate
from pydantic import ValidationError

from controllers.collision_avoidance import required_deceleration
from controllers.fallback import ACC, CACC, CaccWithFallback, CaccWithFallbackParams, FallbackParams, FallbackPolicy
from controllers.ploeg_cacc import PloegCacc, PloegCaccParams
from controllers.profiles import ProfileParams, braking

DT = 0.01
BEACON = 0.1  # [s] 10 Hz CAMs


def beacon_ages(t: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Age of the newest 10 Hz beacon at each time, given which send times the channel delivers."""
    sent = (np.round(t / DT).astype(int) % round(BEACON / DT) == 0) & up
    last = np.maximum.accumulate(np.where(sent, t, -np.inf))
    return t - last


def run_policy(policy: FallbackPolicy, t: np.ndarray, ages: np.ndarray) -> np.ndarray:
    return np.array([policy.update(float(tk), a, DT) for tk, a in zip(t, ages, strict=True)])


def test_switches_within_the_timeout_and_back_on_fresh_data():
    p = FallbackParams(timeout_s=0.5, fresh_age_s=0.25, recover_hold_s=0.2)
    t = np.arange(0.0, 10.0, DT)
    cut, back = 3.0, 6.0
    up = (t < cut) | (t >= back)
    ages = beacon_ages(t, up)[:, None].repeat(2, axis=1)
    ages[:, 1] = 0.0  # row 1 never loses its link
    policy = FallbackPolicy(p)
    modes = run_policy(policy, t, ages)
    last_rx = t[(t < cut)][-1] - (t[(t < cut)][-1] % BEACON)
    to_acc, to_cacc = policy.switches
    assert (to_acc.row, to_acc.from_mode, to_acc.to_mode) == (0, "cacc", "acc")
    assert (to_cacc.row, to_cacc.from_mode, to_cacc.to_mode) == (0, "acc", "cacc")
    assert last_rx + p.timeout_s < to_acc.time_s <= last_rx + p.timeout_s + DT + 1e-9
    assert to_acc.time_s - cut <= p.timeout_s  # the newest data was at most one beacon old at the cut
    assert back + p.recover_hold_s - DT <= to_cacc.time_s <= back + p.recover_hold_s + DT + 1e-9
    assert np.all(modes[:, 1] == CACC)
    np.testing.assert_allclose(policy.degraded_time_s, [to_cacc.time_s - to_acc.time_s, 0.0], atol=1e-9)


def test_hysteresis_ignores_a_flickering_link():
    p = FallbackParams(timeout_s=0.5, fresh_age_s=0.25, recover_hold_s=0.2)
    policy = FallbackPolicy(p)
    t = np.arange(0.0, 4.0, DT)
    ages = np.full((len(t), 2), 0.4)  # between the thresholds: neither switch
    ages[:100, 1] = np.inf  # row 1 starts without data -> ACC
    ages[200, 1] = 0.0  # a single fresh message is not enough to come back
    modes = run_policy(policy, t, ages)
    assert np.all(modes[:, 0] == CACC)
    assert np.all(modes[1:, 1] == ACC)
    assert len(policy.switches) == 1 and policy.switches[0].time_s == 0.0
    nan_policy = FallbackPolicy(p)
    assert nan_policy.update(0.0, np.array([np.nan]), DT)[0] == ACC  # NaN age: never received


def test_policy_rows_join_and_leave():
    policy = FallbackPolicy(FallbackParams())
    policy.add_rows(3)
    policy.update(0.0, np.array([0.0, 9.0, 0.0]), DT)
    policy.remove_rows([0])
    policy.add_rows(1)
    np.testing.assert_array_equal(policy.mode, [ACC, CACC, CACC])
    with pytest.raises(ValueError, match="add_rows"):
        policy.update(0.1, np.zeros(2), DT)
    with pytest.raises(ValidationError):
        FallbackParams(timeout_s=0.2, fresh_age_s=0.3)


def plexe_braking_run(law, cut_s: float, brake_s: float) -> tuple:
    """8 cars at 100 km/h, tau = 0.5 s, 10 Hz beacons, limits [-9, 2.5] m/s^2; the leader (same lag) brakes
    at 8 m/s^2 from ``brake_s`` (Plexe "braking"); every link is cut from ``cut_s``."""
    profile = ProfileParams(speed_mps=100 / 3.6, start_s=brake_s)
    cfg = PlatoonConfig(
        n_vehicles=8, duration_s=brake_s + 30.0, tau_s=0.5, v0_mps=100 / 3.6, beacon_period_s=BEACON,
        accel_limits=(-9.0, 2.5), leader_lag=True,
        leader_accel=lambda t: float(braking(np.array([t]), profile)[2][0]),
        channel_up=lambda t: t < cut_s,
    )
    return simulate(law, cfg), cfg


def test_fallback_to_acc_avoids_the_collision_that_stale_cacc_causes():
    cut, brake = 2.0, 30.0
    law = CaccWithFallback(CaccWithFallbackParams())
    run, _ = plexe_braking_run(law, cut, brake)
    stale, _ = plexe_braking_run(PloegCacc(PloegCaccParams()), cut, brake)
    assert stale.gap.min() < 0.0  # CACC on frozen data runs into the car ahead
    assert run.gap.min() > 1.0, run.gap.min(axis=0)  # fallback: no collision
    assert np.all(run.v[-1] < 0.5)  # everybody (nearly) stopped: ACC creeps up to its 2 m standstill gap
    assert sorted(s.row for s in law.switches) == list(range(7))
    for s in law.switches:
        assert (s.from_mode, s.to_mode) == ("cacc", "acc")
        assert cut < s.time_s <= cut + law.params.policy.timeout_s + DT
    np.testing.assert_array_equal(run.outputs["mode"][-1], ACC)
    # in ACC the desired gap is r + 1.5 v, and the gaps have opened towards it before the brake
    k = int(brake / DT)
    np.testing.assert_allclose(run.desired_gap[k], 2.0 + 1.5 * run.v[k, 1:], rtol=1e-9)
    assert run.gap[k, 0] > 35.0


def test_fallback_returns_to_cacc_bumplessly_in_closed_loop():
    profile_cut = (3.0, 8.0)
    cfg = PlatoonConfig(
        n_vehicles=4, duration_s=20.0, tau_s=0.5, v0_mps=20.0, beacon_period_s=BEACON,
        channel_up=lambda t: not (profile_cut[0] <= t < profile_cut[1]),
    )
    law = CaccWithFallback(CaccWithFallbackParams())
    run = simulate(law, cfg)
    modes = run.outputs["mode"]
    assert modes[int(5.0 / DT)].tolist() == [ACC] * 3
    assert modes[-1].tolist() == [CACC] * 3
    back = [s for s in law.switches if s.to_mode == "cacc"]
    assert len(back) == 3 and all(8.0 < s.time_s < 8.0 + 0.5 for s in back)
    k = int(back[0].time_s / DT)
    assert np.abs(np.diff(run.u[k - 2 : k + 3, 1:], axis=0)).max() < 0.05  # no jump in the command


def test_fallback_with_path_cacc_and_without_age_column():
    law = CaccWithFallback(CaccWithFallbackParams(cacc="path_cacc"))
    ego = {"v": np.full(2, 20.0), "a": np.zeros(2)}
    pred = {"v": np.array([20.0, np.nan]), "a": np.zeros(2)}
    out = law.compute(ego, pred, {"v": np.full(2, 20.0), "a": np.zeros(2)}, {"gap_m": np.full(2, 5.0)}, DT)
    assert out["mode"].tolist() == [CACC, ACC]
    assert np.all(np.isfinite(out["accel"]))
    np.testing.assert_allclose(law.desired_gap(ego["v"]), [5.0, 32.0])


def test_required_deceleration_stops_the_closing_at_the_stop_gap():
    gap = np.array([2.3, 2.3, np.nan, 0.2, 0.2])
    rate = np.array([-2.0, 0.5, -2.0, -1.0, 0.0])  # closing at 2 m/s, opening, unknown gap, inside, standing
    a = required_deceleration(gap, rate, stop_gap_m=0.3)
    assert a[0] == pytest.approx(-2.0**2 / (2 * 2.0))
    assert a[1] == 0.0 and a[2] == 0.0 and a[4] == 0.0
    assert a[3] < -100.0  # inside the stop gap while closing: full braking
    # closed loop towards a standing obstacle, the floor re-evaluated every millisecond: stops at the stop gap
    g, v, dt = 5.0, 3.0, 1e-3
    for _ in range(6000):  # 6 s; constant deceleration 3^2 / (2 * 4.7) stops the closing after 3.1 s
        acc = float(required_deceleration(np.array([g]), np.array([-v]), 0.3)[0])
        assert acc == pytest.approx(-9.0 / 9.4, rel=1e-3) or v < 0.05
        g -= v * dt + 0.5 * acc * dt * dt
        v = max(v + acc * dt, 0.0)
    assert v < 0.01 and g == pytest.approx(0.3, abs=0.01)
