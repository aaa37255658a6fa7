"""NR-V2X mode 2 options of the cv2x channel (``rat: nr``): the numerology's slots, dynamic scheduling and blind
retransmissions, against closed forms.

Collisions are counted in groups of three stations on free space, 20 km apart (beyond the cut-off radius): A and B
50 m either side of C, which never transmits. A and B generate at the same instant (no start jitter, a constant
processing delay), so their packets reach the MAC in the same slot n and each picks uniformly among the same N
candidates (slots of [n + T1, n + T2] x subchannel positions): dynamic grants announce nothing ahead, and with a
packet every 130 ms and NR's short sensing window (T0 = 100 ms) a station's own last transmission, whose slot
half-duplex would exclude 100 ms on, lies before the window it senses. C loses A's packet to
collision exactly when B took the same resource (equal powers: SINR below 0 dB), with probability 1 / N. With one
blind retransmission each station sends in two distinct slots, and C loses A's packet only if both of A's copies
met B's: probability 1 / (C(N, 2) - S C(n_x, 2)), the number of such pairs of candidates (S slots, n_x positions
each), while each copy alone collides with probability 2 / N.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from comms_models.base import Interest
from comms_models.cv2x.log import RESELECTIONS
from comms_models.cv2x.model import Cv2xChannel
from comms_models.cv2x.params import Cv2xParams
from comms_models.cv2x.reception import LOSS_CAUSES
from core.robots import RobotSpec

NEVER_NS = 10**15  # the receivers' CA service starts long after the run


def run_groups(groups: int, seconds: float, params: dict[str, Any], seed: int = 1) -> tuple[Cv2xChannel, dict]:
    """``groups`` triples (A, C, B) at 0, 50, 100 m, 20 km apart, stepped at 10 ms; the trace of every link."""
    base = np.arange(groups) * 20_000.0
    x = np.stack([base, base + 50.0, base + 100.0], axis=1).ravel()
    n = len(x)
    ids = np.arange(1, n + 1, dtype=np.int64)
    silent = (np.arange(n) % 3) == 1
    model = Cv2xChannel({**params, "trace": "all"}, seed, None)
    model.spawn([RobotSpec(id=int(i), name=f"v{i}", spawn_ns=NEVER_NS if s else 0) for i, s in zip(ids, silent,
                                                                                                   strict=True)])
    zeros = np.zeros(n)
    estimate = {"id": ids, "x": x, "y": zeros, "yaw": zeros, "v": zeros, "a": zeros, "yaw_rate": zeros}
    nobody = Interest(np.empty(0, np.int64), np.empty(0, np.int64))
    logs = []
    for k in range(round(seconds * 100) + 1):
        model.step(k * 10_000_000, estimate, nobody)
        logs.append(model.drain_records())
    return model, {c: np.concatenate([p[c] for p in logs]) for c in logs[0]}


def _nr(scs_khz: int, subchannel_rbs: int, t2_ms: int, retransmissions: int) -> dict[str, Any]:
    return {"rat": "nr", "scs_khz": scs_khz, "scheduling": "dynamic", "blind_retransmissions": retransmissions,
            "phy": {"subchannel_rbs": subchannel_rbs}, "sps": {"t1_ms": 1, "t2_ms": t2_ms, "sensing_window_ms": 100},
            "packet_bytes": 190, "propagation": {"path_loss": "free_space"},
            "generation": {"mode": "fixed_rate", "fixed_rate_hz": 1000 / 130, "start_jitter_s": 0.0},
            "latency": {"tx_processing": {"dist": "constant", "value_s": 0.002}}}


def _a_at_c(log: dict[str, np.ndarray]) -> np.ndarray:
    """Loss causes of A's packets at C (after the first second)."""
    rx = (log["event"] == 1) & (log["sender"] % 3 == 1) & (log["receiver"] == log["sender"] + 1)
    return log["loss"][rx & (log["generated_ns"] >= 1_000_000_000)]


def _within(measured: float, p: float, trials: int, sigmas: float = 4.0) -> bool:
    return abs(measured - p) <= sigmas * np.sqrt(p * (1 - p) / trials)


