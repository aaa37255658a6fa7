"""The compiled passes of the control step against their formulas: the look-ahead CACC's desired gap, the steering
conversion, the speed integration, sample ages, the one-pass reception and the lazily gathered columns."""

from __future__ import annotations

import math

import numpy as np

from controllers.columns import LazyColumns
from controllers.conversions import MIN_SPEED_FOR_STEER_MPS, integrate_speed_rows, yaw_rate_to_steer
from controllers.ela_cacc import ElaCacc, ElaCaccParams
from controllers.pipeline import ControlPipeline
from core.federate import SetupContext
from core.robot_blocks import ControllerSpec, DriveSpec
from core.robots import RobotSpec
from federates.control.federate import ControlFederate
from federates.control.received import Received


def test_desired_gap_is_the_chord_of_the_arc_and_d_on_a_straight() -> None:
    law = ElaCacc(ElaCaccParams(standstill_m=1.0, time_gap_s=0.5))
    v = np.array([0.0, 2.0, 2.0, 2.0, 2.0, 4.0])
    k = np.array([0.0, 0.0, 0.1, -0.1, np.nan, np.inf])
    gap = law.desired_gap(v, k)
    D = 1.0 + 0.5 * v
    assert gap[0] == D[0] and gap[1] == D[1] and gap[4] == D[4]  # straight, and NaN curvature taken as straight
    chord = 2.0 * math.sin(0.5 * math.atan(0.1 * 2.0)) / 0.1  # arc angle atan(k D), chord 2 sin(alpha / 2) / k
    assert math.isclose(gap[2], chord, rel_tol=1e-15) and gap[3] == gap[2]  # |k|: the same either way round
    assert gap[5] < 1e-300  # an infinite curvature (the largest float): no gap left
    classic = ElaCacc(ElaCaccParams(standstill_m=1.0, time_gap_s=0.5, extended=False))
    np.testing.assert_array_equal(classic.desired_gap(v, k), D)


def test_steering_conversion_is_atan_of_w_l_over_v_clamped() -> None:
    w = np.array([0.5, -0.5, 10.0, np.nan, 0.1, -0.0])
    speed = np.array([2.0, 2.0, 2.0, 2.0, 0.0, 1.0])
    wheelbase = np.full(6, 0.32)
    max_steer = np.full(6, 0.5)
    steer = yaw_rate_to_steer(w, speed, wheelbase, max_steer)
    assert math.isclose(steer[0], math.atan(0.5 * 0.32 / 2.0), rel_tol=1e-15) and steer[1] == -steer[0]
    assert steer[2] == 0.5  # clamped to the steering limit
    assert math.isnan(steer[3])
    assert math.isclose(steer[4], math.atan(0.1 * 0.32 / MIN_SPEED_FOR_STEER_MPS), rel_tol=1e-15)
    assert steer[5] == 0.0
    # scalars go the plain way and agree
    assert yaw_rate_to_steer(0.5, 2.0, 0.32, 0.5) == steer[0]


def test_speed_integration_clamps_stops_and_leaves_other_rows() -> None:
    speed = np.array([1.0, 1.0, 0.05, 2.9, 1.0, 7.0])
    accel = np.array([2.0, -2.0, -10.0, 50.0, 1.0, 1.0])
    stop = np.array([False, False, False, False, True, False])
    max_speed = np.full(6, 3.0)
    integrate_speed_rows(speed, accel, stop, max_speed, np.array([0, 1, 2, 3, 4]), 0.1)
    np.testing.assert_array_equal(speed, [1.2, 0.8, 0.0, 3.0, 0.0, 7.0])  # row 5 is not a follower: untouched
    assert not np.signbit(speed[2])  # clamped at +0, as numpy's clip gives


