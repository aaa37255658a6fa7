"""The control federate as a port adapter: spawn appends once per call and group, lookups by id are O(1), received
samples go to the follower that wants them, rows follow despawns."""

from __future__ import annotations

import numpy as np
import pytest

from controllers.pipeline import ControlPipeline
from core.federate import SetupContext
from core.robot_blocks import ControllerSpec, DriveSpec, InitialState
from core.robots import RobotSpec
from federates.control.federate import ControlFederate

PERIOD_NS = 20_000_000
BLOCK = {"type": "ela_cacc", "period_s": 0.02, "predict": "none", "lateral": None, "fallback": None}
ACC_BLOCK = {"type": "acc", "period_s": 0.04, "predict": "none", "lateral": None, "fallback": None}


def platoon(n_followers: int, first_id: int = 1, block: dict | None = None) -> list[RobotSpec]:
    """A leader at constant speed and a chain of followers, in one list."""
    leader = RobotSpec(first_id, f"r{first_id}", driver=DriveSpec("constant", {"speed_mps": 1.5}))
    followers = [
        RobotSpec(first_id + k, f"r{first_id + k}", predecessor=first_id + k - 1, leader=first_id,
                  controller=ControllerSpec.from_plain(dict(block or BLOCK)), initial=InitialState(v=1.0))
        for k in range(1, n_followers + 1)
    ]
    return [leader, *followers]


def estimate(ids: np.ndarray) -> dict[str, np.ndarray]:
    """Robots on the x axis, 2 m apart in row order, at 1 m/s."""
    n = len(ids)
    return {"id": ids, "x": -2.0 * np.arange(n), "y": np.zeros(n), "yaw": np.zeros(n), "v": np.ones(n),
            "a": np.zeros(n), "yaw_rate": np.zeros(n)}


def deliveries(receivers, senders, generated_ns, x) -> dict[str, np.ndarray]:
    n = len(receivers)
    return {"receiver": np.asarray(receivers, np.int64), "sender": np.asarray(senders, np.int64),
            "generated_ns": np.asarray(generated_ns, np.int64), "received_ns": np.asarray(generated_ns, np.int64),
            "x": np.asarray(x, float), "y": np.zeros(n), "yaw": np.zeros(n), "v": np.ones(n), "a": np.zeros(n),
            "yaw_rate": np.zeros(n)}


@pytest.fixture
def federate() -> ControlFederate:
    fed = ControlFederate("control", PERIOD_NS)
    fed.setup(SetupContext(seed=1, end_ns=10**9))
    return fed


def test_a_spawn_adds_every_robot_of_a_group_in_one_call(federate, monkeypatch):
    calls: list[int] = []
    add_rows = ControlPipeline.add_rows
    monkeypatch.setattr(ControlPipeline, "add_rows", lambda self, n: (calls.append(n), add_rows(self, n))[1])
    federate.spawn(platoon(1500) + platoon(500, first_id=5000, block=ACC_BLOCK))
    assert sorted(calls) == [500, 1500]  # one call per group, not one per robot
    laws = {id(federate.law_of(rid)) for rid in range(2, 1502)}
    assert len(laws) == 1 and federate.law_of(1) is None and federate.law_of(5000) is None
    assert federate.gap_reference(2) == "axle" and federate.gap_reference(5001) == "bumper"
    assert federate.gap_reference(1) == "axle" and federate.law_of(999_999) is None
    ids = np.concatenate([np.arange(1, 1502), np.arange(5000, 5501)])
    out = federate.step(0, {"estimate": estimate(ids)})
    assert out["commands"]["speed"].shape == (2002,) and np.all(np.isfinite(out["commands"]["speed"]))
    assert out["commands"]["speed"][0] == 1.5 and out["commands"]["speed"][1501] == 1.5  # the leaders' profile


def test_received_samples_reach_the_follower_that_wants_them(federate):
    federate.spawn(platoon(3))
    ids = np.arange(1, 5)
    federate.step(0, {"estimate": estimate(ids)})
    rx = deliveries(
        receivers=[2, 3, 3, 4, 4, 99],  # 99: not a robot of this federate
        senders=[1, 2, 1, 3, 3, 3],  # robot 3 also hears the leader: not its predecessor, ignored
        generated_ns=[10, 10, 10, 15, 5, 10],  # robot 4's second sample is older: never overwrites
        x=[0.5, -1.5, 7.0, -3.5, -9.0, 1.0],
    )
    out = federate.step(PERIOD_NS, {"estimate": estimate(ids), "cam_rx": [rx]})
    diag = out["control_diag"]
    np.testing.assert_array_equal(diag["pred_x"], [np.nan, 0.5, -1.5, -3.5])
    np.testing.assert_allclose(diag["pred_age_s"], [np.nan, (PERIOD_NS - 10) / 1e9, (PERIOD_NS - 10) / 1e9,
                                                    (PERIOD_NS - 15) / 1e9])
    assert np.isnan(diag["desired_gap_m"][0]) and np.all(diag["desired_gap_m"][1:] == 1.0 + 1.0 * 1.0)


def test_rows_follow_despawns_and_later_spawns(federate):
    federate.spawn(platoon(6))
    federate.despawn([3, 5])
    assert federate.law_of(3) is None and federate.law_of(4) is not None
    federate.spawn(platoon(2, first_id=10))
    ids = np.array([1, 2, 4, 6, 7, 10, 11, 12])
    out = federate.step(0, {"estimate": estimate(ids)})
    np.testing.assert_array_equal(out["commands"]["id"], ids)
    group = federate._groups.of[4]
    assert group.pipeline.n_rows == len(group.ids) == 6 and group.ids.tolist() == [2, 4, 6, 7, 11, 12]
    with pytest.raises(RuntimeError, match="rows do not match"):
        federate.step(PERIOD_NS, {"estimate": estimate(ids[:-1])})
