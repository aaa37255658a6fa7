"""The platooning message on the C-V2X channel: it rides in the CAM's transport block (one MAC PDU), so each delivery
carries the sender's desired acceleration of the CAM's generation instant, quantised as the PM's DesiredAcceleration
(0.01 m/s^2, clamped to +-16 m/s^2, NaN "unavailable"), and the block grows by the PM's UPER size and its own headers:
19 + 44 bytes, which takes a CAM of 85 bytes from one subchannel to two at MCS 5 (109 bytes per subchannel)."""

from __future__ import annotations

import numpy as np

from comms_models.base import Interest
from comms_models.cv2x.model import Cv2xChannel
from comms_models.itsg5.platooning import PmCodec
from core.robots import RobotSpec

FIXED = {"generation": {"mode": "fixed_rate", "fixed_rate_hz": 10}, "sps": {"t2_ms": 20, "delay_budget_ms": 20}}


def desired(t_s: float) -> np.ndarray:
    """The three stations' desired accelerations at t: a ramp through the clamp, a sine, unavailable."""
    return np.array([-20.0 + 10.0 * t_s, 1.234567 * np.sin(3.0 * t_s), np.nan])


def run(params: dict, seconds: float = 3.0) -> tuple[Cv2xChannel, list[dict], dict[str, np.ndarray]]:
    """Three stations 20 m apart, every one listening to every other, stepped at 10 ms."""
    model = Cv2xChannel(params, 3, None)
    ids = np.array([1, 2, 3], np.int64)
    model.spawn([RobotSpec(id=int(i), name=f"v{i}") for i in ids])
    pairs = [(r, s) for r in ids for s in ids if r != s]
    interest = Interest(np.array([r for r, _ in pairs]), np.array([s for _, s in pairs]))
    zeros = np.zeros(3)
    deliveries, logs = [], []
    for k in range(round(seconds * 100) + 1):
        estimate = {"id": ids, "x": np.array([0.0, 20.0, 40.0]), "y": zeros, "yaw": zeros, "v": zeros, "a": zeros,
                    "yaw_rate": zeros, "u_des": desired(k * 0.01)}
        deliveries.append(model.step(k * 10_000_000, estimate, interest))
        logs.append(model.drain_records())
    log = {c: np.concatenate([part[c] for part in logs]) for c in logs[0]}
    return model, deliveries, log


def test_each_delivery_carries_the_senders_desired_acceleration_of_its_generation_instant() -> None:
    model, deliveries, _ = run({**FIXED, "platooning_message": True})
    assert model.carries_platooning_message
    rows = {k: np.concatenate([d[k] for d in deliveries if "u_des" in d]) for k in ("sender", "generated_ns", "u_des")}
    assert len(rows["sender"]) > 100  # 10 Hz from each of 3 to 2 receivers for about 3 s
    expected = np.array([desired(g / 1e9)[s - 1] for s, g in zip(rows["sender"], rows["generated_ns"], strict=True)])
    one = rows["sender"] == 1
    # station 1 ramps from -20 to +10 m/s^2: clamped at -16 until 0.4 s, then on the 0.01 m/s^2 grid
    assert np.all(rows["u_des"][one & (rows["generated_ns"] < 0.4e9)] == -16.0)
    assert np.max(np.abs(rows["u_des"][one] - np.clip(expected[one], -16, 16))) <= 0.005 + 1e-12
    two = rows["sender"] == 2
    assert np.max(np.abs(rows["u_des"][two] - expected[two])) <= 0.005 + 1e-12
    assert np.allclose(rows["u_des"][two] * 100, np.rint(rows["u_des"][two] * 100), atol=1e-9)
    assert np.isnan(rows["u_des"][rows["sender"] == 3]).all()


def test_without_it_deliveries_have_no_desired_acceleration() -> None:
    model, deliveries, _ = run(FIXED, seconds=1.0)
    assert not model.carries_platooning_message
    assert sum(len(d["sender"]) for d in deliveries) > 20
    assert all("u_des" not in d for d in deliveries)


def test_the_pm_adds_its_size_to_the_transport_block() -> None:
    assert PmCodec().sizes()[False] == 19
    plain, _, log_plain = run({**FIXED, "phy": {"mcs": 5}}, seconds=1.0)
    with_pm, _, log_pm = run({**FIXED, "phy": {"mcs": 5}, "platooning_message": True}, seconds=1.0)
    assert with_pm.metrics()["pm_bytes"] == 19 + 44 and "pm_bytes" not in plain.metrics()
    tx_plain, tx_pm = (log["subchannels"][log["event"] == 0] for log in (log_plain, log_pm))
    assert len(tx_plain) == len(tx_pm) >= 27  # 10 Hz from 3 stations, after their start jitter
    assert set(tx_plain.tolist()) == {1} and set(tx_pm.tolist()) == {2}  # 85 B fit 109 B, 148 B do not
    assert with_pm.bytes_generated - plain.bytes_generated == 63 * with_pm.messages_generated
