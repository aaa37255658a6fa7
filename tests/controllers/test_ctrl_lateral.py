"""Steering laws against their geometry: pure pursuit on breadcrumbs and waypoints, and the extended
look-ahead CACC (Bayuwindra et al., IEEE TCST 2020) on AuNa's circle profile with unicycle followers."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError
from unicycle import simulate_platoon, unicycle_step

from controllers.ela_cacc import ElaCacc, ElaCaccParams
from controllers.profiles import ProfileParams, circle
from controllers.pure_pursuit import PurePursuit, PurePursuitParams, WaypointDriver, WaypointDriverParams

R = 10.0  # [m] circle radius of the AuNa circle profile (1 m/s at 0.1 rad/s)


def one_row(**cols: float) -> dict[str, np.ndarray]:
    return {k: np.array([v], dtype=float) for k, v in cols.items()}


# --- pure pursuit on breadcrumbs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params", [{"lookahead_m": 1.0}, {"lookahead_m": 0.0, "lookahead_time_s": 1.2, "min_lookahead_m": 0.5}]
)
def test_pure_pursuit_converges_onto_the_predecessors_circle(params):
    """Predecessor on a circle of radius R, follower starts 0.5 m outside and 1.5 m behind: pure pursuit
    with an exact circular path has no steady-state offset (only the crumbs' chord sag, ~1e-5 m)."""
    law = PurePursuit(PurePursuitParams(**params))
    v, dt = 1.0, 0.01
    x, y, th = np.array([R + 0.5]), np.array([0.0]), np.array([np.pi / 2])
    offsets = []
    for k in range(4000):
        phi = 0.15 + v * k * dt / R  # predecessor's angle on the circle
        pred = one_row(x=R * np.cos(phi), y=R * np.sin(phi))
        out = law.compute({"x": x, "y": y, "yaw": th, "v": np.array([v])}, pred, {}, {}, dt)
        assert out["has_path"][0]
        x, y, th, _ = unicycle_step(x, y, th, np.array([v]), out["yaw_rate"], np.zeros(1), dt)
        offsets.append(np.hypot(x[0], y[0]) - R)
    offsets = np.abs(np.array(offsets))
    assert offsets[:500].max() > 0.3  # it really started off the path
    assert offsets[-1000:].max() < 1e-3  # << look-ahead (>= 0.5 m)


def test_pure_pursuit_is_finite_at_standstill_and_without_crumbs():
    law = PurePursuit(PurePursuitParams())
    ego = {"x": np.zeros(3), "y": np.zeros(3), "yaw": np.zeros(3), "v": np.array([0.0, 1e-9, 0.0])}
    empty = {"x": np.full(3, np.nan), "y": np.full(3, np.nan)}
    out = law.compute(ego, empty, {}, {}, 0.02)
    np.testing.assert_array_equal(out["yaw_rate"], 0.0)
    assert not out["has_path"].any()
    # crumbs: row 0 to the left, row 1 to the left at near-zero speed, row 2 exactly on the vehicle
    pred = {"x": np.array([0.0, 0.0, 0.0]), "y": np.array([1.0, 1.0, 0.0])}
    out = law.compute(ego, pred, {}, {}, 0.02)
    assert np.all(np.isfinite(out["yaw_rate"])) and out["has_path"].all()
    np.testing.assert_allclose(out["yaw_rate"], 0.0, atol=1e-8)  # w = v kappa, v ~ 0; row 2: no direction
    ego["v"] = np.array([2.0, 1e-9, 2.0])
    w = law.compute(ego, pred, {}, {}, 0.02)["yaw_rate"]
    assert w[0] == pytest.approx(2.0 * 2.0 * 1.0 / 1.0)  # kappa = 2 y_l / d^2 = 2
    assert abs(w[1]) < 1e-8 and w[2] == 0.0


def test_pure_pursuit_rows_keep_their_crumbs_across_add_and_remove():
    law = PurePursuit(PurePursuitParams(buffer_size=8, crumb_spacing_m=0.1))
    law.add_rows(3)
    ego = {k: np.zeros(3) for k in ("x", "y", "yaw", "v")}
    for i in range(12):
        law.compute(ego, {"x": np.array([i, 10.0 + i, 20.0 + i]), "y": np.zeros(3)}, {}, {}, 0.1)
    np.testing.assert_array_equal(law.crumbs(1)[:, 0], 10.0 + np.arange(4, 12))  # ring keeps the newest 8
    law.remove_rows([0])
    law.add_rows(1)
    assert law.n_rows == 3
    np.testing.assert_array_equal(law.crumbs(0)[:, 0], 10.0 + np.arange(4, 12))
    assert law.crumbs(2).shape == (0, 2)
    with pytest.raises(ValueError, match="rows"):
        law.compute({k: np.zeros(2) for k in ego}, {"x": np.zeros(2), "y": np.zeros(2)}, {}, {}, 0.1)


# --- waypoint driver ----------------------------------------------------------------------------------------


def drive(driver: WaypointDriver, x, y, th, v, steps: int, dt: float = 0.01):
    trace = []
    for _ in range(steps):
        v_cmd, w, a = driver.step(x, y, th, v, dt)
        assert np.all(np.isfinite(v_cmd)) and np.all(np.isfinite(w)) and np.all(np.isfinite(a))
        np.testing.assert_allclose(v + a * dt, v_cmd, atol=1e-12)
        x, y, th, v = unicycle_step(x, y, th, v, w, a, dt)
        trace.append((x.copy(), y.copy(), v.copy()))
    return x, y, th, v, trace


def test_waypoint_driver_laps_a_closed_polygon_at_its_speed():
    ang = np.linspace(0.0, 2 * np.pi, 72, endpoint=False)
    params = WaypointDriverParams(
        waypoints=[(R * np.cos(a), R * np.sin(a)) for a in ang], closed=True, speed_mps=2.0, lookahead_m=1.5
    )
    driver = WaypointDriver(params)
    sag = R * (1 - np.cos(np.pi / 72))  # polygon vs circle [m]
    start = (np.array([R, R]), np.array([0.0, -0.5]), np.array([np.pi / 2, np.pi / 2]), np.zeros(2))
    *_, trace = drive(driver, *start, steps=8000)  # two leaders, one starting 0.5 m off the path
    xs = np.array([t[0] for t in trace])
    ys = np.array([t[1] for t in trace])
    radial = np.hypot(xs, ys)[3000:] - R
    assert np.abs(radial).max() < sag + 0.01
    np.testing.assert_allclose(trace[-1][2], 2.0, atol=1e-6)
    assert np.all(driver.progress_m < driver.length_m)  # 160 m driven on a 62.8 m loop: progress wrapped


def test_waypoint_driver_stops_at_the_end_of_an_open_path():
    params = WaypointDriverParams(waypoints=[(0, 0), (10, 0), (10, 10)], speeds_mps=[2.0, 1.0, 1.0])
    x, y, _, v, trace = drive(WaypointDriver(params), np.zeros(1), np.zeros(1), np.zeros(1), np.zeros(1), 4000)
    assert np.hypot(x[0] - 10.0, y[0] - 10.0) < 0.05 and v[0] == 0.0
    speeds = np.array([t[2][0] for t in trace])
    assert speeds.max() <= 2.0 + 1e-9
    with pytest.raises(ValidationError):
        WaypointDriverParams(waypoints=[(0, 0), (1, 0)], speeds_mps=[1.0])
    with pytest.raises(ValidationError):
        WaypointDriverParams(waypoints=[(0, 0), (1, 0), (0, 0)], closed=True)


# --- extended look-ahead CACC on the circle -----------------------------------------------------------------


@pytest.fixture(scope="module")
def circle_runs():
    """AuNa theoretical evaluation: gains (3.5, 3.5), r = 1 m, h = 0.2 s, 4 followers, circle profile."""
    profile = ProfileParams()

    def leader(t: float) -> tuple[float, float]:
        v, w, _ = circle(np.array([t]), profile)
        return float(v[0]), float(w[0])

    runs = {}
    for extended in (True, False):
        law = ElaCacc(ElaCaccParams(k1=3.5, k2=3.5, standstill_m=1.0, time_gap_s=0.2, extended=extended))
        runs[extended] = simulate_platoon(law, leader, 4, 1.2, 1.0, 40.0, 0.002, record_every=5)
    return runs


def radial_offsets(run) -> np.ndarray:
    """Distance of every vehicle from the leader's circle minus R, after the leader's turn-in (t > 8 s)."""
    k = int(np.argmax(run.t > 8.0))
    cx = run.x[k, 0] - R * np.sin(run.th[k, 0])  # centre on the left of the leader's heading
    cy = run.y[k, 0] + R * np.cos(run.th[k, 0])
    return np.hypot(run.x - cx, run.y - cy) - R


def test_ela_cacc_extended_followers_settle_on_the_leaders_circle(circle_runs):
    run = circle_runs[True]
    off = radial_offsets(run)
    late = run.t > 25.0
    assert np.abs(off[late, 0]).max() < 1e-6  # the leader itself defines the circle
    assert np.abs(off[late]).max() < 2e-3, np.abs(off[late]).max(axis=0)
    assert np.abs(off[(run.t > 8) & (run.t < 14)]).max() > np.abs(off[late]).max()  # transient did happen
    gaps = np.hypot(np.diff(run.x[-1]), np.diff(run.y[-1]))
    np.testing.assert_allclose(gaps, gaps[0], rtol=1e-4)  # same spacing all along the chain


def test_ela_cacc_classic_cuts_d2_over_2r_per_vehicle(circle_runs):
    run = circle_runs[False]
    off = radial_offsets(run)[run.t > 25.0].mean(axis=0)
    D = 1.0 + 0.2 * 1.0
    per_vehicle = -np.diff(off)
    np.testing.assert_allclose(per_vehicle, D**2 / (2 * R), rtol=0.2)
    assert off[-1] < -3.5 * D**2 / (2 * R)  # cutting accumulates down the chain
