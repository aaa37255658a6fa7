"""Received CAMs as bytes for ROS 2: each ``cam_rx`` row encoded as a whole CAM in UPER with the project's own codec
(``comms_models.itsg5.codec``), the frames the ITS-G5 channel puts on air, so Wireshark or asn1tools decode them.

``std_msgs/UInt8MultiArray`` layout (``docs/bridges.md``, ROS 2 section)::

    data[0:4]    sender station id, uint32 big-endian (also the CAM's ItsPduHeader.stationID)
    data[4:12]   generation time, int64 big-endian [ns of simulation time]
    data[12:20]  reception time, int64 big-endian [ns of simulation time]
    data[20:]    the CAM, UPER (ItsPduHeader + CoopAwareness, EN 302 637-2 v1.4.1)
    layout.data_offset = 20; layout.dim[0]: label = the sender's robot name, size = stride = CAM length

Positions go back from the local frame to WGS84 through the scenario's origin; the other fields are quantised as
the channel does (``comms_models.itsg5.quantise``). The CAM's generationDeltaTime is the generation time as
TimestampIts mod 65536 from ``start_utc_s``.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

import numpy as np

from comms_models.itsg5.codec import CamCodec, build_cam, generation_delta_time
from comms_models.itsg5.geo import LocalProjection
from comms_models.itsg5.quantise import to_etsi

PREFIX = struct.Struct(">Iqq")
"""sender station id, generated_ns, received_ns (big-endian): the bytes before the CAM."""
CURVATURE_MIN_SPEED_MPS = 0.1
"""Below this speed the curvature (yaw rate / speed) is sent as unavailable, as the ITS-G5 channel does."""
STATION_ID_MAX = 2**32 - 1  # StationID ::= INTEGER (0..4294967295)


class CamBytes:
    """Encodes ``cam_rx`` tables row by row (a CAM received by several robots is encoded once per call)."""

    def __init__(self, origin_lat_deg: float, origin_lon_deg: float, start_utc_s: float, station_type: int) -> None:
        self.codec = CamCodec()
        self.projection = LocalProjection(origin_lat_deg, origin_lon_deg)
        self.start_utc_s = start_utc_s
        self.station_type = station_type
        self.skipped = 0
        """Rows that cannot be a CAM (a station id outside 0..2^32-1)."""

    def encode(self, rows: Mapping[str, np.ndarray]) -> list[bytes | None]:
        """One frame (prefix + UPER CAM) per row of a ``cam_rx`` table; None where a row cannot be encoded."""
        sender = np.asarray(rows["sender"], np.int64)
        n = len(sender)
        if n == 0:
            return []
        generated = np.asarray(rows["generated_ns"], np.int64)
        received = np.asarray(rows["received_ns"], np.int64)
        x, y = np.asarray(rows["x"], np.float64), np.asarray(rows["y"], np.float64)
        v, yaw_rate = np.asarray(rows["v"], np.float64), np.asarray(rows["yaw_rate"], np.float64)
        lat, lon = self.projection.to_geodetic(x, y)
        moving = np.abs(v) >= CURVATURE_MIN_SPEED_MPS
        with np.errstate(invalid="ignore", divide="ignore"):
            curvature = np.where(moving, yaw_rate / np.where(moving, v, 1.0), np.nan)
        etsi = to_etsi({"lat_deg": np.atleast_1d(lat), "lon_deg": np.atleast_1d(lon),
                        "yaw": np.asarray(rows["yaw"], np.float64), "v": v, "a": np.asarray(rows["a"], np.float64),
                        "yaw_rate": yaw_rate, "curvature": curvature})
        done: dict[tuple[int, int], bytes] = {}
        out: list[bytes | None] = []
        for i in range(n):
            sid, gen = int(sender[i]), int(generated[i])
            if not 0 <= sid <= STATION_ID_MAX:
                self.skipped += 1
                out.append(None)
                continue
            cam = done.get((sid, gen))
            if cam is None:
                fields = {key: int(col[i]) for key, col in etsi.items()}
                fields["curvature_calculation_mode"] = 0  # yawRateUsed: curvature = yaw rate / speed
                gdt = int(generation_delta_time(gen, self.start_utc_s))
                cam = self.codec.encode(build_cam(sid, self.station_type, gdt, fields, False))
                done[(sid, gen)] = cam
            out.append(PREFIX.pack(sid, gen, int(received[i])) + cam)
        return out
