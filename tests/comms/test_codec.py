"""The CAM codec: sizes and bit layout per EN 302 637-2 / TS 102 894-2, round trips, and time stamps."""

from __future__ import annotations

import struct
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from comms_models.itsg5 import quantise as q
from comms_models.itsg5.codec import (
    CamCodec,
    build_cam,
    cam_spec,
    generation_delta_time,
    read_cam,
    timestamp_its,
)

KNOWN = {
    "latitude": 481370000,
    "longitude": 115750000,
    "heading": 728,
    "speed": 1234,
    "drive_direction": 0,
    "longitudinal_acceleration": -15,
    "yaw_rate": -286,
    "curvature": -40,
}


@pytest.fixture(scope="module")
def codec() -> CamCodec:
    return CamCodec()


def bits(data: bytes) -> str:
    return "".join(f"{byte:08b}" for byte in data)


def test_spec_is_compiled_once() -> None:
    assert cam_spec() is cam_spec()
    assert CamCodec()._spec is CamCodec()._spec


def test_high_frequency_cam_is_41_bytes_and_round_trips(codec: CamCodec) -> None:
    cam = build_cam(4242, 5, 12345, KNOWN, low_frequency=False)
    data = codec.encode(cam)
    assert len(data) == 41  # EN 302 637-2: a high-frequency-only CAM is about 41 bytes in UPER
    decoded = codec.decode(data)
    assert decoded == cam
    fields = read_cam(decoded)
    assert {k: fields[k] for k in KNOWN} == KNOWN
    assert (fields["station_id"], fields["station_type"], fields["generation_delta_time"]) == (4242, 5, 12345)
    assert "path_history" not in fields


def test_bit_layout_follows_the_standard(codec: CamCodec) -> None:
    """Header, generation time, presence bits and the position offsets, read bit by bit."""
    sid, gdt = 0xDEADBEEF, 54321
    data = codec.encode(build_cam(sid, 5, gdt, KNOWN, low_frequency=True))
    # ItsPduHeader: protocolVersion 2 (8 bits), messageID cam = 2 (8 bits), StationID (32 bits); then
    # GenerationDeltaTime (16 bits).
    assert data[:8] == struct.pack("!BBIH", 2, 2, sid, gdt)
    b = bits(data)
    # CamParameters: extension bit, lowFrequency present, specialVehicle absent; BasicContainer extension bit.
    assert b[64:68] == "0100"
    assert int(b[68:76], 2) == 5  # StationType (0..255)
    # Latitude (-900000000..900000001): 31 bits, offset from the lower bound; Longitude: 32 bits likewise.
    assert int(b[76:107], 2) == KNOWN["latitude"] + 900_000_000
    assert int(b[107:139], 2) == KNOWN["longitude"] + 1_800_000_000


def test_low_frequency_cam_with_23_path_points_is_241_bytes(codec: CamCodec) -> None:
    path = [(i * 10, -i * 20, i + 1) for i in range(23)]
    data = codec.encode(build_cam(7, 5, 0, KNOWN, low_frequency=True, path_history=path))
    assert len(data) == 241  # the known UPER size of a CAM with an LF container and 23 path points
    fields = read_cam(codec.decode(data))
    assert fields["path_history"] == path


def test_path_point_without_time(codec: CamCodec) -> None:
    data = codec.encode(build_cam(7, 5, 0, KNOWN, low_frequency=True, path_history=[(1, 2, None)]))
    assert read_cam(codec.decode(data))["path_history"] == [(1, 2, None)]


def test_missing_fields_are_sent_unavailable(codec: CamCodec) -> None:
    fields = read_cam(codec.decode(codec.encode(build_cam(1, 5, 0, {}, low_frequency=False))))
    unavailable = {
        "latitude": 900000001,
        "longitude": 1800000001,
        "altitude": 800001,
        "heading": 3601,
        "speed": 16383,
        "longitudinal_acceleration": 161,
        "yaw_rate": 32767,
        "curvature": 1023,
        "vehicle_length": 1023,
        "vehicle_width": 62,
    }
    assert {k: fields[k] for k in unavailable} == unavailable


def test_road_side_unit(codec: CamCodec) -> None:
    cam = build_cam(9, 15, 0, {"latitude": 1, "longitude": -1}, low_frequency=False)
    decoded = codec.decode(codec.encode(cam))
    assert decoded["cam"]["camParameters"]["highFrequencyContainer"][0] == "rsuContainerHighFrequency"
    assert "speed" not in read_cam(decoded)
    with pytest.raises(ValueError, match="road-side unit"):
        build_cam(9, 15, 0, {}, low_frequency=True)


