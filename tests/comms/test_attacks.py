"""Every built-in attack on messages forges what its station sends: labelled in trace/v2x.parquet, visible in the
capture (as tshark decodes it; our platooning message as tshark hands out its bytes, decoded with our codec), a
data replay byte for byte the replayed frame but for the station id and the times, a delayed message byte for byte
the station's own frame of delay_s before, a forged leader and a forged maneuver request with their forged fields
on the wire, the same seed giving the same traces. The jammers are tests/comms/test_jamming.py's."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from comms_models.attacks import ATTACKS
from comms_models.itsg5.codec import generation_delta_time
from comms_models.itsg5.geo import LocalProjection
from comms_models.itsg5.platooning import BTP_PORT_PM, PmCodec, read_pm
from core.ports import MANEUVER_STATES
from tests.comms.attack_run import ATTACKS as RUN_ATTACKS
from tests.comms.attack_run import FROM_S, TO_S, run, trace
from tests.comms.test_jamming import JAMMERS

pytestmark = pytest.mark.slow  # one ~10 s run shared by the module, a second one for determinism
NS = 1_000_000_000
FIELDS = ("its.stationID", "cam.generationDeltaTime", "its.latitude", "its.longitude", "its.speedValue",
          "its.headingValue", "its.longitudinalAccelerationValue", "its.yawRateValue", "its.curvatureValue")


@pytest.fixture(scope="module")
def attacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run(tmp_path_factory.mktemp("attacks") / "run")


@pytest.fixture(scope="module")
def cams(attacked: Path) -> list[dict[str, int]]:
    """The captured CAMs as tshark decodes them (fields of ``FIELDS``)."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark (Wireshark) is not installed")
    args = ["tshark", "-r", str(attacked / "v2x.pcap"), "-Y", "cam.generationDeltaTime", "-T", "fields", "-E",
            "separator=|"]
    for field in FIELDS:
        args += ["-e", field]
    lines = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True).stdout.splitlines()
    rows = [line.split("|") for line in lines if line.strip()]
    return [{name: int(value.split(",")[0]) for name, value in zip(FIELDS, row, strict=True)} for row in rows]


def test_every_built_in_attack_runs_in_a_test() -> None:
    """The shared run holds every attack on messages; tests/comms/test_jamming.py runs every jammer."""
    assert sorted(name for name, _ in RUN_ATTACKS) + sorted(JAMMERS) == \
        sorted(n for n in ATTACKS.builtin_names() if ATTACKS.get(n).message != "air") + \
        sorted(n for n in ATTACKS.builtin_names() if ATTACKS.get(n).message == "air")


def _label(name: str) -> int:
    return [n for n, _ in RUN_ATTACKS].index(name) + 1


def _station(name: str) -> int:
    return _label(name) + 1  # the k-th attack's robot is robot k + 1, station id k + 2


@pytest.mark.parametrize("k", range(len(RUN_ATTACKS)), ids=[name for name, _ in RUN_ATTACKS])
def test_forged_frames_are_labelled_in_the_window_only(attacked: Path, k: int) -> None:
    v2x = trace(attacked, "v2x")
    label, name = k + 1, RUN_ATTACKS[k][0]
    mine = (v2x["attack"] == label) & (v2x["event"] == "tx") & (v2x["outcome"] == "sent")
    assert mine.sum() >= 5, name
    gen = v2x["generated_ns"][mine]
    back_s = RUN_ATTACKS[k][1]["delay_s"] if name == "delayed_message" else 0.0  # the CAMs claim old times
    assert gen.min() >= (FROM_S - back_s) * NS and gen.max() < (TO_S - back_s) * NS
    assert set(v2x["message"][mine]) == {ATTACKS.get(name).message}
    assert ((v2x["attack"] == label) & (v2x["event"] == "rx") & (v2x["outcome"] == "received")).any()
    claimed = {"ghost": 900_000 + label + 1, "forged_leader": 1}.get(name, label + 1)  # robot k + 1: id k + 2
    assert set(v2x["sender"][mine]) == {claimed}


def _cams_of(cams: list[dict[str, int]], station: int) -> list[dict[str, int]]:
    return [c for c in cams if c["its.stationID"] == station]


def test_the_capture_holds_the_forged_positions_and_speeds(attacked: Path, cams: list[dict[str, int]]) -> None:
    lat, lon = LocalProjection(51.4934, 7.4136).to_geodetic(np.array([40.0]), np.array([3.0]))
    constant = _cams_of(cams, 2)
    assert sum(c["its.latitude"] == round(lat[0] * 1e7) and c["its.longitude"] == round(lon[0] * 1e7)
               for c in constant) >= 20  # 4 s at 10 Hz (some frames go to the DCC gatekeeper)
    assert sum(c["its.speedValue"] == 10_000 for c in _cams_of(cams, 7)) >= 20  # 100 m/s in 0.01 m/s
    far = [c for c in _cams_of(cams, 4) if abs(c["its.latitude"] - round(lat[0] * 1e7)) > 20_000]  # > ~200 m
    assert len(far) >= 20


