"""Congestion control: the reactive state machine (TS 102 687 tables A.1/A.2), LIMERIC, and the CBR the channel
measures under load."""

from __future__ import annotations

import numpy as np
import pytest

from comms_models.base import Interest, with_names
from comms_models.itsg5.dcc import Dcc
from comms_models.itsg5.model import ItsG5Channel
from comms_models.itsg5.params import DccParams
from core.robots import RobotSpec

MS = 1_000_000


def test_reactive_moves_one_state_per_evaluation():
    dcc = Dcc(DccParams(table="A.1"))
    dcc.spawn(1)
    offs = []
    for _ in range(5):
        dcc.update(np.array([0.9]))
        offs.append(int(dcc.t_off_ns(208_000)[0]) // MS)
    assert offs == [200, 400, 500, 1000, 1000]
    for _ in range(2):
        dcc.update(np.array([0.05]))
    assert dcc.t_off_ns(208_000)[0] == 400 * MS
    dcc.update(np.array([0.45]))  # target Active 2 = current state: stays
    assert dcc.state.tolist() == [2]
    dcc.update(np.array([np.nan]))  # not measured: unchanged
    assert dcc.state.tolist() == [2]


@pytest.mark.parametrize(("table", "cbr", "state", "t_off_ms"), [
    ("A.1", 0.29, 0, 100), ("A.1", 0.30, 1, 200), ("A.1", 0.62, 4, 1000),
    ("A.2", 0.29, 0, 50), ("A.2", 0.62, 3, 250), ("A.2", 0.65, 4, 1000),
])
def test_reactive_tables(table, cbr, state, t_off_ms):
    dcc = Dcc(DccParams(table=table))
    dcc.spawn(1)
    for _ in range(6):
        dcc.update(np.array([cbr]))
    assert dcc.state[0] == state
    assert dcc.t_off_ns(208_000)[0] == t_off_ms * MS


def test_limeric_update():
    dcc = Dcc(DccParams(mode="adaptive"))
    dcc.spawn(2)
    lim = dcc.params.limeric
    d0 = lim.delta_max
    dcc.update(np.array([0.9, 0.1]))
    assert dcc.delta.tolist() == [d0, d0]  # every 200 ms = two windows
    dcc.update(np.array([0.9, 0.1]))
    expect_hi = np.clip((1 - lim.alpha) * d0 + np.clip(lim.beta * (0.68 - 0.9), lim.g_minus, lim.g_plus),
                        lim.delta_min, lim.delta_max)
    expect_lo = np.clip((1 - lim.alpha) * d0 + lim.g_plus, lim.delta_min, lim.delta_max)
    assert dcc.delta == pytest.approx([expect_hi, expect_lo])
    assert dcc.t_off_ns(208_000)[0] == round(208_000 / expect_hi)


def cluster(n: int, params: dict, duration_s: float, seed: int = 0) -> ItsG5Channel:
    """``n`` stations within a 20 m square, all hearing each other."""
    ch = ItsG5Channel({"pcap": False, "codec_sample_rate": 0.0, **params}, seed=seed)
    ids = np.arange(n)
    ch.spawn([RobotSpec(id=int(i), name=f"s{i}") for i in ids])
    rng = np.random.default_rng(1)
    est = {"id": ids, "x": rng.uniform(0, 20, n), "y": rng.uniform(0, 20, n), "yaw": np.zeros(n),
           "v": np.zeros(n), "a": np.zeros(n), "yaw_rate": np.zeros(n)}
    interest = Interest(np.empty(0, np.int64), np.empty(0, np.int64))
    for step in range(round(duration_s * 100)):
        ch.step(step * 10 * MS, est, interest)
    return ch


def test_cbr_of_a_lone_station_is_its_duty_cycle():
    ch = cluster(1, {"generation": {"mode": "fixed_rate"}}, 2.0)
    # 10 frames per second: 8 high-frequency-only, 2 with the low-frequency container (every 500 ms).
    airtime = 8 * ch.airtime_ns[False] + 2 * ch.airtime_ns[True]
    assert ch.metrics()["cbr_mean"] == pytest.approx(airtime / 1e9, rel=0.05)


def test_dcc_reacts_to_load():
    # 350 stations at 10 Hz in one cell: demand 350 * 10 * 208 us = 0.73 s per second. Broadcast with CW 15
    # lets many stations end their backoff in the same slot, so frames overlap and the busy time is lower.
    free = cluster(350, {"generation": {"mode": "fixed_rate"}, "dcc": {"mode": "off"}}, 1.5)
    assert free.metrics()["cbr_mean"] > 0.3
    assert free.metrics()["cams_dcc_dropped"] == 0
    ch = cluster(350, {"generation": {"mode": "fixed_rate"}, "dcc": {"table": "A.1"}}, 1.5)
    # The state leaves Relaxed (T_off 200 ms): the 10 Hz application loses CAMs at the gatekeeper, the load
    # falls below 0.3 and the state returns, so it oscillates around the threshold.
    assert ch.metrics()["cams_dcc_dropped"] > 0.1 * ch.metrics()["cams_sent"]
    assert ch.metrics()["cbr_mean"] < free.metrics()["cbr_mean"]
    rec = with_names(ch.drain_records())
    assert "dcc_dropped" in set(rec["outcome"].tolist())
