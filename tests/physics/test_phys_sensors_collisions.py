"""Sensors (odometry drift, range geometry, fusion) and collision detection on known geometry."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.rng import stream
from federates.physics.collisions import colliding_pairs
from federates.physics.range_scan import RangeSensor, path_offset
from federates.physics.sensors import DeadReckoning, Gnss, Imu, PoseFusion
from tests.timing import best_times

from .helpers import commands, make
from .range_oracle import nearest_in_path, predicted_curvature


def drive_circle(vehicle: str, tyre: str, speed: float, steer: float, seconds: float,
                 dt: float = 0.01) -> tuple[float, float]:
    """Dead-reckoning position error [m] with noise-free encoders, and the mean |rear slip angle| [rad]."""
    m, p = make(vehicle, [tyre], speed, dt=dt, mode="speed_steer")
    odo = DeadReckoning(stream(1, "physics", 0, "odo"), noise_rel=0.0)
    odo.add(np.array([p["track_m"]]), np.zeros(1), np.zeros(1), np.zeros(1))
    slip = []
    for _ in range(round(seconds / dt)):
        m.step(commands(1, speed=speed, steer=steer))
        w = m.wheel_odometry()
        odo.step(w["dist_rl"], w["dist_rr"], dt)
        slip.append(abs(m.diagnostics["alpha_r"][0]))
    err = math.hypot(odo.x[0] - m.state["x"][0], odo.y[0] - m.state["y"][0])
    return err, float(np.mean(slip))


def test_odometry_drift_grows_with_slip() -> None:
    # same path length (20 m) on the same circle radius, low vs high lateral acceleration
    low = drive_circle("auna_rc_1to10", "fiala", 0.8, 0.25, 25.0)
    high = drive_circle("auna_rc_1to10", "fiala", 2.5, 0.25, 8.0)
    assert high[1] > 3 * low[1]
    assert high[0] > 3 * low[0]
    assert low[0] < 0.2


def test_wheel_distance_includes_longitudinal_slip() -> None:
    dt = 0.01
    m, _ = make("mit_racecar_1to10", ["pacejka"], 1.0, dt=dt, mode="accel_steer", max_accel_mps2=20.0,
                max_speed_mps=50.0)
    wheel = true = 0.0
    for _ in range(50):
        x0 = m.state["x"][0]
        m.step(commands(1, accel=20.0))
        w = m.wheel_odometry()
        wheel += 0.5 * (w["dist_rl"][0] + w["dist_rr"][0])
        true += m.state["x"][0] - x0
    assert m.wheel_odometry()["slip_ratio"][0] > 0.1
    assert wheel > 1.1 * true  # spinning wheels over-count
    assert w["omega_rl"][0] == pytest.approx(m.state["v"][0] * (1 + w["slip_ratio"][0]) / 0.05)


def test_range_sensor_geometry() -> None:
    sensor = RangeSensor(stream(1, "range"), max_range_m=20.0, fov_rad=math.radians(20))
    sensor.add(np.full(5, 0.4), np.full(5, 0.1))
    # robot 0 at the origin heading +x; 1 ahead at 10 m; 2 further ahead; 3 beside (outside the field of view);
    # 4 behind
    x = np.array([0.0, 10.0, 15.0, 10.0, -5.0])
    y = np.array([0.0, 0.0, 0.0, 6.0, 0.0])
    yaw = np.zeros(5)
    v = np.array([2.0, 1.5, 1.0, 1.0, 1.0])
    out = sensor.measure(x, y, yaw, v, noise=False)
    assert out["range"][0] == pytest.approx(10.0 - 0.4 - 0.1)
    assert out["range_rate"][0] == pytest.approx(-0.5)
    assert out["target"][0] == 1
    assert out["target"][1] == 2 and out["range"][1] == pytest.approx(4.5)
    assert np.isnan(out["range"][2]) and out["target"][2] == -1  # nothing ahead of the leader
    assert out["target"][4] == 0
    # out of range / rotated frames
    sensor.remove(np.arange(2, 5))
    far = sensor.measure(np.array([0.0, 30.0]), np.zeros(2), np.zeros(2), np.ones(2), noise=False)
    assert np.all(np.isnan(far["range"][:1]))
    rot = sensor.measure(np.array([0.0, 0.0]), np.array([0.0, 8.0]), np.full(2, math.pi / 2), np.ones(2),
                         noise=False)
    assert rot["range"][0] == pytest.approx(7.5)


def test_path_offset_is_the_distance_to_the_predicted_circle() -> None:
    assert path_offset(5.0, 0.3, 0.0) == pytest.approx(-0.3)  # straight path: minus the lateral position
    R = 10.0
    for arc in (0.5, 3.5, 12.0):  # on the circle of curvature 1/R (centre at (0, R)) at any arc length
        fwd, left = R * math.sin(arc / R), R * (1 - math.cos(arc / R))
        assert path_offset(fwd, left, 1 / R) == pytest.approx(0.0, abs=1e-12)
        # 0.4 m outside / inside the circle along the radius (outward: (sin, -cos) of the arc angle)
        out_x, out_y = math.sin(arc / R), -math.cos(arc / R)
        assert path_offset(fwd + 0.4 * out_x, left + 0.4 * out_y, 1 / R) == pytest.approx(0.4)
        assert path_offset(fwd - 0.4 * out_x, left - 0.4 * out_y, 1 / R) == pytest.approx(-0.4)
        # a right turn: the mirror image, positive still to the right of the path
        assert path_offset(fwd, -left, -1 / R) == pytest.approx(0.0, abs=1e-12)
        assert path_offset(fwd + 0.4 * out_x, -(left + 0.4 * out_y), -1 / R) == pytest.approx(-0.4)


def _ego_and_target(left: float) -> tuple[np.ndarray, ...]:
    """Ego at the origin heading +x (sensor 0.4 m ahead), target rear bumper 3 m ahead of it, ``left`` aside."""
    return np.array([0.0, 3.5]), np.array([0.0, left]), np.zeros(2), np.ones(2)


def test_range_sensor_selects_the_in_path_target_and_tracks_it_into_a_curve() -> None:
    width = np.full(2, 0.18)
    x, y, yaw, v = _ego_and_target(0.4)
    on_path = 2 * 0.4 / (3.0**2 + 0.4**2)  # curvature of the circle through the target: yaw rate at 1 m/s
    fresh = RangeSensor(stream(1, "range"))
    fresh.add(np.full(2, 0.4), np.full(2, 0.1), width)
    assert fresh.measure(x, y, yaw, v, noise=False)["target"][0] == -1  # 0.4 m off a straight path: not in path
    sensor = RangeSensor(stream(1, "range"))
    sensor.add(np.full(2, 0.4), np.full(2, 0.1), width)
    turning = sensor.measure(x, y, yaw, v, noise=False, yaw_rate=np.array([on_path, 0.0]))
    assert turning["target"][0] == 1 and turning["range"][0] == pytest.approx(math.hypot(3.0, 0.4))
    # the follower straightens out (or has not turned in yet): the tracked target is kept within 3 corridors
    assert sensor.measure(x, y, yaw, v, noise=False)["target"][0] == 1
    # ... and dropped once it is further aside than that (0.6 m > 3 x 0.18 m)
    x, y, yaw, v = _ego_and_target(0.6)
    assert sensor.measure(x, y, yaw, v, noise=False)["target"][0] == -1
    # a vehicle in the next lane (1 m aside) is never acquired, whatever the field of view
    x, y, yaw, v = _ego_and_target(1.0)
    wide = RangeSensor(stream(1, "range"), fov_rad=3.0)
    wide.add(np.full(2, 0.4), np.full(2, 0.1), width)
    assert wide.measure(x, y, yaw, v, noise=False)["target"][0] == -1
    with pytest.raises(ValueError, match="keep_factor"):
        RangeSensor(stream(1, "range"), keep_factor=0.5)


def _scenes(rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Random clutter of a few to 60 robots, and side-by-side platoons (the layout the broad phase narrows)."""
    scenes = []
    for n in (1, 2, 7, 60):
        scenes.append((rng.uniform(-20, 20, n), rng.uniform(-5, 5, n), rng.uniform(-0.5, 0.5, n)))
    lanes, per_lane = 12, 16
    heading = rng.uniform(-np.pi, np.pi)
    along = np.tile(-1.2 * np.arange(per_lane), lanes) + rng.normal(0, 0.05, lanes * per_lane)
    across = np.repeat(1.5 * np.arange(lanes), per_lane) + rng.normal(0, 0.1, lanes * per_lane)
    c, s = np.cos(heading), np.sin(heading)
    scenes.append((c * along - s * across, s * along + c * across, heading + rng.normal(0, 0.1, lanes * per_lane)))
    return scenes


