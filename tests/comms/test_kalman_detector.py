"""The Kalman residual check: its gates are the chi-square quantiles, it is consistent (mean NIS = 4, the degrees of
freedom, when the sender's noise is what the filter assumes), it raises no alarm on an honest sender that brakes
and turns, and it flags what it is made for: a speed offset of 2 m/s that the consecutive position-speed check
misses, and a random position offset."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2

from comms_models.misbehaviour import DETECTORS
from comms_models.misbehaviour import checks as ck
from comms_models.misbehaviour.kalman import KalmanDetector, KalmanParams, KalmanTracks, chi2_quantile
from comms_models.misbehaviour.plausibility import PlausibilityDetector, PlausibilityParams

DT = 0.1


@pytest.mark.parametrize(("alpha", "dof", "published"), [(0.05, 4, 9.488), (0.01, 4, 13.277), (0.001, 10, 29.588),
                                                          (0.01, 40, 63.691)])
def test_the_gates_are_chi_square_quantiles(alpha: float, dof: int, published: float) -> None:
    assert chi2_quantile(alpha, dof) == pytest.approx(published, abs=1e-3)  # table values (e.g. NIST handbook)
    assert chi2_quantile(1e-6, dof) == pytest.approx(chi2.isf(1e-6, dof), rel=1e-9)


def drive(n: int, rng: np.random.Generator, sigma_a: float = 0.0, brake_turn: bool = False
          ) -> dict[str, np.ndarray]:
    """A sender's true track at 10 Hz from 25 m/s: white acceleration noise per axis (``sigma_a``), or a braking
    (-6 m/s^2) and a turn (0.2 rad/s) it announces in its CAMs."""
    x, y, vx, vy = 0.0, 0.0, 25.0, 0.0
    rows = []
    for k in range(n):
        yaw, v = np.arctan2(vy, vx), np.hypot(vx, vy)
        a = -6.0 if brake_turn and 100 <= k < 150 else 0.0
        w = 0.2 if brake_turn and 50 <= k < 200 else 0.0
        rows.append((k * DT, x, y, yaw, v, a, w))
        ax, ay = a * np.cos(yaw) - v * w * np.sin(yaw), a * np.sin(yaw) + v * w * np.cos(yaw)
        ax, ay = ax + rng.normal(0, sigma_a) * (sigma_a > 0), ay + rng.normal(0, sigma_a) * (sigma_a > 0)
        x, y = x + vx * DT + 0.5 * ax * DT**2, y + vy * DT + 0.5 * ay * DT**2
        vx, vy = vx + ax * DT, vy + ay * DT
    cols = np.array(rows)
    return {name: cols[:, k] for k, name in enumerate(("t", "x", "y", "yaw", "v", "a", "w"))}


def judge(tracks: KalmanTracks, cams: dict[str, np.ndarray], vx: np.ndarray | None = None,
          vy: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Feed the CAMs one step at a time (one receiver, one sender); the claimed velocity may be given per axis."""
    nis, failed = [], []
    for k in range(len(cams["t"])):
        v, yaw = cams["v"][k], cams["yaw"][k]
        if vx is not None:
            v, yaw = np.hypot(vx[k], vy[k]), np.arctan2(vy[k], vx[k])
        got = tracks.judge(np.array([2]), np.array([1]), np.array([round(cams["t"][k] * 1e9)]),
                           cams["x"][k:k + 1], cams["y"][k:k + 1], np.array([yaw]), np.array([v]),
                           cams["a"][k:k + 1], cams["w"][k:k + 1])
        nis.append(got[0][0])
        failed.append(got[1][0])
    return np.array(nis), np.array(failed)


def test_the_filter_is_consistent_when_the_noise_is_as_assumed() -> None:
    """Truth with white acceleration noise of the filter's sigma per axis and interval, position and velocity
    measured with the filter's noise: the NIS is chi-square(4), mean 4 (Bar-Shalom et al. sec. 5.4)."""
    rng = np.random.default_rng(3)
    p = KalmanParams(position_sigma_m=0.3, speed_sigma_mps=0.2, heading_sigma_rad=0.0, accel_sigma_mps2=1.0)
    truth = drive(4000, rng, sigma_a=0.0)
    # the discrete white-noise acceleration model itself: a constant acceleration over each interval
    acc = rng.normal(0, p.accel_sigma_mps2, (len(truth["t"]), 2))
    pos, vel = np.zeros((len(truth["t"]), 2)), np.zeros((len(truth["t"]), 2))
    vel[0] = (25.0, 0.0)
    for k in range(1, len(truth["t"])):
        pos[k] = pos[k - 1] + vel[k - 1] * DT + 0.5 * acc[k - 1] * DT**2
        vel[k] = vel[k - 1] + acc[k - 1] * DT
    cams = {**truth, "x": pos[:, 0] + rng.normal(0, 0.3, len(pos)), "y": pos[:, 1] + rng.normal(0, 0.3, len(pos)),
            "a": np.zeros(len(pos)), "w": np.zeros(len(pos))}
    vx, vy = vel[:, 0] + rng.normal(0, 0.2, len(vel)), vel[:, 1] + rng.normal(0, 0.2, len(vel))
    nis, _ = judge(KalmanTracks(p), cams, vx, vy)
    steady = nis[50:]
    assert steady.mean() == pytest.approx(4.0, abs=0.25)  # 3950 samples: the mean's sd is ~0.045
    assert np.mean(steady > chi2.isf(0.05, 4)) == pytest.approx(0.05, abs=0.015)