def test_rejects_unknown_keys_and_out_of_range_values(codec: CamCodec) -> None:
    with pytest.raises(ValueError, match="unknown ETSI keys"):
        build_cam(1, 5, 0, {"speeed": 1}, low_frequency=False)
    with pytest.raises(Exception, match="16383"):
        codec.encode(build_cam(1, 5, 0, {"speed": 20000}, low_frequency=False))


def test_numpy_integers_are_accepted(codec: CamCodec) -> None:
    etsi = q.to_etsi({"v": np.array([3.0]), "yaw": np.array([0.0])})
    row = {k: v[0] for k, v in etsi.items()}
    fields = read_cam(codec.decode(codec.encode(build_cam(np.int64(3), 5, np.int64(7), row, False))))
    assert (fields["speed"], fields["heading"], fields["station_id"]) == (300, 900, 3)


# --- SI through the real codec: exactly what quantise_si predicts ------------------------------------------

_float = st.floats(allow_nan=True, allow_infinity=True, width=64)


def _column(lo: float, hi: float) -> st.SearchStrategy[np.ndarray]:
    # Mostly realistic values, sometimes far outside the range, infinite or NaN.
    element = st.one_of(st.floats(lo, hi), st.floats(10 * lo, 10 * hi), _float)
    return hnp.arrays(np.float64, 3, elements=element)


@settings(max_examples=150, deadline=None)
@given(
    lat=_column(-90.0, 90.0),
    lon=_column(-180.0, 180.0),
    yaw=_column(-4.0, 4.0),
    v=_column(-5.0, 170.0),
    a=_column(-17.0, 17.0),
    yaw_rate=_column(-6.0, 6.0),
    kappa=_column(-0.11, 0.11),
)
def test_quantise_si_equals_the_codec_round_trip(
    lat: np.ndarray,
    lon: np.ndarray,
    yaw: np.ndarray,
    v: np.ndarray,
    a: np.ndarray,
    yaw_rate: np.ndarray,
    kappa: np.ndarray,
) -> None:
    codec = CamCodec()
    si = {"lat_deg": lat, "lon_deg": lon, "yaw": yaw, "v": v, "a": a, "yaw_rate": yaw_rate, "curvature": kappa}
    expected = q.quantise_si(si)
    etsi = q.to_etsi(si)
    rows = []
    for i in range(len(lat)):
        cam = build_cam(i, 5, 0, {k: int(col[i]) for k, col in etsi.items()}, low_frequency=i == 0)
        rows.append(read_cam(codec.decode(codec.encode(cam))))
    received = {k: np.array([row[k] for row in rows], dtype=np.int64) for k in etsi}
    got = q.from_etsi(received)
    assert set(got) == set(expected)
    for key in expected:
        # Bit-identical, NaN included.
        np.testing.assert_array_equal(got[key].view(np.int64), expected[key].view(np.int64), err_msg=key)


# --- time stamps --------------------------------------------------------------------------------------------


def test_timestamp_its_matches_the_cdd_example() -> None:
    # TS 102 894-2, TimestampIts: 2007-01-01T00:00:00.000Z is 94 694 401 000 ms (one leap second since 2004;
    # TAI-UTC was 33 s then).
    unix_ms = int(datetime(2007, 1, 1, tzinfo=UTC).timestamp()) * 1000
    assert timestamp_its(unix_ms, tai_utc_s=33) == 94_694_401_000


def test_generation_delta_time_for_a_known_instant() -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
    # 2004-01-01 -> 2024-01-01 is 7305 days; 5 leap seconds (TAI-UTC 32 s -> 37 s) in between.
    its_ms = (7305 * 86400 + 5) * 1000
    assert its_ms == 631_152_005_000
    assert generation_delta_time(0, start) == its_ms % 65536 == 20360
    assert generation_delta_time(1_500_999_999, start) == (its_ms + 1500) % 65536  # ms are truncated
    # It wraps at 65536 ms.
    t_wrap = (65536 - 20360) * 1_000_000
    assert generation_delta_time(t_wrap, start) == 0
    ts = np.array([0, 1_000_000, t_wrap], dtype=np.int64)
    np.testing.assert_array_equal(generation_delta_time(ts, start), [20360, 20361, 0])
