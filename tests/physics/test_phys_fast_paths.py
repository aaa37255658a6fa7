"""The compiled fast paths of the physics federate on crafted scenes: the range scan's window walk, the collision
screening's early exit and the range port's deferred noise give what the definitions (and the eager paths) give."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.rng import KeyedNormal
from core.robot_blocks import DEFAULT_VEHICLE, InitialState, VehicleBlock
from core.robots import RobotSpec
from core.spawn_columns import block_column, optional_ids, shared_blocks, spec_column
from federates.physics.collisions import _any_near, near_pairs
from federates.physics.federate import PhysicsFederate
from federates.physics.range_scan import RangeSensor
from federates.physics.snapshot import state_snapshot

from .range_oracle import nearest_in_path, predicted_curvature

FRONT, REAR, WIDTH = 0.4, 0.1, 0.18


def _crafted_scene() -> tuple[np.ndarray, ...]:
    """Robot 0 at the origin heading +x, sensor 0.4 m ahead, max range 10 m, field of view +-0.4 rad, and around it:
    a target exactly at the edge of the field of view, one just beyond the maximum range, one in the next lane, a
    platoon on a left curve, and three straight lanes stacked across (the layout that sorts along y)."""
    xs, ys, yaws = [0.0], [0.0], [0.0]
    # rear bumper (0.1 m behind the rear axle) at bearing 0.4 rad from the sensor, 3 m away: on the edge
    bx, by = FRONT + 3.0 * math.cos(0.4), 3.0 * math.sin(0.4)
    xs.append(bx + REAR)
    ys.append(by)
    yaws.append(0.0)
    # straight ahead, rear bumper 10 m + 1 mm from the sensor: beyond the range
    xs.append(FRONT + 10.001 + REAR)
    ys.append(0.0)
    yaws.append(0.0)
    # the next lane, 3.5 m to the left, 4 m ahead
    xs.append(4.0)
    ys.append(3.5)
    yaws.append(0.0)
    # a platoon of 5 on a left circle of radius 8 m starting at (20, 0), 2 m apart along the arc
    for k in range(5):
        phi = k * 2.0 / 8.0
        xs.append(20.0 + 8.0 * math.sin(phi))
        ys.append(8.0 - 8.0 * math.cos(phi))
        yaws.append(phi)
    # three lanes 30 m apart across, 6 robots each, heading +x, 1.5 m apart: the scene spreads more along y than
    # along x, so the scan sorts along y and walks each sensor's window across the lanes
    for lane in range(3):
        for k in range(6):
            xs.append(-30.0 - 1.5 * k)
            ys.append(-20.0 - 30.0 * lane - 0.01 * k)
            yaws.append(0.0)
    return np.array(xs), np.array(ys), np.array(yaws)


def test_range_scan_on_a_crafted_scene_matches_the_definition() -> None:
    x, y, yaw = _crafted_scene()
    n = len(x)
    assert np.ptp(y) > np.ptp(x)
    v = np.full(n, 1.0)
    yaw_rate = np.zeros(n)
    yaw_rate[4:9] = 1.0 / 8.0  # the platoon on the curve turns at v / R
    front, rear, width = np.full(n, FRONT), np.full(n, REAR), np.full(n, WIDTH)
    ids = np.arange(n, dtype=np.int64) + 10
    sensor = RangeSensor(KeyedNormal(1, "range"), max_range_m=10.0, fov_rad=0.8)
    sensor.add(front, rear, width)
    got = sensor.measure(x, y, yaw, v, noise=False, yaw_rate=yaw_rate, ids=ids)
    want = nearest_in_path(x, y, yaw, v, front, rear, width, predicted_curvature(yaw_rate, v), np.full(n, -1),
                           ids, 10.0, 0.8, sensor.keep_factor)
    np.testing.assert_array_equal(got["target"], want["target"])
    np.testing.assert_allclose(got["range"], want["range"], rtol=1e-12)
    np.testing.assert_allclose(got["bearing"], want["bearing"], rtol=1e-12, atol=1e-15)
    # by construction: robot 0 sees nobody (the edge target is off its straight path, the far one out of range, the
    # next lane aside); on the curve each follower sees the one ahead at the chord 2 R sin(1 / 8) less the offsets
    assert got["target"][0] == -1
    for k in range(4, 8):
        assert got["target"][k] == k + 1
    assert got["target"][8] == -1
    # in each straight lane every robot but the first sees the one ahead: 1.5 m less the sensor and bumper offsets
    for lane in range(3):
        first = 9 + 6 * lane
        assert got["target"][first] == -1
        for k in range(1, 6):
            assert got["target"][first + k] == first + k - 1
            assert math.isclose(got["range"][first + k], math.hypot(1.5 - FRONT - REAR, 0.01), rel_tol=1e-12)


def test_range_scan_sees_a_target_on_the_edge_of_its_view_and_not_beyond_its_range() -> None:
    x, y, yaw = _crafted_scene()
    sel = [0, 1, 2]  # the ego, the target on the edge of the field of view and the one just out of range
    x, y, yaw = x[sel], y[sel], yaw[sel]
    n = len(x)
    sensor = RangeSensor(KeyedNormal(1, "range"), max_range_m=10.0, fov_rad=0.8, corridor_half_width_m=5.0)
    sensor.add(np.full(n, FRONT), np.full(n, REAR))
    got = sensor.measure(x, y, yaw, np.ones(n), noise=False)
    assert got["target"][0] == 1  # a wide corridor: the edge of the field of view counts (|bearing| <= fov / 2)
    assert math.isclose(got["range"][0], 3.0, rel_tol=1e-12)
    assert math.isclose(got["bearing"][0], 0.4, rel_tol=1e-12)
    narrow = RangeSensor(KeyedNormal(1, "range"), max_range_m=10.0, fov_rad=0.79, corridor_half_width_m=5.0)
    narrow.add(np.full(n, FRONT), np.full(n, REAR))
    assert narrow.measure(x, y, yaw, np.ones(n), noise=False)["target"][0] == -1  # just outside the view
    # alone with the far target: 10.001 m is beyond the 10 m range, 10.002 m of range sees it
    far = [0, 2]
    for max_range, seen in ((10.0, -1), (10.002, 1)):
        only = RangeSensor(KeyedNormal(1, "range"), max_range_m=max_range, fov_rad=0.8)
        only.add(np.full(2, FRONT), np.full(2, REAR), np.full(2, WIDTH))
        assert only.measure(x[far], y[far], yaw[far], np.ones(2), noise=False)["target"][0] == seen


def test_collision_screening_finds_a_near_pair_exactly_when_the_sweep_does() -> None:
    rng = np.random.default_rng(3)
    # 40 robots on a line 2 m apart with radius 0.9: no pair; radius 1.0: touching circles count
    x, y = 2.0 * np.arange(40.0), np.zeros(40)
    assert not _any_near(x, y, np.full(40, 0.9))
    assert _any_near(x, y, np.full(40, 1.0))
    for n in (17, 50, 300):
        for spread in (5.0, 50.0, 500.0):
            px, py = rng.uniform(0, spread, n), rng.uniform(0, spread / 10, n)
            radius = rng.uniform(0.05, 0.5, n)
            assert _any_near(px, py, radius) == (near_pairs(px, py, radius).shape[0] > 0)


def _spec(robot_id: int, x: float) -> RobotSpec:
    return RobotSpec(id=robot_id, name=f"r{robot_id}", vehicle=VehicleBlock("auna_rc_1to10", "kinematic"),
                     initial=InitialState(x=x, v=1.0))


def test_the_range_port_computes_the_same_noisy_values_when_read_later() -> None:
    fed = PhysicsFederate("physics", 10_000_000, {"range_sensor": {"bearing_noise_std_rad": 0.01}})

    class Ctx:
        seed = 7

    fed.setup(Ctx())  # type: ignore[arg-type]
    fed.spawn([_spec(k, -1.5 * k) for k in range(6)])
    out = fed.step(0, {})
    port, state = out["range"], out["state"]
    assert port["target"].tolist() == [-1, 0, 1, 2, 3, 4]
    # the eager path: the same scan with the keyed noise of the same tick drawn at once
    sensor = RangeSensor(KeyedNormal(7, "physics", "range"), fov_rad=fed.config.range_sensor.fov_rad)
    assert fed._range is not None
    sensor.add(fed._range.front_offset_m, fed._range.rear_offset_m, fed._range.corridor_m)
    sensor.rng.ids = state["id"]  # type: ignore[attr-defined]
    sensor.rng.at(0)  # type: ignore[attr-defined]
    rng, rate, bearing, _, _ = sensor.measure_ids(state["x"], state["y"], state["yaw"], state["v"], state["id"],
                                                  yaw_rate=state["yaw_rate"])
    bearing_noise = KeyedNormal(7, "physics", "range_bearing")
    bearing_noise.ids = state["id"]
    bearing_noise.at(0)
    bearing = bearing + 0.01 * bearing_noise.standard_normal(len(rng))
    np.testing.assert_array_equal(port["range_m"], rng)
    np.testing.assert_array_equal(port["range_rate_mps"], rate)
    np.testing.assert_array_equal(port["bearing_rad"], bearing)
    gaps = port["range_m"][1:]
    assert np.all(np.abs(gaps - (1.5 - (fed._range.front_offset_m[1:] + fed._range.rear_offset_m[1:]))) < 0.5)


def test_spawn_columns_read_what_the_comprehensions_read() -> None:
    shared = VehicleBlock("passenger_car")
    robots = [RobotSpec(id=k, name=f"r{k}", predecessor=None if k % 3 == 0 else k - 1,
                        **({"vehicle": shared, "initial": InitialState(x=float(k), v=2.0)} if k != 4 else {}))
              for k in range(7)]
    assert spec_column(robots, "name") == [f"r{k}" for k in range(7)]
    initial = spec_column(robots, "initial")
    x = block_column(initial, "x")
    assert x.dtype == np.float64 and x.tolist() == [0.0, 1.0, 2.0, 3.0, 0.0, 5.0, 6.0]
    assert block_column(initial, "v").tolist() == [2.0, 2.0, 2.0, 2.0, 0.0, 2.0, 2.0]
    assert block_column([], "x").dtype == np.float64
    blocks, index = shared_blocks(spec_column(robots, "vehicle"))
    assert blocks[0] is shared and blocks[1] is DEFAULT_VEHICLE and index.tolist() == [0, 0, 0, 0, 1, 0, 0]
    one, zeros = shared_blocks([shared] * 5)
    assert one == [shared] and zeros.tolist() == [0] * 5
    assert optional_ids(spec_column(robots, "predecessor")).tolist() == [-1, 0, 1, -1, 3, 4, -1]
    assert optional_ids([None, None]).tolist() == [-1, -1]


def test_state_snapshot_copies_and_a_non_finite_state_names_the_robot() -> None:
    state = {key: np.arange(3.0) + k for k, key in enumerate(("x", "y", "yaw", "v", "a", "yaw_rate", "steer"))}
    copies, finite = state_snapshot(state, tuple(state))
    assert finite and all(np.array_equal(copies[key], state[key]) for key in state)
    assert all(copies[key] is not state[key] for key in state)
    state["yaw"][1] = np.inf  # only x, y and v are checked
    assert state_snapshot(state, tuple(state))[1]
    state["v"][2] = np.nan
    assert not state_snapshot(state, tuple(state))[1]

    fed = PhysicsFederate("physics", 10_000_000, {"range_sensor": {"enabled": False}})

    class Ctx:
        seed = 1

    fed.setup(Ctx())  # type: ignore[arg-type]
    fed.spawn([_spec(k, -1.5 * k) for k in range(3)])
    fed.step(0, {})
    model = next(iter(fed._groups.values()))
    model.state["y"][1] = np.nan
    with pytest.raises(FloatingPointError) as error:
        fed.step(10_000_000, {})
    assert error.value.robot == "r1"  # type: ignore[attr-defined]
