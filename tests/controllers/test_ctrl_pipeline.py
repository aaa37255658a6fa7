"""The control pipeline: CTRV prediction against circle geometry, one fallback shared by ``controller.fallback``
and the ``cacc_fallback`` law, the degraded speed hold, row bookkeeping, and the federate's O(1)-per-call spawn."""

from __future__ import annotations

import math

import numpy as np
import pytest
from harness import PlatoonConfig, simulate

from controllers.base import Arrays, Controller
from controllers.ela_cacc import ElaCacc, ElaCaccParams
from controllers.fallback import ACC, CACC, CaccWithFallback, CaccWithFallbackParams, Fallback
from controllers.pipeline import ControlPipeline, FallbackStageParams
from controllers.ploeg_cacc import PloegCacc, PloegCaccParams
from controllers.prediction import predict_ctrv, predict_none

DT = 0.01


# --- prediction -------------------------------------------------------------------------------------------------


def test_ctrv_moves_a_sample_along_its_circle():
    """A sender on a circle of radius R = v / w about the origin, counter-clockwise: after an age dt it is on the
    same circle, advanced by the angle w dt, heading tangent to it."""
    v, w, R = 1.0, 0.1, 10.0
    phi = np.array([0.0, 0.7, 2.5, -1.0])
    age = np.array([0.0, 0.3, 1.0, 4.0])
    sample = {"x": R * np.cos(phi), "y": R * np.sin(phi), "yaw": phi + np.pi / 2, "v": np.full(4, v),
              "yaw_rate": np.full(4, w), "a": np.zeros(4)}
    out = predict_ctrv(sample, age)
    np.testing.assert_allclose(out["x"], R * np.cos(phi + w * age), atol=1e-12)
    np.testing.assert_allclose(out["y"], R * np.sin(phi + w * age), atol=1e-12)
    np.testing.assert_allclose(out["yaw"], phi + w * age + np.pi / 2, atol=1e-12)
    assert out["a"] is sample["a"] and out["v"] is sample["v"]  # what CTRV keeps constant is passed through


