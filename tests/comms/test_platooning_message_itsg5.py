"""The platooning message (PM) on the ITS-G5 model: its codec, its rate, its radio (same loss as the CAM at the
same distance, independent draws), what the receivers get (u_des and the platooning columns, kinematics untouched),
the capture (decoded with asn1tools and read by tshark), and through a run with Ploeg's CACC."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from comms_models.base import Interest, with_names
from comms_models.itsg5 import access_layout as ax
from comms_models.itsg5.codec import generation_delta_time
from comms_models.itsg5.model import ItsG5Channel
from comms_models.itsg5.platooning import (
    ACCEL_UNAVAILABLE,
    BTP_PORT_PM,
    INDEX_UNAVAILABLE,
    MANEUVER_UNAVAILABLE,
    MESSAGE_ID_PM,
    PEER_NONE,
    PLATOON_ID_UNAVAILABLE,
    PmCodec,
    build_pm,
    from_wire,
    quantise_pm,
    read_pm,
    to_wire,
)
from comms_models.itsg5.pm import PmReceptions, platoon_leaders
from core.robots import RobotSpec
from orchestrator.build.world import build_world
from orchestrator.engine.scheduler import BaseObserver
from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario

MS = 1_000_000
QUIET = {"pcap": False, "codec_sample_rate": 0.0}
START_UTC_S = 1_704_067_200.0  # the model's default start_utc_s


# -- (a) the codec -----------------------------------------------------------------------------------------------
def _random_si(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    return {
        "u_des": rng.uniform(-20.0, 20.0, n), "u_leader": rng.uniform(-20.0, 20.0, n), "v": rng.uniform(-5, 170, n),
        "platoon_id": rng.integers(0, 2**32 - 1, n).astype(float), "platoon_index": rng.integers(0, 255, n) * 1.0,
        "maneuver": rng.integers(0, 15, n) * 1.0, "maneuver_peer": rng.integers(0, 2**32, n) * 1.0,
    }


def test_codec_round_trip_over_the_whole_ranges():
    codec = PmCodec()
    rng = np.random.default_rng(3)
    si = _random_si(rng, 200)
    si["maneuver_peer"][::3] = np.nan  # no peer: the OPTIONAL field is absent
    for name in ("u_des", "platoon_id", "platoon_index", "maneuver"):
        si[name][::7] = np.nan
    wire = to_wire(si)
    sizes = codec.sizes()
    for i in range(200):
        fields = {key: int(col[i]) for key, col in wire.items()}
        data = codec.encode(build_pm(4_000_000_000 + i, i * 300, fields))
        assert len(data) == sizes[fields["maneuver_peer"] != PEER_NONE]
        decoded = read_pm(codec.decode(data))
        assert decoded["message_id"] == MESSAGE_ID_PM and decoded["station_id"] == 4_000_000_000 + i
        assert decoded["generation_delta_time"] == i * 300
        assert {key: decoded[key] for key in fields} == fields
    assert sizes == {False: 19, True: 23}  # 148 and 180 bits of UPER


def test_quantisation_within_the_quantum_and_unavailable_values():
    si = {"u_des": np.array([1.234, -0.004, 17.0, -30.0, np.nan]),
          "u_leader": np.array([0.005, np.inf, -np.inf, 0.0, 2.0]),
          "v": np.array([25.0, -3.0, 200.0, np.nan, 0.0]),
          "platoon_id": np.array([3.0, np.nan, 2.5, -1.0, 4_294_967_295.0]),
          "platoon_index": np.array([0.0, 1.0, 254.0, 255.0, np.nan]),
          "maneuver": np.array([2.0, np.nan, 14.0, 15.0, 0.0]),
          "maneuver_peer": np.array([np.nan, 7.0, 0.0, -1.0, 4_294_967_295.0])}
    wire = to_wire(si)
    assert wire["u_des"].tolist() == [123, 0, 1600, -1600, ACCEL_UNAVAILABLE]  # 0.01 m/s^2, clamped to +-16
    assert wire["u_leader"].tolist() == [0, 1600, -1600, 0, 200]  # round half to even: 0.5 -> 0
    assert wire["v"].tolist() == [2500, 300, 16382, 16383, 0]
    assert wire["platoon_id"].tolist() == [3, PLATOON_ID_UNAVAILABLE, PLATOON_ID_UNAVAILABLE,
                                           PLATOON_ID_UNAVAILABLE, PLATOON_ID_UNAVAILABLE]
    assert wire["platoon_index"].tolist() == [0, 1, 254, INDEX_UNAVAILABLE, INDEX_UNAVAILABLE]
    assert wire["maneuver"].tolist() == [2, MANEUVER_UNAVAILABLE, 14, MANEUVER_UNAVAILABLE, 0]
    assert wire["maneuver_peer"].tolist() == [PEER_NONE, 7, 0, PEER_NONE, 4_294_967_295]
    back = from_wire(wire)
    assert np.allclose(back["u_des"][:2], [1.23, 0.0]) and np.isnan(back["u_des"][4])
    assert np.isnan(back["platoon_id"][1:]).all() and np.isnan(back["maneuver_peer"][[0, 3]]).all()
    # inside the ranges, a value comes back within half a quantum
    rng = np.random.default_rng(5)
    u = rng.uniform(-16.0, 16.0, 10_000)
    q = quantise_pm({**{k: np.full(len(u), np.nan) for k in ("u_leader", "v", "platoon_id", "platoon_index",
                                                              "maneuver", "maneuver_peer")}, "u_des": u})
    assert np.abs(q["u_des"] - u).max() <= 0.005 + 1e-12


def test_an_out_of_range_value_is_refused_by_the_encoder():
    fields = {"platoon_id": 0, "platoon_index": 0, "u_des": 1602, "u_leader": 0, "v": 0, "maneuver": 0,
              "maneuver_peer": PEER_NONE}
    with pytest.raises(Exception, match="1602"):
        PmCodec().encode(build_pm(1, 0, fields))


# -- a small world of stations -----------------------------------------------------------------------------------
class Stations:
    """Stations on a line (x = ``x0`` + v t), stepped every 10 ms, each follower listening to its predecessor
    and to station 0; ``u_des`` and the platooning columns are known functions of time."""

    def __init__(self, params: dict, x0: list[float], v: float = 0.0, seed: int = 0, out_dir=None,
                 platoon_columns: bool = True) -> None:
        self.ch = ItsG5Channel({**QUIET, **params}, seed=seed, out_dir=out_dir)
        self.n = len(x0)
        self.ch.spawn([RobotSpec(id=i, name=f"s{i}") for i in range(self.n)])
        self.x0, self.v = np.asarray(x0, float), v
        self.platoon_columns = platoon_columns
        pairs = sorted({(r, s) for r in range(1, self.n) for s in (r - 1, 0)})
        self.interest = Interest(np.array([r for r, _ in pairs], np.int64), np.array([s for _, s in pairs], np.int64))
        self.rx: list[dict] = []
        self.records: list[dict] = []

    @staticmethod
    def u_des(ids: np.ndarray, t_ns: int) -> np.ndarray:
        return 0.37 * ids - 0.9 + 0.0137 * (t_ns // MS) / 10.0  # a new value every step

    def estimate(self, t_ns: int) -> dict[str, np.ndarray]:
        ids = np.arange(self.n)
        est = {"id": ids, "x": self.x0 + self.v * t_ns / 1e9, "y": np.zeros(self.n), "yaw": np.zeros(self.n),
               "v": np.full(self.n, self.v), "a": np.full(self.n, 0.3), "yaw_rate": np.zeros(self.n),
               "u_des": self.u_des(ids, t_ns)}
        if self.platoon_columns:
            est |= {"platoon_id": np.full(self.n, 42.0), "platoon_index": ids.astype(float),
                    "maneuver": np.where(ids == 1, 3.0, 0.0), "maneuver_peer": np.where(ids == 1, 2.0, np.nan)}
        return est

    def run(self, duration_ms: int, start_ms: int = 0) -> None:
        for t_ms in range(start_ms, start_ms + duration_ms, 10):
            out = self.ch.step(t_ms * MS, self.estimate(t_ms * MS), self.interest)
            self.rx.append(out)
            self.records.append(with_names(self.ch.drain_records()))

    def deliveries(self) -> dict[str, np.ndarray]:
        return {k: np.concatenate([d[k] for d in self.rx]) for k in self.rx[0]}

    def trace(self) -> dict[str, np.ndarray]:
        return {k: np.concatenate([r[k] for r in self.records]) for k in self.records[0]}


def _pm_tx(trace: dict) -> dict:
    sel = (trace["event"] == "tx") & (trace["outcome"] == "sent") & (trace["message"] == 1)
    return {k: v[sel] for k, v in trace.items()}


# -- (b) the rate ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rate_hz", [10.0, 25.0, 30.0])
def test_pms_are_generated_at_rate_hz_exactly(rate_hz):
    sim = Stations({"platooning_message": {"rate_hz": rate_hz}, "dcc": {"mode": "off"}}, [0.0, 20.0, 40.0])
    sim.run(3000)
    tx = _pm_tx(sim.trace())
    for station in range(3):
        gens = tx["generated_ns"][tx["sender"] == station]
        first = gens.min()
        assert first <= 100 * MS  # the service starts within the start jitter (0.1 s), on the step grid
        for second in (0, 1):  # PMs generated in each full second after the first
            lo = first + second * 1_000_000_000
            assert np.count_nonzero((gens >= lo) & (gens < lo + 1_000_000_000)) == rate_hz
    assert sim.ch.metrics()["pms_dcc_dropped"] == 0


def test_without_the_option_no_pm_travels_and_deliveries_carry_no_u_des():
    sim = Stations({}, [40.0, 20.0, 0.0], v=20.0)
    sim.run(1000)
    assert not sim.ch.carries_platooning_message
    assert "message" not in sim.trace() and "pms_sent" not in sim.ch.metrics()
    rx = sim.deliveries()
    assert len(rx["receiver"]) > 10 and "u_des" not in rx and "platoon_id" not in rx


# -- (c) the radio -------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_pm_pdr_equals_cam_pdr_at_200_m_and_the_draws_are_independent():
    # fixed-rate CAMs at 10 Hz and PMs at 10 Hz, generated at the same instants; at 200 m the dual-slope model
    # with shadowing and fading delivers about 60 % (RadioParams.sensitivity_dbm)
    sim = Stations({"platooning_message": {"rate_hz": 10.0}, "generation": {"mode": "fixed_rate"}}, [0.0, 200.0])
    sim.interest = Interest(np.array([1, 0], np.int64), np.array([0, 1], np.int64))  # both directions
    sim.run(60_000)
    m = sim.ch.metrics()
    cam_pdr, pm_pdr = m["pdr_interest"], m["pm_pdr_interest"]
    attempts = sum(m["pm_interest_outcomes"].values())
    assert attempts == sum(m["interest_outcomes"].values()) == 1200  # 600 per direction per kind
    assert 0.5 < cam_pdr < 0.7 and 0.5 < pm_pdr < 0.7
    # two independent binomials of 1200 at p = 0.6: the difference has sigma 0.02
    assert abs(pm_pdr - cam_pdr) < 0.08
    trace = sim.trace()
    rx = trace["event"] == "rx"
    key = lambda sel: dict(zip(zip(trace["sender"][sel], trace["generated_ns"][sel], strict=True),  # noqa: E731
                               trace["outcome"][sel] == "received", strict=True))
    cams, pms = key(rx & (trace["message"] == 0)), key(rx & (trace["message"] == 1))
    common = sorted(set(cams) & set(pms))
    assert len(common) == 1200
    differ = np.mean([cams[c] != pms[c] for c in common])
    assert 0.38 < differ < 0.58  # independent at p = 0.6: 2 p (1 - p) = 0.48; the same draws would give 0
    # the same access: a PM waits behind the CAM of its instant, so it reaches the air later, by about one frame
    pm_tx, sent = _pm_tx(trace), (trace["event"] == "tx") & (trace["outcome"] == "sent")
    cam_wait = np.mean((trace["t_ns"] - trace["generated_ns"])[sent & (trace["message"] == 0)])
    pm_wait = np.mean(pm_tx["t_ns"] - pm_tx["generated_ns"])
    assert 0 < pm_wait - cam_wait < 1 * MS


def test_pms_load_the_channel():
    off = {"dcc": {"mode": "off"}}
    cams_only = Stations(off, [60.0, 40.0, 20.0, 0.0], v=20.0)
    with_pms = Stations({**off, "platooning_message": {"rate_hz": 20.0}}, [60.0, 40.0, 20.0, 0.0], v=20.0)
    cams_only.run(2000)
    with_pms.run(2000)
    a, b = cams_only.ch.metrics(), with_pms.ch.metrics()
    # 4 stations x 20 PMs/s x 101 bytes (184 us each on air) add about 1.5 % busy time to every station's CBR
    assert b["cams_sent"] == a["cams_sent"] > 20 and b["pms_sent"] >= 4 * 20 * 1.9
    assert 0.012 < b["cbr_mean"] - a["cbr_mean"] < 0.02


def test_dcc_gates_the_pms_on_their_own_flow():
    # reactive DCC, relaxed, table A.1: T_off = 100 ms, so 20 Hz of PMs pass at 10 Hz; table A.2 (50 ms) lets
    # them all through
    for table, passed in (("A.1", 10), ("A.2", 20)):
        sim = Stations({"platooning_message": {"rate_hz": 20.0}, "dcc": {"table": table},
                        "generation": {"start_jitter_s": 0.0}}, [0.0, 20.0])
        sim.run(1000)
        m = sim.ch.metrics()
        assert m["pms_sent"] == 2 * passed and m["pms_dcc_dropped"] == 2 * (20 - passed)
    # adaptive DCC with a tiny duty cycle: T_off = T_on / delta far above the PM period
    sim = Stations({"platooning_message": {"rate_hz": 10.0},
                    "dcc": {"mode": "adaptive", "limeric": {"delta_max": 0.0005, "delta_min": 0.0001}}},
                   [0.0, 20.0])
    sim.run(2000)
    m = sim.ch.metrics()
    assert m["pms_dcc_dropped"] > 0.5 * (m["pms_sent"] + m["pms_dcc_dropped"])


# -- (d) what receivers get -----------------------------------------------------------------------------------------
def test_deliveries_carry_the_senders_desired_acceleration_and_platoon_fields():
    sim = Stations({"platooning_message": {"rate_hz": 10.0}, "generation": {"start_jitter_s": 0.0}},
                   [40.0, 20.0, 0.0], v=20.0)
    sim.run(3000)
    rx = sim.deliveries()
    have = np.isfinite(rx["u_des"])
    assert have.mean() > 0.9
    # u_des is the sender's value at a PM generation time (every 100 ms from 0), quantised to 0.01 m/s^2, from
    # the newest PM received before the delivery (or the one before)
    gen = (rx["received_ns"] // (100 * MS)) * (100 * MS)
    ok = np.zeros(len(gen), bool)
    for back in (0, 1):
        expected = quantise_pm({"u_des": Stations.u_des(rx["sender"], gen - back * 100 * MS),
                                **{k: np.full(len(gen), np.nan) for k in ("u_leader", "v", "platoon_id",
                                                                            "platoon_index", "maneuver",
                                                                            "maneuver_peer")}})["u_des"]
        ok |= np.abs(rx["u_des"] - expected) < 1e-9
    assert ok[have].all()
    assert (rx["platoon_id"][have] == 42.0).all()
    assert (rx["platoon_index"][have] == rx["sender"][have]).all()
    assert (rx["maneuver"][have] == np.where(rx["sender"][have] == 1, 3.0, 0.0)).all()
    peer = rx["maneuver_peer"][have]
    assert (peer[rx["sender"][have] == 1] == 2.0).all() and np.isnan(peer[rx["sender"][have] != 1]).all()


def test_pm_rows_keep_the_kinematics_and_the_age_of_the_newest_cam():
    sim = Stations({"platooning_message": {"rate_hz": 25.0}, "dcc": {"mode": "off"}}, [40.0, 20.0, 0.0], v=20.0)
    sim.run(3000)
    rx = sim.deliveries()
    for r, s in zip(sim.interest.receivers, sim.interest.senders, strict=True):
        pair = (rx["receiver"] == r) & (rx["sender"] == s)
        gen, x = rx["generated_ns"][pair], rx["x"][pair]
        cam_rows = gen % MS == 0  # CAMs are generated on the 10 ms grid; PM rows add n ns to their CAM's time
        assert cam_rows.sum() > 5 and (~cam_rows).sum() > 3 * cam_rows.sum()
        # every PM row repeats the newest CAM before it (its time and position), one ns later each time
        last_cam = np.maximum.accumulate(np.where(cam_rows, np.arange(len(gen)), -1))
        pm_rows = ~cam_rows & (last_cam >= 0)
        assert (gen[pm_rows] // MS * MS == gen[last_cam[pm_rows]]).all()
        assert (x[pm_rows] == x[last_cam[pm_rows]]).all()
        # newer than anything delivered before: the control federate (newest generated_ns wins) takes each one
        assert (np.diff(gen) > 0).all()


def test_without_platoon_columns_in_the_estimate_deliveries_have_only_u_des():
    sim = Stations({"platooning_message": {"rate_hz": 10.0}}, [40.0, 20.0], v=10.0, platoon_columns=False)
    sim.run(1000)
    rx = sim.deliveries()
    assert "u_des" in rx and not {"platoon_id", "platoon_index", "maneuver", "maneuver_peer"} & set(rx)
    assert np.isfinite(rx["u_des"]).any()


def test_stale_pm_fields_are_not_attached_to_a_cam():
    pm = PmReceptions(max_age_s=0.5)
    nan6 = {k: np.array([np.nan]) for k in ("x", "y", "yaw", "v", "a", "yaw_rate")}
    pm_cols = {"u_des": np.array([1.5]), "platoon_id": np.array([1.0]), "platoon_index": np.array([2.0]),
               "maneuver": np.array([0.0]), "maneuver_peer": np.array([np.nan]), "u_leader": np.array([0.0])}
    nan_pm = {k: np.array([np.nan]) for k in pm_cols}
    cam = {k: np.array([3.0]) for k in nan6}

    def row(kind, gen, received, fields):
        return {"receiver": np.array([2]), "sender": np.array([1]), "generated_ns": np.array([gen]),
                "received_ns": np.array([received]), "kind": np.array([kind]), **fields}

    assert len(pm.merge(row(1, 100 * MS, 103 * MS, nan6 | pm_cols), ())["receiver"]) == 0  # no CAM yet: no row
    out = pm.merge(row(0, 150 * MS, 152 * MS, cam | nan_pm), ())
    assert out["u_des"].tolist() == [1.5] and out["generated_ns"].tolist() == [150 * MS]  # rides on the CAM
    out = pm.merge(row(0, 700 * MS, 702 * MS, cam | nan_pm), ())
    assert np.isnan(out["u_des"]).all()  # 602 ms old: not attached
    out = pm.merge(row(1, 90 * MS, 703 * MS, nan6 | pm_cols), ())
    assert len(out["receiver"]) == 0  # older than the newest PM


def test_a_station_leaving_takes_its_queued_pms_with_it():
    # 25 Hz PMs without DCC keep a PM waiting behind a CAM now and then; station 1 leaves mid-run
    sim = Stations({"platooning_message": {"rate_hz": 25.0}, "dcc": {"mode": "off"}}, [40.0, 20.0, 0.0], v=20.0)
    t_ms = 0
    while not sim.ch.medium.si[1, ax.S_NEXT]:  # until station 1 has a frame waiting behind another
        sim.run(10, start_ms=t_ms)
        t_ms += 10
        assert t_ms < 3000
    gone_ns = t_ms * MS
    sim.ch.despawn([1])
    sim.interest = Interest(np.array([2], np.int64), np.array([0], np.int64))
    est = sim.estimate
    sim.estimate = lambda t_ns: {k: v[[0, 2]] for k, v in est(t_ns).items()}  # the rows of the stations left
    sim.run(1000, start_ms=t_ms)
    trace = sim.trace()
    late = trace["t_ns"] >= gone_ns
    assert not ((trace["sender"] == 1) & (trace["event"] == "tx") & late).any()
    rx = {k: np.concatenate([d[k] for d in sim.rx[t_ms // 10 + 1:]]) for k in sim.rx[0]}
    assert set(rx["sender"].tolist()) == {0} and np.isfinite(rx["u_des"]).mean() > 0.9
    assert not np.isin(sim.ch.pm.rx.keys >> 32, [1]).any() and not np.isin(sim.ch.pm.rx.keys & 0xFFFFFFFF, [1]).any()


def test_the_leader_whose_acceleration_a_pm_relays():
    ids = np.array([10, 11, 12, 13, 14])
    by_interest = np.array([-1, 10, -2, -1, 12])  # what the interest pairs say (-1 leads, -2 unknown)
    est = {"platoon_id": np.array([1.0, 1.0, 2.0, 2.0, np.nan]),
           "platoon_index": np.array([0.0, 1.0, 1.0, 0.0, np.nan])}
    # the platoon's index-0 station where the estimate has a platoon, the interest elsewhere
    assert platoon_leaders(est, ids, np.arange(5), by_interest).tolist() == [-1, 10, 13, -1, 12]
    est["platoon_index"] = np.array([1.0, 2.0, 1.0, 1.0, np.nan])  # no station at index 0: unknown
    assert platoon_leaders(est, ids, np.arange(5), by_interest).tolist() == [-2, -2, -2, -2, 12]
    assert platoon_leaders({}, ids, np.arange(5), by_interest).tolist() == by_interest.tolist()


# -- (4) the capture -------------------------------------------------------------------------------------------------
def _pcap_frames(path: Path) -> list[tuple[int, bytes]]:
    data = path.read_bytes()
    out, pos = [], 24
    while pos < len(data):
        sec, usec, incl, _ = struct.unpack("<IIII", data[pos:pos + 16])
        out.append((sec * 1_000_000 + usec, data[pos + 16:pos + 16 + incl]))
        pos += 16 + incl
    return out


def test_captured_pms_decode_to_the_senders_values(tmp_path):
    sim = Stations({"platooning_message": {"rate_hz": 10.0}, "pcap": True, "pcap_max_frames": 100_000,
                    "generation": {"start_jitter_s": 0.0}}, [40.0, 20.0, 0.0], v=20.0, out_dir=tmp_path)
    sim.run(2000)
    sim.ch.finalize()
    frames = _pcap_frames(tmp_path / "v2x.pcap")
    ports = [struct.unpack("!H", f[54:56])[0] for _, f in frames]
    pms = [f for (_, f), port in zip(frames, ports, strict=True) if port == BTP_PORT_PM]
    assert len(pms) == 3 * 20 and ports.count(2001) > 3 * 5  # every PM and every CAM of the run
    codec = PmCodec()
    gdt0 = generation_delta_time(0, START_UTC_S)
    for frame in pms:
        pm = read_pm(codec.decode(frame[58:]))
        t_ns = ((pm["generation_delta_time"] - gdt0) % 65536) * MS
        station = pm["station_id"]
        assert frame[6:12] == b"\x02\x00" + struct.pack("!I", station)  # the sender's MAC
        assert pm["message_id"] == MESSAGE_ID_PM and t_ns % (100 * MS) == 0
        back = from_wire(pm)
        assert abs(back["u_des"] - Stations.u_des(np.array(station), t_ns)) <= 0.005 + 1e-12
        # the leader's: station 0's own; the others relay what they last got from station 0 (or nothing yet)
        if station == 0:
            assert abs(back["u_leader"] - Stations.u_des(np.array(0), t_ns)) <= 0.005 + 1e-12
        elif np.isfinite(back["u_leader"]):
            assert any(abs(back["u_leader"] - Stations.u_des(np.array(0), t_ns - k * 100 * MS)) <= 0.005 + 1e-12
                       for k in (1, 2))
        assert abs(back["v"] - 20.0) <= 0.005
        assert (back["platoon_id"], back["platoon_index"]) == (42.0, station)
        assert back["maneuver"] == (3.0 if station == 1 else 0.0)
        assert back["maneuver_peer"] == 2.0 if station == 1 else np.isnan(back["maneuver_peer"])
    relayed = [from_wire(read_pm(codec.decode(f[58:])))["u_leader"] for f in pms]
    assert np.isfinite(relayed).all() or sum(np.isfinite(relayed)) >= len(pms) - 3  # all but the first of each


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark (Wireshark) is not installed")
def test_tshark_reads_the_pm_packets(tmp_path):
    sim = Stations({"platooning_message": {"rate_hz": 10.0}, "pcap": True}, [0.0, 20.0], out_dir=tmp_path)
    sim.run(500)
    sim.ch.finalize()
    args = ["tshark", "-r", str(tmp_path / "v2x.pcap"), "-T", "fields", "-E", "separator=|", "-e", "btpb.dstport",
            "-e", "frame.protocols", "-e", "geonw.src_pos.addr.mid"]
    rows = [line.split("|") for line in subprocess.run(args, capture_output=True, text=True, timeout=60,
                                                       check=True).stdout.splitlines()]
    pm_rows = [r for r in rows if r[0] == str(BTP_PORT_PM)]
    assert len(pm_rows) == 2 * 5 and len(rows) > len(pm_rows)
    for row in pm_rows:  # GeoNetworking and BTP dissected (with the sender's address), our payload left as data
        assert row[1].startswith("eth:ethertype:gnw:btpb") and ":its" not in row[1]
        assert row[2] in ("02:00:00:00:00:00", "02:00:00:00:00:01")
    text = subprocess.run(["tshark", "-r", str(tmp_path / "v2x.pcap"), "-V"], capture_output=True, text=True,
                          timeout=60).stdout
    assert "Malformed" not in text and text.count("Destination Port: 7001") == len(pm_rows)


# -- (d, e) through a run with Ploeg's CACC --------------------------------------------------------------------------
SCENARIO = """
version: 1
name: pm_itsg5
seed: 3
duration_s: 4.0
step_s: 0.01
vehicles:
  count: 4
  template:
    preset: passenger_car
    model: dynamic
    params: {input_mode: accel_steer, accel_tau_s: 0.1}