def test_a_ghost_and_a_dos_are_on_the_air(cams: list[dict[str, int]]) -> None:
    assert len(_cams_of(cams, 900_012)) >= 30  # 10 Hz for 4 s, the attacker's own CAMs beside them
    assert len(_cams_of(cams, 11)) > 2 * len(_cams_of(cams, 14))  # DoS at 50 Hz against an honest 10 Hz


def test_a_replay_is_the_replayed_cam_but_for_station_and_time(attacked: Path, cams: list[dict[str, int]]) -> None:
    content = [f for f in FIELDS if f not in ("its.stationID", "cam.generationDeltaTime")]
    target = {tuple(c[f] for f in content) for c in _cams_of(cams, 1)}
    replays = [c for c in _cams_of(cams, 10) if tuple(c[f] for f in content) in target]
    v2x = trace(attacked, "v2x")
    forged = int(((v2x["attack"] == 9) & (v2x["event"] == "tx") & (v2x["outcome"] == "sent")).sum())
    assert len(replays) >= forged >= 20  # every forged CAM carries one of the leader's (plus honest look-alikes)


def test_the_same_seed_gives_the_same_traces(attacked: Path, tmp_path: Path) -> None:
    again = run(tmp_path / "again")
    digest = [json.loads((d / "run.json").read_text())["digest"] for d in (attacked, again)]
    assert digest[0] == digest[1]
    assert (attacked / "v2x.pcap").read_bytes() == (again / "v2x.pcap").read_bytes()


# -- byte for byte -----------------------------------------------------------------------------------------------------
# A captured frame: Ethernet (source MAC from the station id at 6..12), GeoNetworking basic and common headers, the
# single-hop broadcast header whose long position vector holds the station's MAC at 28..34 and the position's time
# stamp at 34..38, BTP-B to 58, then the UPER message: ItsPduHeader (protocolVersion, messageID, stationID at 2..6),
# then the CAM's generationDeltaTime at 6..8 (all fixed-width in UPER: byte-aligned).
CAM_AT = 58
STATION_BYTES = (slice(6, 12), slice(28, 34), slice(CAM_AT + 2, CAM_AT + 6))
TIME_BYTES = (slice(34, 38), slice(CAM_AT + 6, CAM_AT + 8))


def _frames(path: Path) -> list[tuple[int, bytes]]:
    """(capture time [us since the epoch], frame) of every frame of a classic pcap file."""
    data = path.read_bytes()
    out, pos = [], 24
    while pos < len(data):
        sec, usec, incl, _ = struct.unpack("<IIII", data[pos:pos + 16])
        out.append((sec * 1_000_000 + usec, data[pos + 16:pos + 16 + incl]))
        pos += 16 + incl
    return out


def _cam_frames(attacked: Path, station: int) -> list[tuple[int, bytes]]:
    return [(t, f) for t, f in _frames(attacked / "v2x.pcap")
            if struct.unpack("!H", f[54:56])[0] == 2001 and struct.unpack("!I", f[CAM_AT + 2:CAM_AT + 6])[0] == station]


def _masked(frame: bytes, spans: tuple[slice, ...]) -> bytes:
    out = bytearray(frame)
    for span in spans:
        out[span] = bytes(span.stop - span.start)
    return bytes(out)


def test_a_replay_is_the_replayed_frame_byte_for_byte_but_station_and_times(attacked: Path) -> None:
    """Each replayed frame equals a frame of its target in every byte but the station id (MAC, GeoNetworking
    address, CAM header) and the time stamps (position vector, generationDeltaTime): content, containers (the
    low-frequency one when the target's had it) and length."""
    v2x = trace(attacked, "v2x")
    replayed = set(v2x["generated_ns"][(v2x["attack"] == _label("data_replay")) & (v2x["event"] == "tx")
                                       & (v2x["outcome"] == "sent")].tolist())
    target = {_masked(f, STATION_BYTES + TIME_BYTES) for _, f in _cam_frames(attacked, 1)}
    gdts = {generation_delta_time(g, 1_704_067_200.0) for g in replayed}
    mine = [f for _, f in _cam_frames(attacked, _station("data_replay"))
            if struct.unpack("!H", f[CAM_AT + 6:CAM_AT + 8])[0] in gdts]
    assert len(mine) >= 20
    matched = [f for f in mine if _masked(f, STATION_BYTES + TIME_BYTES) in target]
    # a replay of a CAM of the target that never went on air (dropped by the DCC gatekeeper) has no frame to match
    assert len(matched) >= 0.8 * len(mine)
    assert len({len(f) for f in matched}) == 2  # with and without the low-frequency container, as the target's
    assert all(f[STATION_BYTES[0]] == b"\x02\x00" + struct.pack("!I", _station("data_replay")) for f in matched)


