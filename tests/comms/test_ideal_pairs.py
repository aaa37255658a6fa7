"""The ideal channel works out the delivered pairs of an interest once and reuses them from step to step; a new
interest, a robot leaving (which shifts the rows of the others) or an outage must still deliver each receiver its
sender's own state of that step."""

from __future__ import annotations

import numpy as np

from comms_models.base import Interest
from comms_models.ideal import IdealChannel
from core.robots import RobotSpec

MS = 1_000_000


def _estimate(ids: list[int], t_ms: int) -> dict[str, np.ndarray]:
    # every field encodes (robot, time) so a delivery from the wrong row or step shows
    ids_a = np.asarray(ids, np.int64)
    base = ids_a * 1000.0 + t_ms
    return {"id": ids_a, "x": base, "y": base + 0.1, "yaw": base + 0.2, "v": base + 0.3, "a": base + 0.4,
            "yaw_rate": base + 0.5}


def _pairs(out: dict[str, np.ndarray]) -> list[tuple[int, int, float, float]]:
    return sorted(zip(out["receiver"].tolist(), out["sender"].tolist(), out["x"].tolist(), out["yaw_rate"].tolist(),
                      strict=True))


def test_pairs_follow_interest_roster_and_outages() -> None:
    ch = IdealChannel({"outages": [{"start_s": 0.05, "end_s": 0.07, "receivers": [2]}]}, seed=0)
    ch.spawn([RobotSpec(id=i, name=f"r{i}", spawn_ns=0) for i in range(4)])
    chain = Interest(np.array([1, 2, 3], np.int64), np.array([0, 1, 2], np.int64))
    ids = [0, 1, 2, 3]
    assert _pairs(ch.step(10 * MS, _estimate(ids, 10), chain)) == [
        (1, 0, 10.0, 10.5), (2, 1, 1010.0, 1010.5), (3, 2, 2010.0, 2010.5)]
    # the same interest a step later: the new step's state, not the cached one
    assert _pairs(ch.step(20 * MS, _estimate(ids, 20), chain)) == [
        (1, 0, 20.0, 20.5), (2, 1, 1020.0, 1020.5), (3, 2, 2020.0, 2020.5)]
    # a new interest object with other pairs
    leader = Interest(np.array([2, 3], np.int64), np.array([0, 0], np.int64))
    assert _pairs(ch.step(30 * MS, _estimate(ids, 30), leader)) == [(2, 0, 30.0, 30.5), (3, 0, 30.0, 30.5)]
    # robot 0 leaves: the others' rows shift by one, the pairs whose sender left are dropped
    ch.despawn([0])
    ids = [1, 2, 3]
    assert _pairs(ch.step(40 * MS, _estimate(ids, 40), chain)) == [(2, 1, 1040.0, 1040.5), (3, 2, 2040.0, 2040.5)]
    # an outage of receiver 2, then back to the shared pairs
    assert _pairs(ch.step(60 * MS, _estimate(ids, 60), chain)) == [(3, 2, 2060.0, 2060.5)]
    out = ch.step(80 * MS, _estimate(ids, 80), chain)
    assert _pairs(out) == [(2, 1, 1080.0, 1080.5), (3, 2, 2080.0, 2080.5)]
    assert np.isnan(out["u_des"]).all() and (out["generated_ns"] == 80 * MS).all()