def test_sample_ages_and_one_pass_reception() -> None:
    pred, leader = Received(), Received()
    pred.add(np.array([-1, 10, 11]))
    leader.add(np.array([-1, 10, 10]))
    row_of_id = np.array([-1] * 10 + [0, 1, 2], np.int64)  # robots 10, 11, 12 in rows 0, 1, 2
    rx = {"receiver": np.array([11, 12, 12, 12, 99]), "sender": np.array([10, 11, 10, 11, 10]),
          "generated_ns": np.array([5, 7, 6, 3, 9])}
    rx.update({name: np.arange(5.0) + f for f, name in enumerate(pred.fields)})
    fields = tuple(np.asarray(rx[name], np.float64) for name in pred.fields)
    pred.receive(rx, fields, row_of_id, also=leader)
    # row 1 wants 10 from both; row 2 wants 11 (the newest of its two deliveries, generated at 7) and leader 10
    assert pred.generated_ns.tolist() == [-1, 5, 7] and leader.generated_ns.tolist() == [-1, 5, 6]
    assert pred.values["x"][1:].tolist() == [0.0, 1.0] and leader.values["x"][1:].tolist() == [0.0, 2.0]
    alone = Received()
    alone.add(np.array([-1, 10, 10]))
    alone.receive(rx, np.stack(fields), row_of_id)
    np.testing.assert_array_equal(alone.held, leader.held)
    ages = pred.age_s(1_000_000_005, np.array([2, 0, 1]))
    assert ages[0] == (1_000_000_005 - 7) / 1e9 and ages[1] == math.inf and ages[2] == 1.0
    np.testing.assert_array_equal(pred.age_s(5, never=np.nan), [np.nan, 0.0, -2e-9])


def test_lazy_columns_compute_on_first_read_only() -> None:
    made: list[str] = []

    def load(name: str) -> np.ndarray:
        made.append(name)
        return np.arange(4.0) * (1 + len(name))

    cols = LazyColumns(("a", "bb"), load)
    part = cols.take(np.array([3, 1]))
    copy = cols.copy()
    assert made == [] and list(cols) == ["a", "bb"] and "a" in cols and len(cols) == 2
    assert part["bb"].tolist() == [9.0, 3.0] and made == ["bb"]
    assert copy["bb"] is cols["bb"] and made == ["bb"]  # read once, shared
    copy["c"] = np.zeros(1)
    assert "c" not in cols and list(copy) == ["a", "bb", "c"]
    together = LazyColumns.all_at_once(("x", "y"), lambda: {"x": np.ones(1), "y": np.zeros(1)})
    assert dict(together) == {"x": np.ones(1), "y": np.zeros(1)}