leader: {profile: sinusoid, params: {speed_mps: 25.0, amplitude_mps: 2.0, frequency_hz: 0.5, start_s: 0.0}}
controller: {type: ploeg_cacc, period_s: 0.01, time_gap_s: 0.7, standstill_m: 2.0, kp: 0.2, kd: 0.7}
channel: {type: itsg5, generation: {start_jitter_s: 0.0}, platooning_message: {rate_hz: 10}}
outputs: {plots: false, report: false}
"""


class _Tap(BaseObserver):
    """Keeps every cam_rx table and the commands of every instant."""

    def __init__(self) -> None:
        self.rx: list[dict] = []
        self.commands: dict[int, dict] = {}

    def on_start(self, scheduler) -> None:
        self.scheduler = scheduler

    def on_instant(self, t_ns, bus, stepped) -> None:
        written = self.scheduler.written_now
        if "cam_rx" in written and len(bus["cam_rx"]["receiver"]):
            self.rx.append(dict(bus["cam_rx"]))
        if "commands" in written:
            self.commands[t_ns] = {"id": np.array(bus["commands"]["id"]), "accel": np.array(bus["commands"]["accel"])}


def _run(overrides: list[str]) -> _Tap:
    world = build_world(parse_scenario(SCENARIO, overrides=overrides))
    tap = _Tap()
    world.scheduler.setup()
    world.scheduler.run([tap])
    return tap


def test_ploeg_cacc_on_itsg5_receives_the_predecessors_command():
    tap = _run([])
    rx = {k: np.concatenate([np.asarray(d[k]) for d in tap.rx]) for k in tap.rx[0]}
    have = np.isfinite(rx["u_des"])
    followers = rx["sender"] != rx["sender"].min()  # the leader's command comes from its profile (may be NaN)
    assert have[followers].mean() > 0.9
    times = np.array(sorted(tap.commands))

    def command(sender: int, t_ns: int) -> float:
        c = tap.commands[int(times[np.searchsorted(times, t_ns, side="right") - 1])]
        return float(c["accel"][np.flatnonzero(c["id"] == sender)[0]])

    # each u_des is the sender's command (as the V2X federate saw it: the previous instant's) at the generation
    # time of the newest PM, or of the one before, within the 0.01 m/s^2 quantum; the measured acceleration would
    # not match (the actuator lag)
    matched = 0
    for j in np.flatnonzero(have & followers):
        newest = rx["received_ns"][j] // (100 * MS) * (100 * MS)
        candidates = [command(int(rx["sender"][j]), g - 10 * MS) for g in (newest, newest - 100 * MS) if g > 0]
        assert min(abs(rx["u_des"][j] - c) for c in candidates) <= 0.005 + 1e-9
        matched += 1
    assert matched > 100
    off = _run(["channel.platooning_message=null"])
    rx_off = np.concatenate([np.asarray(d["u_des"]) for d in off.rx])
    assert len(rx_off) > 50 and np.isnan(rx_off).all()


def test_two_runs_give_identical_traces(tmp_path):
    scenario = parse_scenario(SCENARIO, overrides=["duration_s=2.0"])
    first = run_scenario(scenario, tmp_path / "a")
    again = run_scenario(scenario, tmp_path / "b")
    assert first.ok and again.ok
    assert first.run_info["digest"] == again.run_info["digest"]
    assert (tmp_path / "a" / "v2x.pcap").read_bytes() == (tmp_path / "b" / "v2x.pcap").read_bytes()
    a, b = _run(["duration_s=2.0"]), _run(["duration_s=2.0"])
    for x, y in zip(a.rx, b.rx, strict=True):
        assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k], equal_nan=True) for k in x)