def test_ctrv_is_straight_without_turn_rate_and_still_for_unusable_ages():
    sample = {"x": np.zeros(4), "y": np.ones(4), "yaw": np.full(4, math.pi / 6), "v": np.full(4, 2.0),
              "yaw_rate": np.array([0.0, 1e-9, 0.0, 0.0])}
    out = predict_ctrv(sample, np.array([0.5, 0.5, np.inf, -0.1]))  # never received (inf), or from the future
    np.testing.assert_allclose(out["x"], [math.cos(math.pi / 6), math.cos(math.pi / 6), 0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(out["y"], [1.5, 1.5, 1.0, 1.0], atol=1e-9)
    assert predict_none(sample, np.zeros(4)) == sample


# --- one fallback -----------------------------------------------------------------------------------------------


class PipelineLaw(Controller):
    """A pipeline behind the law interface, so the longitudinal harness can drive it (no positions: NaN)."""

    def __init__(self, pipeline: ControlPipeline) -> None:
        super().__init__(pipeline.law.params)
        self.pipeline = pipeline
        self.t_s = 0.0

    def compute(self, ego: Arrays, pred: Arrays, leader: Arrays, sensors: Arrays, dt: float) -> dict[str, np.ndarray]:
        n = len(ego["v"])
        nan, zero = np.full(n, np.nan), np.zeros(n)
        out = self.pipeline.step(
            self.t_s, {"x": zero, "y": zero, "yaw": zero, "yaw_rate": zero, **ego},
            {"x": nan, "y": nan, "yaw": nan, "yaw_rate": nan, **{k: v for k, v in pred.items() if k != "age_s"}},
            {"x": nan, "y": nan, "yaw": nan, "yaw_rate": nan, **leader}, pred["age_s"], pred["age_s"],
            {"target_x": nan, "target_y": nan, **sensors},
        )
        self.t_s += dt
        return {"accel": out.accel, "degraded": out.degraded}

    def desired_gap(self, v: np.ndarray, curvature: np.ndarray | None = None) -> np.ndarray:
        return self.pipeline.law.desired_gap(v, curvature)


def cut_platoon() -> PlatoonConfig:
    """4 cars at 20 m/s, tau = 0.5 s, 10 Hz beacons; the link is down from 3 to 8 s."""
    return PlatoonConfig(n_vehicles=4, duration_s=20.0, tau_s=0.5, v0_mps=20.0, beacon_period_s=0.1,
                         channel_up=lambda t: not (3.0 <= t < 8.0))


def test_controller_fallback_and_cacc_fallback_run_the_same_code():
    """Ploeg's CACC with ``controller.fallback`` (the ACC of ``cacc_fallback``) and the ``cacc_fallback`` law give
    the same commands bit for bit through an outage, a degradation and a return."""
    stage = FallbackStageParams(acc=CaccWithFallbackParams().acc)
    block = PipelineLaw(ControlPipeline(PloegCacc(PloegCaccParams()), DT, fallback=stage))
    law = PipelineLaw(ControlPipeline(CaccWithFallback(CaccWithFallbackParams()), DT))
    assert isinstance(block.pipeline.fallback, Fallback) and isinstance(law.pipeline.law.fallback, Fallback)
    run_block, run_law = simulate(block, cut_platoon()), simulate(law, cut_platoon())
    assert run_block.outputs["degraded"][int(5.0 / DT)].all() and not run_block.outputs["degraded"][-1].any()
    np.testing.assert_array_equal(run_block.u, run_law.u)
    np.testing.assert_array_equal(run_block.outputs["degraded"], run_law.outputs["degraded"])


def test_a_stateful_law_behind_controller_fallback_returns_bumplessly():
    """The law's integrator is handed the applied ACC command while degraded, so the command does not jump when
    CACC takes over again; an integrator left running on frozen data does jump."""

    def jump(pipeline: ControlPipeline) -> float:
        run = simulate(PipelineLaw(pipeline), cut_platoon())
        degraded = run.outputs["degraded"][:, 0]
        k = int(np.flatnonzero(degraded[:-1] & ~degraded[1:])[-1]) + 1  # first CACC step after the outage
        return float(np.abs(run.u[k, 1] - run.u[k - 1, 1]))

    # handed back, the integrator restarts from the applied command and closes 1 - exp(-dt / h) (2 %) of the
    # distance to its drive per step: ~0.04 m/s^2 for the ~2 m/s^2 between them here
    stage = FallbackStageParams(acc=CaccWithFallbackParams().acc)
    h = PloegCaccParams().time_gap_s
    assert jump(ControlPipeline(PloegCacc(PloegCaccParams()), DT, fallback=stage)) < (1 - math.exp(-DT / h)) * 2.5
    free_running = ControlPipeline(PloegCacc(PloegCaccParams()), DT, fallback=stage)
    free_running.law.hand_back = lambda rows, accel: None  # type: ignore[method-assign]
    assert jump(free_running) > 1.0  # it kept integrating towards the frozen data's command


def test_a_degraded_follower_holds_the_speed_it_had_when_it_degraded():
    """Without a range target the ACC is pure cruise control at 130 km/h; the hold caps it with Kp (v_hold - v),
    so the follower settles at the speed it had when its data went stale instead of speeding up."""
    fallback = Fallback(FallbackStageParams(), CaccWithFallbackParams().acc)
    kp = CaccWithFallbackParams().acc.cruise.kp
    nan = np.full(2, np.nan)
    sensors = {"gap_m": nan, "gap_rate_mps": nan}
    law_accel = np.array([0.3, 0.3])
    ages = np.array([0.0, 0.0])
    a, mode = fallback.apply(0.0, ages, {"v": np.array([1.0, 1.0])}, {"v": nan}, sensors, DT, law_accel)
    assert mode.tolist() == [CACC, CACC] and a.tolist() == law_accel.tolist()
    ages = np.array([9.0, 0.0])  # row 0 goes stale at 1.0 m/s
    a, mode = fallback.apply(DT, ages, {"v": np.array([1.0, 1.0])}, {"v": nan}, sensors, DT, law_accel)
    assert mode.tolist() == [ACC, CACC] and a[0] == 0.0 and a[1] == 0.3
    v, t = 0.6, 0.0  # a first-order speed loop from 0.6 m/s: v(t) = 1 - 0.4 exp(-kp t), never above 1
    for _ in range(500):
        a, _ = fallback.apply(DT, ages, {"v": np.array([v, 1.0])}, {"v": nan}, sensors, DT, law_accel)
        assert a[0] == pytest.approx(kp * (1.0 - v), abs=1e-12)
        v, t = v + a[0] * DT, t + DT
        assert v <= 1.0
    assert v == pytest.approx(1.0 - 0.4 * math.exp(-kp * t), abs=2e-3)  # explicit Euler: O(kp dt) relative
    a, mode = fallback.apply(DT, np.zeros(2), {"v": np.array([v, 1.0])}, {"v": nan}, sensors, 1.0, law_accel)
    assert mode.tolist() == [CACC, CACC]  # fresh for recover_hold_s: back to CACC, the hold is forgotten
    assert np.isnan(fallback._state["hold_speed"]).all()


# --- rows -------------------------------------------------------------------------------------------------------


def test_pipeline_rows_join_and_leave_every_stage():
    pipeline = ControlPipeline(ElaCacc(ElaCaccParams()), 0.02, fallback=FallbackStageParams())
    assert pipeline.lateral is None and pipeline.sensed is not None  # ela_cacc steers; degrading: sensor steering
    pipeline.add_rows(3)
    pipeline.remove_rows(np.array([1]))
    pipeline.add_rows(2)
    assert pipeline.n_rows == 4
    assert pipeline.fallback is not None and pipeline.fallback.n_rows == 4 and pipeline.sensed.n_rows == 4
    n = 4
    ego = {"x": -np.arange(n, dtype=float), "y": np.zeros(n), "yaw": np.zeros(n), "v": np.ones(n), "a": np.zeros(n),
           "yaw_rate": np.zeros(n)}
    pred = {**ego, "x": ego["x"] + 2.0}
    age = np.array([0.0, 0.0, np.inf, 0.0])
    nan = np.full(n, np.nan)
    out = pipeline.step(0.0, ego, pred, pred, age, age, {"gap_m": nan, "gap_rate_mps": nan, "target_x": nan,
                                                         "target_y": nan})
    assert out.degraded.tolist() == [False, False, True, False]  # never received: ACC from the start
    assert all(np.asarray(col).shape == (n,) for col in out[:5])
    np.testing.assert_allclose(out.desired_gap_m, 1.0 + 1.0 * ego["v"])  # r + h v on a straight
    three = {k: v[:3] for k, v in {**ego, "gap_m": nan, "gap_rate_mps": nan, "target_x": nan,
                                  "target_y": nan}.items()}
    with pytest.raises(ValueError, match="add_rows"):  # a missed spawn never passes silently
        pipeline.step(0.0, three, three, three, age[:3], age[:3], three)


def test_without_steer_by_sensor_there_is_no_sensor_steering_and_cacc_fallback_has_it():
    off = ControlPipeline(ElaCacc(ElaCaccParams()), 0.02, fallback=FallbackStageParams(steer_by_sensor=False))
    assert off.sensed is None
    assert ControlPipeline(CaccWithFallback(CaccWithFallbackParams()), 0.02).sensed is not None
    assert ControlPipeline(PloegCacc(PloegCaccParams()), 0.02).sensed is None  # never degrades: nothing to steer