@pytest.mark.slow
def test_nr_slots_follow_the_numerology() -> None:
    """30 kHz: slots of 0.5 ms, 24 resource blocks on 10 MHz (two 12-RB subchannels); 60 kHz: 0.25 ms. A lone
    station's one-subchannel message every 100 ms fills 1 of the 200 x 2 subchannel-slots of a CBR window."""
    model, log = run_groups(2, 2.0, _nr(30, 12, 20, 0))
    tx = (log["event"] == 0) & (log["subframe"] >= 0)
    assert model.metrics()["subchannels"] == 2 and Cv2xParams(rat="nr", scs_khz=30).carrier_rbs == 24
    assert np.array_equal(log["t_ns"][tx], log["subframe"][tx] * 500_000)
    assert np.any(log["t_ns"][tx] % 1_000_000 == 500_000)  # half-millisecond slots are used
    gap = np.diff(np.sort(log["subframe"][tx & (log["sender"] == 1)]))
    # every 130 ms in slots, each packet anywhere in slots n + 2 .. n + 40
    assert np.all(gap >= 2 * 130 - 38) and np.all(gap <= 2 * 130 + 38) and gap.max() - gap.min() > 20
    model60, log60 = run_groups(1, 1.0, {**_nr(60, 10, 20, 0)})
    tx60 = (log60["event"] == 0) & (log60["subframe"] >= 0)
    assert model60.metrics()["subchannels"] == 1
    assert np.array_equal(log60["t_ns"][tx60], log60["subframe"][tx60] * 250_000)
    # a lone station at 10 Hz: CBR 1 / 400 per 100 ms in LTE subframes, the same in 0.5 ms slots (2 subchannels)
    lone = Cv2xChannel({**_nr(30, 12, 20, 0), "generation": {"mode": "fixed_rate", "fixed_rate_hz": 10}}, 1, None)
    lone.spawn([RobotSpec(id=1, name="v1")])
    loads = []
    for k in range(201):
        lone.step(k * 10_000_000, {"id": np.array([1]), "x": np.zeros(1), "y": np.zeros(1), "yaw": np.zeros(1),
                                   "v": np.zeros(1), "a": np.zeros(1), "yaw_rate": np.zeros(1)},
                  Interest(np.empty(0, np.int64), np.empty(0, np.int64)))
        loads.append(lone.drain_load())
    cbr = np.concatenate([d["cbr"] for d in loads])
    assert np.allclose(cbr[1:], 1 / 400)


@pytest.mark.slow
def test_dynamic_grants_collide_with_probability_one_over_n() -> None:
    """30 kHz, T1 = 2 slots, T2 = 40 slots: 39 slots x 2 subchannels, N = 78; every packet a new uniform pick."""
    _, log = run_groups(300, 16.0, _nr(30, 12, 20, 0))
    sent = (log["event"] == 0) & (log["subframe"] >= 0)
    assert np.all(log["reselection"][sent] == RESELECTIONS.index("dynamic"))
    loss = _a_at_c(log)
    p = 1 / 78
    collided = float(np.mean(loss == LOSS_CAUSES.index("collision")))
    assert len(loss) > 30_000 and _within(collided, p, len(loss)), (collided, p, len(loss))
    assert np.mean(loss == 0) == pytest.approx(1 - collided, abs=1e-3)  # nothing else is lost at 50 m


@pytest.mark.slow
def test_one_blind_retransmission_squares_the_loss_by_collision() -> None:
    """15 kHz, 52 resource blocks, two 25-RB subchannels, T2 = 5 slots: N = 10 candidates. A copy collides with
    probability 2 / N = 0.2 (B has two copies), a packet is lost only if both copies do: 1 / (45 - 5) = 0.025
    (about 0.2^2 / 2: the two copies of A must meet the two of B), against 1 / N = 0.1 without retransmission."""
    _, single = run_groups(300, 16.0, _nr(15, 25, 5, 0))
    loss1 = _a_at_c(single)
    p1 = float(np.mean(loss1 == LOSS_CAUSES.index("collision")))
    assert _within(p1, 0.1, len(loss1)), p1
    _, log = run_groups(300, 16.0, _nr(15, 25, 5, 1))
    sent = (log["event"] == 0) & (log["subframe"] >= 0) & (log["generated_ns"] >= 1_000_000_000)
    retx = log["reselection"][sent] == RESELECTIONS.index("retransmission")
    assert retx.sum() == (~retx).sum()  # every packet twice
    # each copy of A meets one of B's with probability 2 / N
    cells = log["subframe"][sent] * 8 + log["subchannel"][sent]
    group, role = (log["sender"][sent] - 1) // 3, (log["sender"][sent] - 1) % 3
    a_cells, b_cells = set(zip(group[role == 0], cells[role == 0], strict=True)), \
        set(zip(group[role == 2], cells[role == 2], strict=True))
    per_copy = len(a_cells & b_cells) / len(a_cells)
    assert _within(per_copy, 0.2, len(a_cells)), per_copy
    loss = _a_at_c(log)
    assert len(loss) > 30_000 and len(loss) == len(loss1)  # one outcome per packet, not per copy
    p2 = float(np.mean(loss == LOSS_CAUSES.index("collision")))
    assert _within(p2, 1 / 40, len(loss)), p2


def test_nr_options_are_checked() -> None:
    """NR options on an LTE channel, NR subchannel sizes, retransmissions without dynamic scheduling: errors."""
    for bad in ({"scs_khz": 30}, {"scheduling": "dynamic"}, {"rat": "nr", "phy": {"subchannel_rbs": 4}},
                {"rat": "nr", "blind_retransmissions": 1}, {"rat": "nr", "blind_retransmissions": 3,
                                                            "scheduling": "dynamic"}):
        with pytest.raises(ValidationError):
            Cv2xParams.model_validate(bad)
    assert Cv2xParams(rat="nr", scs_khz=60, phy={"subchannel_rbs": 10}).slots_per_ms == 4
    assert Cv2xParams().slots_per_ms == 1
    with pytest.raises(ValidationError):  # 11 resource blocks at 60 kHz on 10 MHz: no 12-RB subchannel
        Cv2xParams(rat="nr", scs_khz=60)