def test_range_scan_matches_the_brute_force_oracle() -> None:
    rng = np.random.default_rng(5)
    for x, y, yaw in _scenes(rng):
        n = len(x)
        v = rng.uniform(0, 3, n)
        front, rear, width = rng.uniform(0.3, 0.5, n), rng.uniform(0.05, 0.1, n), rng.uniform(0.2, 1.5, n)
        ids = rng.permutation(n).astype(np.int64) + 100  # tracking goes by id, not by row
        sensor = RangeSensor(rng, max_range_m=15.0, fov_rad=0.8)
        sensor.add(front, rear, width)
        locked = np.full(n, -1, np.int64)
        for _ in range(3):  # the second and third scans exercise target tracking
            yaw_rate = rng.uniform(-0.3, 0.3, n)
            want = nearest_in_path(x, y, yaw, v, front, rear, width, predicted_curvature(yaw_rate, v), locked, ids,
                                   15.0, 0.8, sensor.keep_factor)
            got = sensor.measure(x, y, yaw, v, noise=False, yaw_rate=yaw_rate, ids=ids)
            np.testing.assert_array_equal(got["target"], want["target"])
            np.testing.assert_array_equal(sensor.locked_id, want["target_id"])
            np.testing.assert_allclose(got["range"], want["range"], rtol=1e-12)
            np.testing.assert_allclose(got["range_rate"], want["range_rate"], rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(got["bearing"], want["bearing"], rtol=1e-12, atol=1e-15)
            locked = want["target_id"]
            x, y = x + rng.normal(0, 0.3, n), y + rng.normal(0, 0.3, n)
        if n > 2:
            assert (got["target"] >= 0).any()


def test_fusion_bounds_the_drift_and_is_reproducible() -> None:
    def run(seed: int) -> tuple[float, float]:
        m, p = make("auna_rc_1to10", ["fiala"], 2.0, dt=0.01, mode="speed_steer")
        odo = DeadReckoning(stream(seed, "odo"), noise_rel=0.02, scale_error_std=0.02, heading_source="imu")
        odo.add(np.array([p["track_m"]]), np.zeros(1), np.zeros(1), np.zeros(1), rngs=[stream(seed, "odo", 0)])
        imu, gnss, ekf = Imu(stream(seed, "imu"), yaw_rate_bias_std=0.01), Gnss(stream(seed, "gnss"), pos_std_m=0.3), \
            PoseFusion(gnss_pos_std_m=0.3)
        imu.add(1, rngs=[stream(seed, "imu", 0)])
        ekf.add(np.zeros(1), np.zeros(1), np.zeros(1))
        for k in range(3000):
            m.step(commands(1, speed=2.0, steer=0.2 * math.sin(0.01 * k)))
            w = m.wheel_odometry()
            odo.step(w["dist_rl"], w["dist_rr"], 0.01, imu.measure(m.state["yaw_rate"])["yaw_rate"])
            ekf.predict(odo.ds, odo.dth)
            if k % 10 == 0:
                ekf.update(gnss.measure(m.state["x"], m.state["y"], m.state["yaw"]))
        tx, ty = m.state["x"][0], m.state["y"][0]
        return math.hypot(odo.x[0] - tx, odo.y[0] - ty), math.hypot(ekf.x[0] - tx, ekf.y[0] - ty)

    dr, fused = run(3)
    assert fused < 0.5 and fused < dr
    assert run(3) == (dr, fused)
    assert run(4) != (dr, fused)


def brute_force(x, y, yaw, length, width, rear):
    """All pairs, separating axes on the polygon corners."""
    def corners(i: int) -> np.ndarray:
        c, s = math.cos(yaw[i]), math.sin(yaw[i])
        pts = np.array([[-rear, -width / 2], [length - rear, -width / 2], [length - rear, width / 2],
                        [-rear, width / 2]])
        return np.array([[x[i] + c * px - s * py, y[i] + s * px + c * py] for px, py in pts])

    out = []
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            a, b = corners(i), corners(j)
            axes = [a[1] - a[0], a[3] - a[0], b[1] - b[0], b[3] - b[0]]
            if all((a @ ax).max() >= (b @ ax).min() and (b @ ax).max() >= (a @ ax).min() for ax in axes):
                out.append((i, j))
    return out


def test_collisions_known_rectangles() -> None:
    # 0/1 overlap end to end; 2 rotated 45 deg beside 3, bounding boxes overlapping but separated;
    # 5 exactly touching 4
    x = np.array([0.0, 4.0, 20.0, 23.5, 50.0, 54.5])
    y = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    yaw = np.array([0.0, 0.0, math.pi / 4, 0.0, 0.0, 0.0])
    pairs = colliding_pairs(x, y, yaw, 4.5, 1.8, 0.9)
    assert pairs.tolist() == [[0, 1], [4, 5]]
    assert pairs.tolist() == [list(p) for p in brute_force(x, y, yaw, 4.5, 1.8, 0.9)]


def test_collisions_random_match_brute_force_and_scale() -> None:
    rng = np.random.default_rng(7)
    n = 150
    x, y, yaw = rng.uniform(0, 60, n), rng.uniform(0, 20, n), rng.uniform(-math.pi, math.pi, n)
    got = colliding_pairs(x, y, yaw, 4.5, 1.8, 0.9).tolist()
    assert got == [list(p) for p in brute_force(x, y, yaw, 4.5, 1.8, 0.9)]
    assert len(got) > 5
    # 1,000 vehicles in platoons on a 3-lane road: cheap, and four times as many cost about four times as much
    # (all pairs would cost 16 times); timed against itself, so load slows both sides alike (tests/timing.py)
    def platoons(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x = np.tile(np.arange(n // 3 + 1) * 10.0, 3)[:n]
        y = np.repeat([0.0, 3.5, 7.0], n // 3 + 1)[:n]
        return x, y, np.zeros(n)

    small, large = platoons(1000), platoons(4000)
    assert colliding_pairs(*small, 4.5, 1.8, 0.9).shape == (0, 2)
    assert colliding_pairs(*large, 4.5, 1.8, 0.9).shape == (0, 2)
    small_s, large_s = best_times(lambda: colliding_pairs(*small, 4.5, 1.8, 0.9),
                                  lambda: colliding_pairs(*large, 4.5, 1.8, 0.9), rounds=7)
    assert large_s < 8 * small_s, f"{small_s * 1e3:.2f} ms for 1,000 vehicles, {large_s * 1e3:.2f} ms for 4,000"
