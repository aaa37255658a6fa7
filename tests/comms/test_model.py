"""The ITS-G5 channel as a whole: collisions, capture, half duplex, CAM content, latency, spawn/despawn, records,
captures and determinism."""

from __future__ import annotations

import numpy as np
import pytest

from comms_models import COMMS_MODELS
from comms_models.base import OUTCOMES, Interest, with_names
from comms_models.itsg5.geo import LocalProjection
from comms_models.itsg5.model import ItsG5Channel
from comms_models.itsg5.quantise import quantise_si
from core.robots import RobotSpec

MS = 1_000_000
QUIET = {"pcap": False, "codec_sample_rate": 0.0}
# Deterministic propagation: dual-slope mean power only.
NO_RANDOM_RADIO = {"shadowing_near_db": 0.0, "shadowing_far_db": 0.0, "fading": "none"}
SIMULTANEOUS = {"mode": "fixed_rate", "start_jitter_s": 0.0}
CONSTANT_DELAY = {"tx_processing": {"dist": "constant", "value_s": 0.001},
                  "rx_processing": {"dist": "constant", "value_s": 0.001}}


class Sim:
    """Stations at fixed positions (or moving with ``x(t)``), stepped every 10 ms."""

    def __init__(self, params: dict, x: list[float], y: list[float] | None = None, seed: int = 0,
                 out_dir=None, listen_only: tuple[int, ...] = ()) -> None:
        self.ch = ItsG5Channel({**QUIET, **params}, seed=seed, out_dir=out_dir)
        self.ids = list(range(len(x)))
        # A station whose CA service starts after the test never transmits but still receives.
        self.ch.spawn([RobotSpec(id=i, name=f"s{i}", spawn_ns=10**15 if i in listen_only else 0)
                       for i in self.ids])
        self.x = list(x)
        self.y = list(y) if y is not None else [0.0] * len(x)
        self.v = [0.0] * len(x)
        self.t_ms = 0
        self.rx: list[dict] = []
        self.rx_steps: list[dict] = []
        self.records: list[dict] = []

    def interest_all(self) -> Interest:
        r = [a for a in self.ids for b in self.ids if a != b]
        s = [b for a in self.ids for b in self.ids if a != b]
        return Interest(np.asarray(r, np.int64), np.asarray(s, np.int64))

    def run(self, duration_ms: int) -> None:
        interest = self.interest_all()
        n = len(self.ids)
        for _ in range(duration_ms // 10):
            est = {"id": np.asarray(self.ids, np.int64), "x": np.asarray(self.x, float),
                   "y": np.asarray(self.y, float), "yaw": np.full(n, 0.3), "v": np.asarray(self.v, float),
                   "a": np.full(n, 0.25), "yaw_rate": np.full(n, 0.05)}
            out = self.ch.step(self.t_ms * MS, est, interest)
            self.rx_steps.append(out)
            if len(out["receiver"]):
                self.rx.append(out)
            self.records.append(with_names(self.ch.drain_records()))
            self.t_ms += 10

    def deliveries(self) -> dict[str, np.ndarray]:
        if not self.rx:
            return {}
        return {k: np.concatenate([d[k] for d in self.rx]) for k in self.rx[0]}

    def trace(self) -> dict[str, np.ndarray]:
        return {k: np.concatenate([r[k] for r in self.records]) for k in self.records[0]}


def rx_outcomes(trace: dict, sender: int, receiver: int) -> list[str]:
    sel = (trace["event"] == "rx") & (trace["sender"] == sender) & (trace["receiver"] == receiver)
    return trace["outcome"][sel].tolist()


def test_registered():
    assert COMMS_MODELS.get("itsg5") is ItsG5Channel
    assert ItsG5Channel.Params.model_json_schema()["additionalProperties"] is False


def test_hidden_terminals_collide_at_the_middle_station():
    # A and B 600 m apart cannot sense each other (-96 dBm); C in the middle (listening only) hears both at
    # -84 dBm. Both send at the same instants; any two backoffs (<= 15 slots = 195 us) overlap a 208 us frame,
    # so every frame collides at C, while each alone would pass the sensitivity.
    sim = Sim({"generation": SIMULTANEOUS, "latency": CONSTANT_DELAY, "radio": NO_RANDOM_RADIO,
               "dcc": {"mode": "off"}}, x=[-300.0, 0.0, 300.0], listen_only=(1,))
    sim.run(1000)
    tr = sim.trace()
    for sender in (0, 2):
        outcomes = rx_outcomes(tr, sender, 1)
        assert len(outcomes) == 10
        assert set(outcomes) == {"collision"}
    assert not sim.deliveries() or not np.any(sim.deliveries()["receiver"] == 1)


def test_capture_of_the_stronger_frame():
    # Same timing, but A is 50 m from C and B 550 m: A's frame wins with SINR far above 6 dB.
    sim = Sim({"generation": SIMULTANEOUS, "latency": CONSTANT_DELAY, "radio": NO_RANDOM_RADIO,
               "dcc": {"mode": "off"}}, x=[-50.0, 0.0, 550.0], listen_only=(1,))
    sim.run(1000)
    tr = sim.trace()
    assert set(rx_outcomes(tr, 0, 1)) == {"received"}
    assert set(rx_outcomes(tr, 2, 1)) == {"below_sensitivity"}


def test_half_duplex():
    # CW 0 and equal delays: both stations start at the same instant and neither hears the other.
    sim = Sim({"generation": SIMULTANEOUS, "latency": CONSTANT_DELAY, "radio": NO_RANDOM_RADIO,
               "mac": {"cw": 0}, "dcc": {"mode": "off"}}, x=[0.0, 10.0])
    sim.run(500)
    tr = sim.trace()
    assert set(rx_outcomes(tr, 0, 1)) == set(rx_outcomes(tr, 1, 0)) == {"half_duplex"}
    # With backoff they sense each other: the later one defers and both frames get through, except when both
    # draw the same backoff (probability 1/16) and start together.
    sim = Sim({"generation": SIMULTANEOUS, "latency": CONSTANT_DELAY, "radio": NO_RANDOM_RADIO,
               "dcc": {"mode": "off"}}, x=[0.0, 10.0], seed=5)
    sim.run(6000)
    tr = sim.trace()
    outcomes = rx_outcomes(tr, 0, 1) + rx_outcomes(tr, 1, 0)
    assert len(outcomes) == 120
    assert outcomes.count("received") >= 0.8 * len(outcomes)
    tx = tr["event"] == "tx"
    starts = {s: tr["t_ns"][tx & (tr["sender"] == s)] for s in (0, 1)}
    together = np.isin(starts[0], starts[1])
    lost = (tr["event"] == "rx") & (tr["outcome"] == "half_duplex") & (tr["sender"] == 0)
    assert lost.sum() == together.sum()


def test_content_is_the_quantised_estimate_and_latency_is_physical():
    sim = Sim({"latency": CONSTANT_DELAY}, x=[12.345678, 40.0], y=[3.21, -1.0])
    sim.run(1200)
    d = sim.deliveries()
    assert len(d["receiver"]) > 0
    proj = LocalProjection(51.4934, 7.4136)
    lat, lon = proj.to_geodetic(np.array([12.345678]), np.array([3.21]))
    q = quantise_si({"lat_deg": lat, "lon_deg": lon, "yaw": np.array([0.3]), "v": np.array([0.0]),
                     "a": np.array([0.25]), "yaw_rate": np.array([0.05])})
    qx, qy = proj.to_local(q["lat_deg"], q["lon_deg"])
    from0 = d["sender"] == 0
    assert np.all(d["x"][from0] == qx[0]) and np.all(d["y"][from0] == qy[0])
    assert abs(qx[0] - 12.345678) < 0.02 and qx[0] != 12.345678
    for name in ("yaw", "v", "a", "yaw_rate"):
        assert np.all(d[name][from0] == q[name][0])
    # 1 ms processing + AIFS 110 us + backoff <= 195 us + 208 us on air (or 224 us with LF) + 1 ms processing.
    lat_ns = d["received_ns"] - d["generated_ns"]
    assert np.all(lat_ns >= 2 * MS + 110_000 + 208_000)
    assert np.all(lat_ns <= 2 * MS + 110_000 + 195_000 + 240_000)
    assert np.all(np.diff(d["received_ns"]) >= 0)


def test_deliveries_arrive_by_step_and_carry_over():
    sim = Sim({"latency": {"tx_processing": {"dist": "constant", "value_s": 0.0},
                           "rx_processing": {"dist": "constant", "value_s": 0.025}}}, x=[0.0, 30.0])
    sim.run(3000)
    # Each delivery is handed out at the first step at or after its reception time (25 ms after the frame,
    # i.e. several steps later), never before.
    for step_index, out in enumerate(sim.rx_steps):
        if len(out["receiver"]):
            t_step = step_index * 10 * MS
            assert np.all(out["received_ns"] <= t_step) and np.all(out["received_ns"] > t_step - 10 * MS)
    d = sim.deliveries()
    assert len(d["receiver"]) > 0
    assert np.all(d["received_ns"] - d["generated_ns"] >= 25 * MS)


def test_records_columns_and_outcomes():
    sim = Sim({"trace": "all", "dcc": {"mode": "off"}}, x=[0.0, 20.0, 900.0, 5000.0])
    sim.run(2000)
    tr = sim.trace()
    assert set(tr) == {"t_ns", "event", "sender", "receiver", "generated_ns", "latency_s", "rx_power_dbm",
                       "outcome"}
    assert set(tr["outcome"].tolist()) <= set(OUTCOMES)
    tx = tr["event"] == "tx"
    assert np.all(tr["receiver"][tx] == -1)
    assert np.all(tr["outcome"][tx] == "sent")
    rx = ~tx
    ok = tr["outcome"] == "received"
    assert np.all(np.isfinite(tr["latency_s"][ok])) and np.all(tr["latency_s"][ok] > 0)
    assert np.all(tr["rx_power_dbm"][ok] >= -85.0)
    # The station 5 km away is beyond the cut-off radius: its pairs are recorded without a power.
    far = rx & ((tr["sender"] == 3) | (tr["receiver"] == 3))
    assert np.all(tr["outcome"][far] == "below_sensitivity") and np.all(np.isnan(tr["rx_power_dbm"][far]))
    m = sim.ch.metrics()
    assert 0.0 < m["cbr_mean"] <= m["cbr_max"] <= 1.0


def test_spawn_and_despawn_mid_run():
    sim = Sim({}, x=[0.0, 20.0, 40.0])
    sim.run(1500)
    sim.ch.despawn([1])
    sim.ids, sim.x, sim.y, sim.v = [0, 2], [0.0, 40.0], [0.0, 0.0], [0.0, 0.0]
    t_despawn = sim.t_ms * MS
    sim.run(1500)
    sim.ch.spawn([RobotSpec(id=7, name="s7", spawn_ns=sim.t_ms * MS)])
    sim.ids, sim.x, sim.y, sim.v = [0, 2, 7], [0.0, 40.0, 60.0], [0.0] * 3, [0.0] * 3
    t_spawn = sim.t_ms * MS
    sim.run(2000)
    d = sim.deliveries()
    late = d["received_ns"] > t_despawn + 20 * MS
    assert not np.any((d["receiver"][late] == 1) | (d["sender"][late] == 1))
    assert np.any((d["sender"] == 7) & (d["receiver"] == 0))
    assert np.any((d["sender"] == 0) & (d["receiver"] == 7) & (d["received_ns"] > t_spawn))
    with pytest.raises(ValueError, match="do not match"):
        sim.ch.step(sim.t_ms * MS, {"id": np.array([0, 2]), "x": np.zeros(2), "y": np.zeros(2),
                                    "yaw": np.zeros(2), "v": np.zeros(2), "a": np.zeros(2),
                                    "yaw_rate": np.zeros(2)}, sim.interest_all())


def run_busy(seed: int) -> tuple[dict, dict]:
    rng = np.random.default_rng(0)
    sim = Sim({"generation": {"mode": "fixed_rate"}}, x=list(rng.uniform(0, 400, 40)),
              y=list(rng.uniform(0, 30, 40)), seed=seed)
    sim.run(1500)
    return sim.deliveries(), sim.trace()


def test_determinism():
    d1, t1 = run_busy(11)
    d2, t2 = run_busy(11)
    d3, _ = run_busy(12)
    for k in d1:
        assert np.array_equal(d1[k], d2[k])
    for k in t1:
        assert np.array_equal(t1[k], t2[k], equal_nan=t1[k].dtype.kind == "f")
    assert len(d1["receiver"]) != len(d3["receiver"]) or not np.array_equal(d1["received_ns"], d3["received_ns"])


def test_pcap_and_codec_sample(tmp_path):
    sim = Sim({"pcap": True, "pcap_max_frames": 5, "codec_sample_rate": 1.0}, x=[0.0, 25.0], out_dir=tmp_path)
    sim.run(3000)
    sim.ch.finalize()
    data = (tmp_path / "v2x.pcap").read_bytes()
    assert data[:4] == bytes.fromhex("d4c3b2a1")  # little-endian pcap magic
    assert sim.ch.metrics()["codec_checked"] >= 6
    # 5 frames: 24-byte global header, then 16-byte record headers with Ethernet + GN + BTP + CAM.
    sizes, pos = [], 24
    while pos < len(data):
        incl = int.from_bytes(data[pos + 8:pos + 12], "little")
        sizes.append(incl)
        pos += 16 + incl
    assert len(sizes) == 5
    assert all(size in (14 + 4 + 8 + 28 + 4 + sim.ch.cam_bytes[lf] for lf in (False, True)) for size in sizes)


def test_propagation_delay_is_distance_over_the_speed_of_light():
    # With constant processing delays, latency = 2 ms + AIFS 110 us + k slots of 13 us + airtime + d / c.
    sim = Sim({"latency": CONSTANT_DELAY, "radio": {**NO_RANDOM_RADIO, "path_loss": "free_space"}},
              x=[0.0, 300.0])
    sim.run(3000)
    d = sim.deliveries()
    assert len(d["receiver"]) > 0
    airtime = {False: sim.ch.airtime_ns[False], True: sim.ch.airtime_ns[True]}
    propagation = round(300.0 / 299_792_458.0 * 1e9)  # 1001 ns
    for latency in (d["received_ns"] - d["generated_ns"]):
        rest = {lf: (latency - 2 * MS - 110_000 - airtime[lf] - propagation) for lf in (False, True)}
        assert any(r >= 0 and r % 13_000 == 0 for r in rest.values()), latency


def test_codec_checks_are_capped_per_simulated_second() -> None:
    # 20 stations at 10 Hz for 3 s, every CAM in the sample: 600 candidates, at most 7 checked in each second
    params = {"codec_sample_rate": 1.0, "codec_sample_max_per_s": 7, "generation": SIMULTANEOUS}
    sim = Sim(params, x=[10.0 * k for k in range(20)])
    sim.run(3000)
    assert sim.ch.metrics()["cams_sent"] >= 500
    assert sim.ch.metrics()["codec_checked"] == 21
    uncapped = Sim({**params, "codec_sample_max_per_s": 1000}, x=[10.0 * k for k in range(20)])
    uncapped.run(3000)
    assert uncapped.ch.metrics()["codec_checked"] >= 500
