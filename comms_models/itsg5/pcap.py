"""Captures of the simulated CAM traffic that standard tools (Wireshark, tshark) dissect, and frame sizes.

A captured frame is Ethernet II carrying GeoNetworking (EN 302 636-4-1): basic header, common header, the
single-hop-broadcast (SHB) extended header with the sender's long position vector, then BTP-B (EN 302 636-5-1)
to port 2001 and the UPER-encoded CAM. On air the same packet rides in an 802.11 QoS data frame with LLC/SNAP;
``frame_length_80211`` gives that length for the airtime computation.
"""

from __future__ import annotations

import struct
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

ETHERTYPE_GEONETWORKING = 0x8947
LINKTYPE_ETHERNET = 1  # pcap link type
BTP_PORT_CAM = 2001  # EN 302 636-5-1, well-known BTP port of the CA basic service
BROADCAST_MAC = b"\xff" * 6

# EN 302 636-4-1 header fields.
GN_VERSION = 1
GN_NH_COMMON = 1  # basic header next header: common header (unsecured)
GN_LIFETIME_1S = (1 << 2) | 1  # lifetime multiplier 1, base 1 s
GN_NH_BTP_B = 2  # common header next header: BTP-B
GN_HT_TSB = 5  # header type: topologically-scoped broadcast
GN_HST_SINGLE_HOP = 0  # header subtype of TSB: single hop
GN_TC_DP2 = 2  # traffic class id = DCC profile DP2 (best effort), store-carry-forward and offload off
GN_FLAG_MOBILE = 0x80  # common header flags, bit 0 (MSB): the station is mobile
STATION_TYPE_RSU = 15

# 802.11 frame around one CAM [bytes]
# (IEEE 802.11p QoS data frame with LLC/SNAP, ETSI EN 302 636-4-1 GN headers, EN 302 636-5-1 BTP-B).
MAC_QOS_HEADER = 26
LLC_SNAP = 8
GN_BASIC = 4
GN_COMMON = 8
GN_SHB = 28
BTP_B = 4
FCS = 4


def frame_length_80211(cam_len: int, security_bytes: int = 0) -> int:
    """Length L [bytes] of the 802.11 frame carrying a CAM of ``cam_len`` bytes (airtime input)."""
    return MAC_QOS_HEADER + LLC_SNAP + GN_BASIC + GN_COMMON + GN_SHB + BTP_B + cam_len + security_bytes + FCS


def station_mac(station_id: int) -> bytes:
    """A locally administered unicast MAC address made from the station id (02:00 + 32-bit id)."""
    return b"\x02\x00" + struct.pack("!I", station_id & 0xFFFFFFFF)


def long_position_vector(
    station_id: int,
    station_type: int,
    tst_ms: int,
    lat_e7: int,
    lon_e7: int,
    speed_cms: int,
    heading_dd: int,
) -> bytes:
    """GeoNetworking long position vector (24 bytes, EN 302 636-4-1 v1.3.1, 9.5.2).

    GN_ADDR (manual 0, station type, MAC), timestamp (TAI ms mod 2^32), latitude and longitude
    (0.1 micro-degree), position-accuracy flag 0 with a signed 15-bit speed (0.01 m/s), heading (0.1 deg).
    """
    gn_addr_head = (station_type & 0x1F) << 10  # M(1) | ST(5) | reserved(10)
    speed = max(-(1 << 14), min((1 << 14) - 1, int(speed_cms))) & 0x7FFF
    heading = int(heading_dd) if 0 <= heading_dd < 3600 else 0  # the LPV has no "unavailable" heading
    return struct.pack(
        "!H6sIiiHH",
        gn_addr_head,
        station_mac(station_id),
        tst_ms & 0xFFFFFFFF,
        int(lat_e7),
        int(lon_e7),
        speed,
        heading,
    )


def cam_frame(
    station_id: int,
    lat_e7: int,
    lon_e7: int,
    speed_cms: int,
    heading_dd: int,
    cam_bytes: bytes,
    t_ms: int,
    station_type: int = 5,
    btp_port: int = BTP_PORT_CAM,
) -> bytes:
    """One Ethernet frame: GN SHB + BTP-B carrying ``cam_bytes`` from ``station_id``.

    ``t_ms`` is the TimestampIts of the position (TAI ms since 2004), ``heading_dd`` in 0.1 deg. ``btp_port``:
    the BTP-B destination port (another message, e.g. the platooning message, rides in the same framing).
    """
    payload_len = BTP_B + len(cam_bytes)
    ethernet = BROADCAST_MAC + station_mac(station_id) + struct.pack("!H", ETHERTYPE_GEONETWORKING)
    basic = bytes([(GN_VERSION << 4) | GN_NH_COMMON, 0, GN_LIFETIME_1S, 1])  # remaining hop limit 1
    flags = 0 if station_type == STATION_TYPE_RSU else GN_FLAG_MOBILE
    common = struct.pack(
        "!BBBBHBB",
        GN_NH_BTP_B << 4,
        (GN_HT_TSB << 4) | GN_HST_SINGLE_HOP,
        GN_TC_DP2,
        flags,
        payload_len,
        1,  # maximum hop limit: single hop
        0,
    )
    shb = long_position_vector(station_id, station_type, t_ms, lat_e7, lon_e7, speed_cms, heading_dd)
    shb += b"\x00" * 4  # reserved (DCC fields in later versions)
    btp = struct.pack("!HH", btp_port, 0)  # destination port, destination port info
    return ethernet + basic + common + shb + btp + bytes(cam_bytes)


class PcapWriter:
    """Writes frames to a classic pcap file (link type Ethernet, microsecond time stamps).

    Time stamps are simulation time plus ``start_utc_s`` (the UTC instant of simulation time 0, seconds since
    the Unix epoch), so captures show the scenario's date. Use as a context manager or call ``close``.
    """

    def __init__(self, path: str | Path, start_utc_s: float = 0.0, snaplen: int = 65535) -> None:
        self.path = Path(path)
        self._start_us = round(start_utc_s * 1_000_000)
        self._snaplen = snaplen
        self._file: BinaryIO | None = self.path.open("wb")
        # Global header: magic (microsecond resolution), version 2.4, GMT offset 0, accuracy 0.
        self._file.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, LINKTYPE_ETHERNET))
        self.frames = 0

    def write(self, t_ns: int, frame: bytes) -> None:
        """Append ``frame`` with simulation time ``t_ns`` (integer nanoseconds)."""
        if self._file is None:
            raise ValueError(f"PcapWriter({self.path}): write after close")
        seconds, micros = divmod(self._start_us + int(t_ns) // 1000, 1_000_000)
        data = bytes(frame[: self._snaplen])
        self._file.write(struct.pack("<IIII", seconds, micros, len(data), len(frame)))
        self._file.write(data)
        self.frames += 1

    def close(self) -> None:
        """Flush and close the file (idempotent)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