def test_a_delayed_message_is_the_stations_own_frame_of_delay_before(attacked: Path) -> None:
    """With the generation time it had: in the attack's first delay_s the frames on the air are, byte for byte
    (time stamps included), those the station sent delay_s earlier; after that, its true content of delay_s before
    (never on the air itself: it sent delayed ones then)."""
    delay_us = round(RUN_ATTACKS[_label("delayed_message") - 1][1]["delay_s"] * 1e6)
    frames = _cam_frames(attacked, _station("delayed_message"))
    first = {f: t for t, f in reversed(frames)}  # each distinct frame's first capture time
    start_us = round((1_704_067_200.0 + FROM_S) * 1e6)
    replayed = [(t, f) for t, f in frames if start_us + 10_000 <= t < start_us + delay_us]
    assert len(replayed) >= 9
    for t, f in replayed:  # sent 1 s earlier + a few ms of processing and backoff, both times
        assert f in first and abs((t - first[f]) - delay_us) <= 5_000, (t - first.get(f, t)) / 1e6


def test_a_delayed_message_claims_its_old_generation_time(attacked: Path) -> None:
    """On the wire (tshark): every CAM of the attack's window has a generationDeltaTime delay_s before the frame
    went on air (plus the 1-3 ms of transmit processing and the backoff)."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark (Wireshark) is not installed")
    station = _station("delayed_message")
    args = ["tshark", "-r", str(attacked / "v2x.pcap"), "-Y", f"its.stationID == {station}", "-T", "fields", "-E",
            "separator=|", "-e", "frame.time_epoch", "-e", "cam.generationDeltaTime"]
    rows = [line.split("|") for line in subprocess.run(args, capture_output=True, text=True, timeout=120,
                                                       check=True).stdout.splitlines()]
    delay_ms = round(RUN_ATTACKS[_label("delayed_message") - 1][1]["delay_s"] * 1000)
    # generationDeltaTime: TimestampIts (ms since 2004, TAI = UTC + 5 leap seconds since then) mod 65536
    lag_ms = {}
    for epoch, gdt in rows:
        t_ms = round(float(epoch) * 1000)
        lag_ms[t_ms] = (generation_delta_time(round((float(epoch) - 1_704_067_200.0) * 1e9), 1_704_067_200.0)
                        - int(gdt)) % 65536
    window = {t: lag for t, lag in lag_ms.items() if 1_704_067_200_000 + FROM_S * 1000 + 10 <= t
              < 1_704_067_200_000 + TO_S * 1000}
    before = {t: lag for t, lag in lag_ms.items() if t < 1_704_067_200_000 + FROM_S * 1000}
    assert len(window) >= 35 and all(delay_ms <= lag <= delay_ms + 5 for lag in window.values())
    assert len(before) >= 15 and all(lag <= 5 for lag in before.values())


@pytest.fixture(scope="module")
def pms(attacked: Path) -> list[dict[str, int]]:
    """The captured platooning messages: tshark dissects GeoNetworking and BTP and hands out our message as data,
    decoded here with our codec (with the GeoNetworking source position's longitude)."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark (Wireshark) is not installed")
    args = ["tshark", "-r", str(attacked / "v2x.pcap"), "-Y", f"btpb.dstport == {BTP_PORT_PM}", "-T", "fields",
            "-E", "separator=|", "-e", "geonw.src_pos.long", "-e", "data.data"]
    lines = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True).stdout.splitlines()
    codec = PmCodec()
    out = []
    for line in lines:
        lon, payload = line.split("|")
        out.append({**read_pm(codec.decode(bytes.fromhex(payload))), "gn_lon": int(lon)})
    return out


def test_a_forged_leader_claims_the_leaders_id_position_and_acceleration(pms: list[dict[str, int]]) -> None:
    """Its PMs carry the leader's station id (1), position in platoon 0 and 3 m/s^2 as the leader's (and its
    own) desired acceleration, from its own place on the road (the GeoNetworking position, 14 robots behind)."""
    leader = [p for p in pms if p["station_id"] == 1]
    forged = [p for p in leader if p["u_leader"] == 300]
    honest = [p for p in leader if p["u_leader"] != 300]
    assert len(forged) >= 30 and len(honest) >= 30
    assert all(p["platoon_index"] == 0 and p["u_des"] == 300 for p in forged)
    assert all(p["platoon_index"] == 255 for p in honest)  # the leader's: no platoon columns in this run
    assert max(p["gn_lon"] for p in forged) < min(p["gn_lon"] for p in honest)  # behind it (the road runs east)


def test_a_forged_maneuver_request_is_on_the_air(pms: list[dict[str, int]]) -> None:
    mine = [p for p in pms if p["station_id"] == _station("forged_maneuver")]
    forged = [p for p in mine if p["maneuver"] == MANEUVER_STATES.index("split_request")]
    assert len(forged) >= 30  # 10 Hz for 4 s
    assert all(p["maneuver_peer"] == 1 and p["platoon_index"] == 3 for p in forged)
    assert all(p["maneuver"] == 15 and p["maneuver_peer"] == -1 for p in mine if p not in forged)  # honest: none
