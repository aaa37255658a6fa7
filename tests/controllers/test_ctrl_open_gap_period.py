"""The open_gap reaction (``federates.control.reactions``) opens a follower's gap at ``gap_rate_mps`` whatever its
controller's period: a group that steps every 2nd or 5th federate step moves its extra gap by the rate times its
own period at each of its steps, so the ramp is the analytic one, rate x time since the suspicion, up to one step."""

from __future__ import annotations

import numpy as np
import pytest

from core.federate import SetupContext
from core.robot_blocks import ControllerSpec, DriveSpec, InitialState
from core.robots import RobotSpec
from federates.control.federate import ControlFederate

PERIOD_NS = 10_000_000  # the control federate's step: 10 ms
RATE_MPS = 1.0
FACTOR = 2.0
R_M, H_S, V_MPS = 1.0, 1.0, 1.0  # ela_cacc's spacing policy D = r + h v (controller facts, section 1): 2 m


def _federate(multiple: int) -> ControlFederate:
    reactions = {"reaction": "open_gap", "hold_ns": 10**11, "gap_factor": FACTOR, "gap_rate_mps": RATE_MPS}
    fed = ControlFederate("control", PERIOD_NS, reactions=reactions)
    fed.setup(SetupContext(seed=1, end_ns=10**11))
    block = {"type": "ela_cacc", "period_s": multiple * PERIOD_NS / 1e9, "predict": "none", "lateral": None,
             "fallback": None, "standstill_m": R_M, "time_gap_s": H_S}
    fed.spawn([RobotSpec(1, "lead", driver=DriveSpec("constant", {"speed_mps": V_MPS})),
               RobotSpec(2, "follower", predecessor=1, leader=1, controller=ControllerSpec.from_plain(block),
                         initial=InitialState(v=V_MPS))])
    return fed


def _estimate() -> dict[str, np.ndarray]:
    return {"id": np.array([1, 2]), "x": np.array([0.0, -2.0]), "y": np.zeros(2), "yaw": np.zeros(2),
            "v": np.full(2, V_MPS), "a": np.zeros(2), "yaw_rate": np.zeros(2)}


@pytest.mark.parametrize("multiple", [1, 2, 5])
def test_the_gap_opens_at_gap_rate_mps_for_a_group_slower_than_the_federate(multiple: int) -> None:
    fed = _federate(multiple)
    group_s = multiple * PERIOD_NS / 1e9
    suspicion = {"t_ns": np.array([0]), "receiver": np.array([2]), "sender": np.array([1])}  # its predecessor
    extra = {}
    for k in range(151):  # 1.5 s: the target, (factor - 1) (r + h v) = 2 m, is not reached
        t_ns = k * PERIOD_NS
        fed.step(t_ns, {"estimate": _estimate(), "suspicions": [suspicion] if k == 0 else []})
        extra[t_ns] = float(fed._reactions.extra[1])
    # the analytic ramp: rate x time, counted from the start of the follower's first step after the suspicion
    for t_ns in (200_000_000, 500_000_000, 1_000_000_000, 1_500_000_000):
        assert extra[t_ns] == pytest.approx(RATE_MPS * (t_ns / 1e9 + group_s), abs=1e-9), (multiple, t_ns)
    # held between the group's own steps, and the growth over a second is the rate itself
    assert extra[1_000_000_000 + PERIOD_NS * (multiple - 1)] == extra[1_000_000_000]
    assert (extra[1_500_000_000] - extra[500_000_000]) / 1.0 == pytest.approx(RATE_MPS, rel=1e-9)


def test_the_gap_stops_at_factor_minus_one_desired_gaps() -> None:
    fed = _federate(5)
    suspicion = {"t_ns": np.array([0]), "receiver": np.array([2]), "sender": np.array([1])}
    for k in range(301):  # 3 s at 1 m/s: past the 2 m target
        fed.step(k * PERIOD_NS, {"estimate": _estimate(), "suspicions": [suspicion] if k == 0 else []})
    assert fed._reactions.extra[1] == pytest.approx((FACTOR - 1.0) * (R_M + H_S * V_MPS), abs=1e-12)