def test_an_honest_sender_that_brakes_and_turns_raises_no_alarm() -> None:
    rng = np.random.default_rng(4)
    cams = drive(300, rng, brake_turn=True)
    noisy = {**cams, "x": cams["x"] + rng.normal(0, 0.1, 300), "y": cams["y"] + rng.normal(0, 0.1, 300),
             "v": cams["v"] + rng.normal(0, 0.05, 300)}
    nis, failed = judge(KalmanTracks(KalmanParams()), noisy)
    assert not failed.any()
    assert np.isnan(nis[0]) and np.nanmax(nis) < 10.0


def test_a_small_speed_offset_is_flagged_where_the_consecutive_check_is_not() -> None:
    rng = np.random.default_rng(5)
    cams = drive(200, rng)
    forged = {**cams, "x": cams["x"] + rng.normal(0, 0.05, 200), "v": cams["v"] + 2.0}
    _, failed = judge(KalmanTracks(KalmanParams()), forged)
    assert failed[20:].mean() > 0.9  # the window of 10 NIS fills, then every CAM fails the bias gate
    moved = np.hypot(np.diff(forged["x"]), np.diff(forged["y"]))
    p = PlausibilityParams()
    assert not ck.position_speed(moved, forged["v"][:-1], forged["v"][1:], np.full(199, DT), p.position_speed_tol_m,
                                 p.position_speed_tol_mps).any()  # 0.2 m per CAM under its 0.6 m slack


def test_a_random_position_offset_is_flagged() -> None:
    rng = np.random.default_rng(6)
    cams = drive(200, rng)
    forged = {**cams, "x": cams["x"] + rng.uniform(-5, 5, 200), "y": cams["y"] + rng.uniform(-5, 5, 200)}
    _, failed = judge(KalmanTracks(KalmanParams()), forged)
    assert failed[20:].mean() > 0.8


def test_the_detector_is_registered_and_the_plausibility_fusion_runs_it() -> None:
    assert DETECTORS.get("kalman") is KalmanDetector
    assert "kalman" in ck.CHECKS and "kalman" not in PlausibilityParams().checks  # asked for by name
    rng = np.random.default_rng(7)
    cams = drive(40, rng)
    x = cams["x"] + np.where(np.arange(40) == 30, 8.0, 0.0)  # one CAM 8 m ahead of its track
    fused = PlausibilityDetector(PlausibilityParams(checks=["kalman"]), 0.09)
    alone = KalmanDetector(KalmanParams(), 0.09)
    for det in (fused, alone):
        det.spawn(np.array([1, 2]), np.zeros(2, np.int64), np.full(2, 3.5), np.full(2, 1.0))
    for k in range(40):
        msg = {"receiver": np.array([2]), "sender": np.array([1]), "generated_ns": np.array([round(k * DT * 1e9)]),
               "x": x[k:k + 1], "y": cams["y"][k:k + 1], "yaw": cams["yaw"][k:k + 1], "v": cams["v"][k:k + 1],
               "a": cams["a"][k:k + 1], "yaw_rate": cams["w"][k:k + 1], "kind": np.array([0])}
        own = {"id": np.array([2]), "x": np.array([x[k] - 20.0]), "y": np.array([0.0]), "yaw": np.array([0.0])}
        got = [det.judge(round(k * DT * 1e9), msg, own, None) for det in (fused, alone)]
        for mask, verdict in got:
            assert verdict[0] == (k == 30) and mask[0] == (ck.bit("kalman") if k == 30 else 0)