def test_a_steering_law_alone_holds_without_a_pose_and_stops_behind_a_standing_predecessor() -> None:
    pipeline = ControlPipeline.from_block({"type": "ela_cacc", "k1": 1.0, "k2": 1.0}, 0.02)
    n = 3
    ego = {"x": np.array([0.0, 0.0, 0.0]), "y": np.zeros(n), "yaw": np.zeros(n), "v": np.ones(n),
           "a": np.zeros(n), "yaw_rate": np.zeros(n)}
    # row 0: no sample yet; row 1: a predecessor standing still; row 2: a predecessor at the settled gap D = 2 m
    pred = {"x": np.array([np.nan, 2.0, 2.0]), "y": np.zeros(n), "yaw": np.zeros(n), "v": np.array([np.nan, 0.0, 1.0]),
            "a": np.zeros(n), "yaw_rate": np.zeros(n), "u_des": np.full(n, np.nan)}
    pipeline._ensure_rows(n)
    pipeline._state["yaw_rate"][:] = [0.3, 0.2, 0.1]  # the yaw rates commanded last
    ages = np.array([np.inf, 0.0, 0.0])
    out = pipeline.step(0.0, ego, pred, {}, ages, ages, {})
    assert out.accel[0] == 0.0 and out.yaw_rate[0] == 0.3 and not out.stop[0]  # no pose: hold
    assert out.stop[1] and out.yaw_rate[1] == 0.2  # standing predecessor: stop, hold the yaw rate
    assert out.accel[2] == 0.0 and out.yaw_rate[2] == 0.0 and not out.stop[2]  # settled on a straight: nothing to do
    assert not out.degraded.any()
    np.testing.assert_array_equal(out.desired_gap_m, [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(pipeline._state["yaw_rate"], out.yaw_rate)


def test_desired_gaps_read_late_are_those_of_their_step_through_a_spawn() -> None:
    block = {"type": "ela_cacc", "period_s": 0.02, "predict": "none", "lateral": None, "fallback": None,
             "standstill_m": 1.0, "time_gap_s": 0.5}
    fed = ControlFederate("control", 20_000_000)
    fed.setup(SetupContext(seed=1, end_ns=10**9))
    leader = RobotSpec(1, "r1", driver=DriveSpec("constant", {"speed_mps": 1.0}))
    fed.spawn([leader, RobotSpec(2, "r2", predecessor=1, leader=1, controller=ControllerSpec.from_plain(block))])

    def estimate(ids: np.ndarray, v: float) -> dict[str, np.ndarray]:
        n = len(ids)
        return {"id": ids, "x": -2.0 * np.arange(n), "y": np.zeros(n), "yaw": np.zeros(n), "v": np.full(n, v),
                "a": np.zeros(n), "yaw_rate": np.zeros(n)}

    first = fed.step(0, {"estimate": estimate(fed._ids, 1.0)})["control_diag"]
    second = fed.step(20_000_000, {"estimate": estimate(fed._ids, 3.0)})["control_diag"]
    fed.spawn([RobotSpec(3, "r3", predecessor=2, leader=1, controller=ControllerSpec.from_plain(block))])
    third = fed.step(40_000_000, {"estimate": estimate(fed._ids, 2.0)})["control_diag"]
    # read in reverse order, after the spawn: each is its own step's r + h v (NaN for the leader and the newcomer
    # until its first step)
    np.testing.assert_array_equal(third["desired_gap_m"], [np.nan, 2.0, 2.0])
    np.testing.assert_array_equal(second["desired_gap_m"], [np.nan, 2.5])
    np.testing.assert_array_equal(first["desired_gap_m"], [np.nan, 1.5])
    assert list(third) == ["id", "pred_age_s", "desired_gap_m", "pred_x", "pred_y", "pred_v", "degraded"]


def test_the_look_ahead_law_reads_rows_in_place_exactly_as_from_gathered_copies() -> None:
    rng = np.random.default_rng(11)
    n, m = 50, 20
    est = {"x": rng.normal(0, 5, n), "y": rng.normal(0, 5, n), "yaw": rng.uniform(-3, 3, n), "v": rng.uniform(0, 3, n),
           "a": np.zeros(n), "yaw_rate": np.zeros(n)}
    held = rng.normal(0, 1, (7, n))
    held[3] = rng.uniform(0, 3, n)  # predecessor speeds, some below the stop threshold
    held[5] = rng.normal(0, 0.3, n)  # and yaw rates: curved and straight paths
    rows = np.sort(rng.choice(n, m, replace=False))
    names = ("x", "y", "yaw", "v", "a", "yaw_rate", "u_des")
    ego = LazyColumns(tuple(est), lambda k: est[k][rows], (est.__getitem__, rows))
    pred = LazyColumns(names, lambda k: held[names.index(k)][rows], (lambda k: held[names.index(k)], rows))
    law = ElaCacc(ElaCaccParams(k1=1.0, k2=0.7))
    in_place = law.compute(ego, pred, {}, {}, 0.02)
    gathered = law.compute({k: est[k][rows] for k in est}, {k: held[f][rows] for f, k in enumerate(names)}, {}, {},
                           0.02)
    for key in ("accel", "yaw_rate", "stop"):
        np.testing.assert_array_equal(in_place[key], gathered[key])
    assert np.isfinite(in_place["accel"]).all() and np.abs(in_place["accel"]).max() > 0
    assert ego.source_of(("x", "v")) is not None and pred.copy().source_of(("x",)) is not None
    pred["x"] = pred["x"] - 1.0  # a column set by hand is no longer the source's: the law gathers again
    assert pred.source_of(("x", "y")) is None and pred.source_of(("y",)) is not None
    moved = law.compute(ego, pred, {}, {}, 0.02)
    assert not np.array_equal(moved["accel"], in_place["accel"])
