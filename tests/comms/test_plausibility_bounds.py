"""The bounds that keep the plausibility checks quiet on honest runs, fed by hand against their analytic edges:
sudden appearance counts from when the receiver could hear the sender (``Detector.listen``), the consistency
checks compare only CAMs at most ``max_gap_s`` apart, and the desired acceleration's slack grows with the age of
the measured one (``accel_tol_mps2`` + ``max_jerk_mps3`` x age). The runs that show each check on its attack are
tests/orchestrator/test_misbehaviour.py's."""

from __future__ import annotations

import numpy as np
import pytest

from comms_models.misbehaviour import checks as ck
from comms_models.misbehaviour.plausibility import PlausibilityDetector, PlausibilityParams

NAN = float("nan")
S = 1_000_000_000


def detector(*checks: str) -> PlausibilityDetector:
    det = PlausibilityDetector(PlausibilityParams(checks=list(checks)), 0.09)
    det.spawn(np.array([1, 2]), np.zeros(2, np.int64), np.full(2, 3.5), np.full(2, 1.0))
    return det


def own(x: float = 0.0) -> dict[str, np.ndarray]:
    return {"id": np.array([1, 2]), "x": np.array([x, x - 30.0]), "y": np.zeros(2), "yaw": np.zeros(2)}


def judge(det: PlausibilityDetector, t_ns: int, rows: list[dict[str, float]], x: float = 0.0) -> np.ndarray:
    ints = ("receiver", "sender", "generated_ns", "received_ns", "kind")
    table = {k: np.array([r[k] for r in rows], np.int64 if k in ints else np.float64) for k in rows[0]}
    return det.judge(t_ns, table, own(x), None)[0]


def cam(sender: int, t_ns: int, x: float, v: float = 20.0, a: float = 0.0, receiver: int = 1) -> dict[str, float]:
    return {"receiver": receiver, "sender": sender, "generated_ns": t_ns, "received_ns": t_ns, "x": x, "y": 0.0,
            "yaw": 0.0, "v": v, "a": a, "yaw_rate": 0.0, "u_des": NAN, "kind": 0}


def pm(sender: int, gen_ns: int, rcv_ns: int, u: float, a: float) -> dict[str, float]:
    """A PM row as the channel hands it: the kinematics of the sender's newest CAM, its generation time a ns on."""
    return {**cam(sender, gen_ns, 10.0, a=a), "received_ns": rcv_ns, "u_des": u, "kind": 1}


def test_a_sender_heard_first_close_by_appears_unless_the_receiver_only_began_to_read_it() -> None:
    bit = ck.bit("sudden_appearance")
    assert judge(detector("sudden_appearance"), 10 * S, [cam(2, 10 * S, 5.0)])[0] == bit  # listening 10 s
    det = detector("sudden_appearance")
    det.listen(0, np.array([1]), np.array([7]))  # the interest at the start: the receiver reads 7, not 2
    det.listen(9 * S, np.array([1, 1]), np.array([7, 2]))  # it begins to read 2 at 9 s (7 kept since 0)
    assert judge(det, 10 * S, [cam(2, 10 * S, 5.0)])[0] == 0  # 1 s of listening to 2 < warmup 2 s
    assert judge(det, 10 * S, [cam(7, 10 * S, 5.0)])[0] == bit  # 7 was readable for 10 s
    assert judge(det, 10 * S, [cam(99, 10 * S, 5.0)])[0] == bit  # a ghost's id is in no interest


@pytest.mark.parametrize(("gap_s", "fails"), [(2.9, True), (3.1, False), (16.0, False)])
def test_the_consistency_checks_compare_cams_at_most_max_gap_apart(gap_s: float, fails: bool) -> None:
    det = detector("position_speed")
    gap = round(gap_s * S)
    assert judge(det, S, [cam(2, S, 0.0)])[0] == 0
    # 30 m short of the 20 m/s trapezoid: fails position_speed, unless the two CAMs are no consecutive ones
    moved = 20.0 * gap_s - 30.0
    assert judge(det, S + gap, [cam(2, S + gap, moved)])[0] == (ck.bit("position_speed") if fails else 0)


@pytest.mark.parametrize(("age_s", "u", "fails"), [(0.0, 1.49, False), (0.0, 1.51, True), (0.4, 2.49, False),
                                                    (0.4, 2.51, True), (0.7, 0.49 - 2.0, False)])
def test_the_desired_acceleration_slack_grows_with_the_age_of_the_measured_one(age_s: float, u: float,
                                                                               fails: bool) -> None:
    det = detector("desired_accel")
    judge(det, S, [cam(2, S, 10.0)])  # the CAM with the measured acceleration (0), held from then on
    rcv = S + round(age_s * S)
    got = judge(det, rcv, [pm(2, S + 1, rcv, u, 0.0)])[0]  # slack 1.5 + 2.5 m/s^3 x age
    assert got == (ck.bit("desired_accel") if fails else 0)


def test_a_desired_acceleration_beyond_any_vehicle_fails_whatever_its_age() -> None:
    det = detector("desired_accel")
    judge(det, S, [cam(2, S, 10.0)])
    assert judge(det, 5 * S, [pm(2, S + 1, 5 * S, 10.5, 10.0)])[0] == ck.bit("desired_accel")  # |u| > 10 m/s^2