def _feed(tracks: KalmanTracks, rows: list[tuple[float, float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Feed CAMs (generation time [s], x [m], speed [m/s]) of sender 1 along the x axis to receiver 2, one a step."""
    nis, failed = [], []
    for gen_s, x, v in rows:
        got = KalmanTracks.judge(tracks, np.array([2]), np.array([1]), np.array([round(gen_s * 1e9)]), np.array([x]),
                                 np.zeros(1), np.zeros(1), np.array([v]), np.zeros(1), np.zeros(1))
        nis.append(got[0][0])
        failed.append(got[1][0])
    return np.array(nis), np.array(failed)


def test_a_repeated_generation_time_is_flagged_and_leaves_the_track_alone() -> None:
    """A station's generation times only increase (ETSI EN 302 637-2, generationDeltaTime; the freshness checks of
    Kamel et al., ICC 2020): a CAM that repeats its sender's last generation time with other content is flagged and
    does not restart the track, so the +30 m offset after it is caught as it is without it (NIS ~8,800)."""
    honest = [(k * DT, 20.0 * k * DT, 20.0) for k in range(21)]  # 0 .. 2.0 s at 20 m/s
    offset = [(k * DT, 20.0 * k * DT + 30.0, 20.0) for k in range(21, 25)]
    base_nis, base_failed = _feed(KalmanTracks(KalmanParams()), honest + offset)
    assert base_failed[21] and base_nis[21] > 8000.0  # the offset alone: 30 m against ~0.3 m of noise
    nis, failed = _feed(KalmanTracks(KalmanParams()), [*honest, (2.0, 40.0 + 30.0, 20.0), *offset])
    assert not failed[:21].any()
    assert failed[21] and np.isnan(nis[21])  # the repeated time stamp: flagged, no innovation
    np.testing.assert_array_equal(nis[22:], base_nis[21:])  # the track went on as if it had not come
    np.testing.assert_array_equal(failed[22:], base_failed[21:])
    _, older = _feed(KalmanTracks(KalmanParams()), [*honest, (1.5, 70.0, 20.0)])  # a backdated one: flagged too
    assert older[21]


def test_a_second_reception_of_the_same_cam_is_a_duplicate_not_an_attack() -> None:
    noise = np.random.default_rng(8).normal(0, 0.2, 25)  # so that a restarted track would change the NIS after it
    honest = [(k * DT, 20.0 * k * DT + noise[k], 20.0) for k in range(25)]
    base_nis, _ = _feed(KalmanTracks(KalmanParams()), honest)
    nis, failed = _feed(KalmanTracks(KalmanParams()), [*honest[:21], honest[20], *honest[21:]])
    assert not failed.any() and np.isnan(nis[21])
    np.testing.assert_array_equal(nis[22:], base_nis[21:])
    # a repeated generation time after a long silence (more than max_gap_s) is still a repeat: flagged
    gap_nis, gap_failed = _feed(KalmanTracks(KalmanParams()), [(0.0, 0.0, 20.0), (0.0, 5.0, 20.0), (5.0, 100.0, 20.0),
                                                               (5.1, 102.0, 20.0)])
    assert gap_failed[1] and not gap_failed[2:].any() and np.isnan(gap_nis[2])  # the gap starts a new track



def test_with_heading_noise_the_nis_is_conservative() -> None:
    """A CAM measures the velocity as a speed along a heading: with speed noise sigma_s and heading noise sigma_h
    its covariance is J diag(sigma_s^2, sigma_h^2) J^T (J the Jacobian of v (cos h, sin h)): sigma_s^2 along the
    heading, (v sigma_h)^2 across it. The filter adds (v sigma_h)^2 to both axes instead (a covariance that holds
    the true one), so the NIS is smaller than chi-square(4): its mean below 4 and each gate's false alarms below its
    nominal rate. Truth of the filter's model (white acceleration noise), a sender at 25 m/s turning at 0.1 rad/s
    (both axes see both noises), measured with the filter's noise; 3,950 CAMs: the mean's sd is 0.045 for
    chi-square(4), the 5 % tail's 0.0035."""
    rng = np.random.default_rng(11)
    p = KalmanParams(position_sigma_m=0.3, speed_sigma_mps=0.15, heading_sigma_rad=0.02, accel_sigma_mps2=0.5)
    n = 4000
    pos, vel = np.zeros((n, 2)), np.zeros((n, 2))
    vel[0] = (25.0, 0.0)
    for k in range(1, n):
        v, yaw = np.hypot(*vel[k - 1]), np.arctan2(vel[k - 1, 1], vel[k - 1, 0])
        acc = 0.1 * v * np.array([-np.sin(yaw), np.cos(yaw)]) + rng.normal(0, p.accel_sigma_mps2, 2)  # the turn
        pos[k] = pos[k - 1] + vel[k - 1] * DT + 0.5 * acc * DT**2
        vel[k] = vel[k - 1] + acc * DT
    speed, heading = np.hypot(vel[:, 0], vel[:, 1]), np.arctan2(vel[:, 1], vel[:, 0])
    cams = {"t": np.arange(n) * DT, "x": pos[:, 0] + rng.normal(0, 0.3, n), "y": pos[:, 1] + rng.normal(0, 0.3, n),
            "v": speed + rng.normal(0, 0.15, n), "yaw": heading + rng.normal(0, 0.02, n), "a": np.zeros(n),
            "w": np.full(n, 0.1)}
    nis, _ = judge(KalmanTracks(p), cams)
    steady = nis[50:]
    assert steady.mean() < 4.0 - 0.5  # more than 10 sd below chi-square(4)'s mean
    assert np.mean(steady > chi2.isf(0.05, 4)) < 0.05 - 0.015
