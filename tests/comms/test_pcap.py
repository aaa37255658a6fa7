"""Capture frames: header layout per EN 302 636-4-1 / 636-5-1, pcap format, and tshark's dissection as CAM."""

from __future__ import annotations

import math
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from comms_models.itsg5.codec import CamCodec, build_cam, timestamp_its
from comms_models.itsg5.pcap import PcapWriter, cam_frame, frame_length_80211, station_mac

START_UTC_S = 1_704_067_200  # 2024-01-01T00:00:00Z

# (station id, speed 0.01 m/s, heading 0.1 deg, yaw rate 0.01 deg/s, curvature 1/10000 1/m, low frequency)
STATIONS = [
    (101, 0, 900, 0, 0, True),
    (202, 1234, 45, -286, -40, False),
    (3_000_000_007, 16382, 3599, 5730, 250, False),
]


def _cam(codec: CamCodec, sid: int, speed: int, heading: int, yaw_rate: int, curvature: int, lf: bool) -> bytes:
    etsi = {
        "latitude": 481370000 + sid % 1000,
        "longitude": 115750000,
        "heading": heading,
        "speed": speed,
        "longitudinal_acceleration": -15,
        "yaw_rate": yaw_rate,
        "curvature": curvature,
    }
    path = [(10, -20, 5)] * 3 if lf else ()
    return codec.encode(build_cam(sid, 5, 1000, etsi, lf, path))


def test_frame_length_and_airtime() -> None:
    # 26 QoS MAC + 8 LLC/SNAP + 4 + 8 + 28 GN + 4 BTP-B + CAM + 4 FCS.
    assert frame_length_80211(41) == 123
    assert frame_length_80211(41, security_bytes=100) == 223
    # The reference airtime at 6 Mbit/s: T_on = 40 us + 8 us * ceil((16 + 8 L + 6) / 48) = 208 us.
    assert 40 + 8 * math.ceil((16 + 8 * frame_length_80211(41) + 6) / 48) == 208


def test_frame_layout() -> None:
    cam = bytes(range(41))
    frame = cam_frame(0x01020304, 481370000, -115750000, 1234, 728, cam, t_ms=2**32 + 7)
    assert len(frame) == 14 + 4 + 8 + 28 + 4 + 41
    assert frame[:6] == b"\xff" * 6 and frame[6:12] == station_mac(0x01020304) == b"\x02\x00\x01\x02\x03\x04"
    assert frame[12:14] == b"\x89\x47"
    # Basic header: version 1 / next header common; reserved; lifetime 1 x 1 s; remaining hop limit 1.
    assert frame[14:18] == bytes([0x11, 0x00, 0x05, 0x01])
    # Common header: next header BTP-B; TSB single hop; traffic class 2 (DP2); mobile; payload; MHL 1.
    assert frame[18:26] == bytes([0x20, 0x50, 0x02, 0x80]) + struct.pack("!H", 4 + 41) + bytes([1, 0])
    gn_addr, mid, tst, lat, lon, speed, heading = struct.unpack("!H6sIiiHH", frame[26:50])
    assert gn_addr >> 10 == 5 and mid == station_mac(0x01020304)
    assert (tst, lat, lon, speed, heading) == (7, 481370000, -115750000, 1234, 728)
    assert frame[50:54] == b"\x00" * 4
    assert frame[54:58] == struct.pack("!HH", 2001, 0)
    assert frame[58:] == cam


def test_pcap_file_format(tmp_path: Path) -> None:
    path = tmp_path / "cam.pcap"
    with PcapWriter(path, start_utc_s=START_UTC_S) as writer:
        writer.write(0, b"\x00" * 60)
        writer.write(1_234_567_891, b"\x01" * 70)
    data = path.read_bytes()
    assert struct.unpack("<IHHiIII", data[:24]) == (0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    assert struct.unpack("<IIII", data[24:40]) == (START_UTC_S, 0, 60, 60)
    second = 40 + 60
    assert struct.unpack("<IIII", data[second : second + 16]) == (START_UTC_S + 1, 234_567, 70, 70)
    assert len(data) == second + 16 + 70
    with pytest.raises(ValueError, match="after close"):
        writer.write(0, b"")


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark (Wireshark) is not installed")
def test_tshark_dissects_the_frames_as_cam(tmp_path: Path) -> None:
    codec = CamCodec()
    path = tmp_path / "cam.pcap"
    with PcapWriter(path, start_utc_s=START_UTC_S) as writer:
        for i, (sid, speed, heading, yaw_rate, curvature, lf) in enumerate(STATIONS):
            cam = _cam(codec, sid, speed, heading, yaw_rate, curvature, lf)
            t_ns = i * 100_000_000
            its_ms = timestamp_its(START_UTC_S * 1000 + t_ns // 1_000_000)
            writer.write(t_ns, cam_frame(sid, 481370000, 115750000, speed, heading, cam, its_ms))

    fields = ["its.stationID", "its.speedValue", "its.headingValue", "its.yawRateValue", "its.curvatureValue"]
    fields += ["btpb.dstport", "frame.protocols"]
    args = ["tshark", "-r", str(path), "-T", "fields", "-E", "separator=|"]
    for field in fields:
        args += ["-e", field]
    run = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
    rows = [line.split("|") for line in run.stdout.splitlines()]
    assert len(rows) == len(STATIONS)
    for row, (sid, speed, heading, yaw_rate, curvature, _) in zip(rows, STATIONS, strict=True):
        assert row[:6] == [str(sid), str(speed), str(heading), str(yaw_rate), str(curvature), "2001"]
        assert row[6] == "eth:ethertype:gnw:btpb:its"

    verbose = subprocess.run(["tshark", "-r", str(path), "-V"], capture_output=True, text=True, timeout=60)
    text = verbose.stdout
    assert text.count("CoopAwareness") == len(STATIONS)
    assert "basicVehicleContainerLowFrequency" in text and "pathHistory: 3 items" in text
    assert "Single-hop broadcast (SHB)" in text
    assert "Malformed" not in text and "Expert Info" not in text


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark (Wireshark) is not installed")
def test_tshark_reads_the_containers_the_project_does_not_fill(tmp_path: Path) -> None:
    """The special-vehicle container types in cam.asn match the standard's too (encoded by hand here)."""
    codec = CamCodec()
    cam = build_cam(55, 10, 0, {"latitude": 481370000, "longitude": 115750000}, low_frequency=False)
    cam["cam"]["camParameters"]["specialVehicleContainer"] = (
        "emergencyContainer",
        {
            "lightBarSirenInUse": (b"\xc0", 2),
            "incidentIndication": {"causeCode": 95, "subCauseCode": 1},
            "emergencyPriority": (b"\x80", 2),
        },
    )
    data = codec.encode(cam)
    assert codec.decode(data) == cam
    path = tmp_path / "special.pcap"
    with PcapWriter(path) as writer:
        writer.write(0, cam_frame(55, 481370000, 115750000, 0, 0, data, 0, station_type=10))
    text = subprocess.run(["tshark", "-r", str(path), "-V"], capture_output=True, text=True, timeout=60).stdout
    assert "emergencyContainer" in text and "emergencyVehicleApproaching (95)" in text
    assert "requestForRightOfWay: True" in text
    assert "Malformed" not in text and "Expert Info" not in text
