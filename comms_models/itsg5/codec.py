"""CAM encoding: ASN.1 UPER through asn1tools, CAM values built from quantised ETSI integers, and time stamps.

The ASN.1 module is the project's own ``cam.asn`` (CAM of EN 302 637-2 v1.4.1 with the data elements of
TS 102 894-2 v1.3.1); it is compiled once per process. Values are in asn1tools' form: SEQUENCE -> dict,
CHOICE -> ``(name, value)``, ENUMERATED -> name, BIT STRING -> ``(bytes, number_of_bits)``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import asn1tools
import numpy as np

from . import quantise as q

SPEC_PATH = Path(__file__).with_name("cam.asn")

PROTOCOL_VERSION = 2  # ItsPduHeader.protocolVersion of CAM v1.4.1 (EN 302 637-2 v1.4.1)
MESSAGE_ID_CAM = 2  # ItsPduHeader.messageID cam(2)
STATION_TYPE_PASSENGER_CAR = 5  # StationType passengerCar(5)
STATION_TYPE_RSU = 15  # StationType roadSideUnit(15)

# Time base of TimestampIts and GenerationDeltaTime (TS 102 894-2 v1.3.1): milliseconds elapsed since
# 2004-01-01T00:00:00.000Z counting leap seconds, i.e. TAI time since that instant. TAI-UTC was 32 s then
# and is 37 s since 2017-01-01, so 5 leap seconds are added to the UTC (Unix) difference.
ITS_EPOCH_UNIX_S = 1_072_915_200  # 2004-01-01T00:00:00Z as a Unix time
TAI_UTC_AT_ITS_EPOCH_S = 32
TAI_UTC_S = 37

# Defaults of the fields the simulation does not model: the standard's "unavailable" codes.
_ALTITUDE_UNAVAILABLE = 800_001  # AltitudeValue
_SEMI_AXIS_UNAVAILABLE = 4095  # SemiAxisLength
_HEADING_CONFIDENCE_UNAVAILABLE = 127  # HeadingConfidence
_SPEED_CONFIDENCE_UNAVAILABLE = 127  # SpeedConfidence
_ACCELERATION_CONFIDENCE_UNAVAILABLE = 102  # AccelerationConfidence
_VEHICLE_LENGTH_UNAVAILABLE = 1023  # VehicleLengthValue
_VEHICLE_WIDTH_UNAVAILABLE = 62  # VehicleWidth
_DELTA_ALTITUDE_UNAVAILABLE = 12_800  # DeltaAltitude
_DRIVE_DIRECTIONS = ("forward", "backward", "unavailable")  # DriveDirection
_CURVATURE_MODES = ("yawRateUsed", "yawRateNotUsed", "unavailable")  # CurvatureCalculationMode

ETSI_INPUT_KEYS = frozenset(
    {
        "latitude",
        "longitude",
        "altitude",
        "heading",
        "speed",
        "drive_direction",
        "longitudinal_acceleration",
        "yaw_rate",
        "curvature",
        "curvature_calculation_mode",
        "vehicle_length",
        "vehicle_width",
    }
)
"""Keys ``build_cam`` reads from its ``etsi`` mapping (integers in TS 102 894-2 units)."""


@functools.cache
def cam_spec() -> Any:
    """The compiled ``cam.asn`` (UPER), compiled on first use and shared by the process."""
    return asn1tools.compile_files(str(SPEC_PATH), "uper")


class CamCodec:
    """Encodes and decodes whole CAMs (ItsPduHeader + CoopAwareness) in unaligned PER.

    Encoding checks the value ranges, so an out-of-range integer raises instead of producing a frame that
    other stations would misread.
    """

    def __init__(self) -> None:
        self._spec = cam_spec()

    def encode(self, cam: Mapping[str, Any]) -> bytes:
        """A CAM value (as from ``build_cam``) -> UPER bytes."""
        # build_cam gives integers only, so the type check (a third of asn1tools' encoding time) would find nothing
        return bytes(self._spec.encode("CAM", cam, check_types=False, check_constraints=True))

    def decode(self, data: bytes) -> dict[str, Any]:
        """UPER bytes -> the CAM value."""
        return self._spec.decode("CAM", data)


def _field(etsi: Mapping[str, int], key: str, default: int) -> int:
    return int(etsi[key]) if key in etsi else default


def build_cam(
    station_id: int,
    station_type: int,
    generation_delta_time: int,
    etsi: Mapping[str, int],
    low_frequency: bool,
    path_history: Iterable[tuple[int, int, int | None]] = (),
) -> dict[str, Any]:
    """Build a CAM value from integer fields in ETSI units.

    ``etsi`` holds keys of ``ETSI_INPUT_KEYS`` (scalars, e.g. one row of ``quantise.to_etsi``); a key left
    out is sent as the standard's "unavailable". A road-side unit (``station_type`` 15) gets the RSU
    high-frequency container (position only) and no low-frequency container. With ``low_frequency`` a
    vehicle's CAM carries the BasicVehicleContainerLowFrequency: vehicle role default, lights off, and
    ``path_history`` as ``(delta_latitude, delta_longitude, path_delta_time)`` points (0.1 micro-degree
    relative to the reference position, 10 ms units; ``None`` omits the time). Confidences are sent as
    unavailable.
    """
    unknown = set(etsi) - ETSI_INPUT_KEYS
    if unknown:
        raise ValueError(f"build_cam: unknown ETSI keys {sorted(unknown)}; valid: {sorted(ETSI_INPUT_KEYS)}")
    is_rsu = int(station_type) == STATION_TYPE_RSU
    if is_rsu and low_frequency:
        raise ValueError("build_cam: a road-side unit (station type 15) has no low-frequency container")

    reference_position = {
        "latitude": _field(etsi, "latitude", q.LATITUDE_UNAVAILABLE),
        "longitude": _field(etsi, "longitude", q.LONGITUDE_UNAVAILABLE),
        "positionConfidenceEllipse": {
            "semiMajorConfidence": _SEMI_AXIS_UNAVAILABLE,
            "semiMinorConfidence": _SEMI_AXIS_UNAVAILABLE,
            "semiMajorOrientation": q.HEADING_UNAVAILABLE,
        },
        "altitude": {
            "altitudeValue": _field(etsi, "altitude", _ALTITUDE_UNAVAILABLE),
            "altitudeConfidence": "unavailable",
        },
    }
    if is_rsu:
        high_frequency: tuple[str, dict[str, Any]] = ("rsuContainerHighFrequency", {})
    else:
        high_frequency = (
            "basicVehicleContainerHighFrequency",
            {
                "heading": {
                    "headingValue": _field(etsi, "heading", q.HEADING_UNAVAILABLE),
                    "headingConfidence": _HEADING_CONFIDENCE_UNAVAILABLE,
                },
                "speed": {
                    "speedValue": _field(etsi, "speed", q.SPEED_UNAVAILABLE),
                    "speedConfidence": _SPEED_CONFIDENCE_UNAVAILABLE,
                },
                "driveDirection": _DRIVE_DIRECTIONS[_field(etsi, "drive_direction", q.DRIVE_FORWARD)],
                "vehicleLength": {
                    "vehicleLengthValue": _field(etsi, "vehicle_length", _VEHICLE_LENGTH_UNAVAILABLE),
                    "vehicleLengthConfidenceIndication": "unavailable",
                },
                "vehicleWidth": _field(etsi, "vehicle_width", _VEHICLE_WIDTH_UNAVAILABLE),
                "longitudinalAcceleration": {
                    "longitudinalAccelerationValue": _field(
                        etsi, "longitudinal_acceleration", q.ACCELERATION_UNAVAILABLE
                    ),
                    "longitudinalAccelerationConfidence": _ACCELERATION_CONFIDENCE_UNAVAILABLE,
                },
                "curvature": {
                    "curvatureValue": _field(etsi, "curvature", q.CURVATURE_UNAVAILABLE),
                    "curvatureConfidence": "unavailable",
                },
                "curvatureCalculationMode": _CURVATURE_MODES[_field(etsi, "curvature_calculation_mode", 2)],
                "yawRate": {
                    "yawRateValue": _field(etsi, "yaw_rate", q.YAW_RATE_UNAVAILABLE),
                    "yawRateConfidence": "unavailable",
                },
            },
        )
    parameters: dict[str, Any] = {
        "basicContainer": {"stationType": int(station_type), "referencePosition": reference_position},
        "highFrequencyContainer": high_frequency,
    }
    if low_frequency:
        points = []
        for d_lat, d_lon, d_t in path_history:
            point: dict[str, Any] = {
                "pathPosition": {
                    "deltaLatitude": int(d_lat),
                    "deltaLongitude": int(d_lon),
                    "deltaAltitude": _DELTA_ALTITUDE_UNAVAILABLE,
                }
            }
            if d_t is not None:
                point["pathDeltaTime"] = int(d_t)
            points.append(point)
        parameters["lowFrequencyContainer"] = (
            "basicVehicleContainerLowFrequency",
            {"vehicleRole": "default", "exteriorLights": (b"\x00", 8), "pathHistory": points},
        )
    return {
        "header": {
            "protocolVersion": PROTOCOL_VERSION,
            "messageID": MESSAGE_ID_CAM,
            "stationID": int(station_id),
        },
        "cam": {"generationDeltaTime": int(generation_delta_time), "camParameters": parameters},
    }


def read_cam(cam: Mapping[str, Any]) -> dict[str, Any]:
    """The integer fields of a decoded CAM under ``build_cam``'s keys (the inverse of ``build_cam``).

    Also ``station_id``, ``station_type``, ``generation_delta_time``; for a vehicle the high-frequency fields
    (``drive_direction`` as 0/1/2), and ``path_history`` (list of tuples) when a low-frequency container came.
    """
    parameters = cam["cam"]["camParameters"]
    position = parameters["basicContainer"]["referencePosition"]
    out: dict[str, Any] = {
        "station_id": cam["header"]["stationID"],
        "station_type": parameters["basicContainer"]["stationType"],
        "generation_delta_time": cam["cam"]["generationDeltaTime"],
        "latitude": position["latitude"],
        "longitude": position["longitude"],
        "altitude": position["altitude"]["altitudeValue"],
    }
    kind, hf = parameters["highFrequencyContainer"]
    if kind == "basicVehicleContainerHighFrequency":
        out.update(
            heading=hf["heading"]["headingValue"],
            speed=hf["speed"]["speedValue"],
            drive_direction=_DRIVE_DIRECTIONS.index(hf["driveDirection"]),
            vehicle_length=hf["vehicleLength"]["vehicleLengthValue"],
            vehicle_width=hf["vehicleWidth"],
            longitudinal_acceleration=hf["longitudinalAcceleration"]["longitudinalAccelerationValue"],
            curvature=hf["curvature"]["curvatureValue"],
            curvature_calculation_mode=_CURVATURE_MODES.index(hf["curvatureCalculationMode"]),
            yaw_rate=hf["yawRate"]["yawRateValue"],
        )
    low = parameters.get("lowFrequencyContainer")
    if low is not None and low[0] == "basicVehicleContainerLowFrequency":
        out["path_history"] = [
            (
                p["pathPosition"]["deltaLatitude"],
                p["pathPosition"]["deltaLongitude"],
                p.get("pathDeltaTime"),
            )
            for p in low[1]["pathHistory"]
        ]
    return out


def timestamp_its(unix_ms: int | np.ndarray, tai_utc_s: int = TAI_UTC_S) -> int | np.ndarray:
    """TimestampIts (TS 102 894-2): ms since 2004-01-01T00:00:00Z including leap seconds, from Unix ms.

    ``tai_utc_s`` is TAI-UTC at the instant (37 s from 2017 on); the Unix clock does not count leap seconds.
    """
    return unix_ms - ITS_EPOCH_UNIX_S * 1000 + (tai_utc_s - TAI_UTC_AT_ITS_EPOCH_S) * 1000


def generation_delta_time(t_ns: int | np.ndarray, start_utc_s: float) -> int | np.ndarray:
    """GenerationDeltaTime (EN 302 637-2, B.3): TimestampIts mod 65536 at simulation time ``t_ns``.

    Simulation time 0 is the UTC instant ``start_utc_s`` (seconds since the Unix epoch); TAI-UTC = 37 s.
    Works on an int or an int64 array.
    """
    unix_ms = round(start_utc_s * 1000) + t_ns // 1_000_000
    return timestamp_its(unix_ms) % 65536
