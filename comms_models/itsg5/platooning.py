"""The platooning message (PM): its ASN.1 module (``platooning.asn``, UPER through asn1tools), the vectorised SI <->
wire conversion of its fields, and the values a receiver reconstructs.

Fields (SI inside, wire units only here): ``u_des`` and ``u_leader`` [m/s^2] in 0.01 m/s^2 (-16..16, clamped),
``v`` [m/s] as |v| in 0.01 m/s, ``platoon_id`` (0..4294967294), ``platoon_index`` (0 = leader, ..254),
``maneuver`` (0..14) and ``maneuver_peer`` (a station id). NaN in, or a value the field cannot hold, is sent as the
field's "unavailable" (the peer as absent) and comes back as NaN.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import asn1tools
import numpy as np

SPEC_PATH = Path(__file__).with_name("platooning.asn")

PROTOCOL_VERSION_PM = 1  # first version of our module
MESSAGE_ID_PM = 200  # outside the ETSI-assigned messageID values (TS 102 894-2)
BTP_PORT_PM = 7001  # BTP-B destination port: outside the 2001.. block of well-known ports (TS 103 248)

ACCEL_MAX = 1600  # DesiredAcceleration: +-16 m/s^2 in 0.01 m/s^2
ACCEL_UNAVAILABLE = 1601
SPEED_MAX = 16382
SPEED_UNAVAILABLE = 16383
PLATOON_ID_UNAVAILABLE = 4_294_967_295
INDEX_UNAVAILABLE = 255
MANEUVER_UNAVAILABLE = 15
STATION_ID_MAX = 4_294_967_295
PEER_NONE = -1  # wire column value for an absent maneuverPeer

SI_KEYS = ("u_des", "u_leader", "v", "platoon_id", "platoon_index", "maneuver", "maneuver_peer")
"""The PM's fields in SI (the columns ``to_wire`` reads and ``from_wire`` returns)."""


@functools.cache
def pm_spec() -> Any:
    """The compiled ``platooning.asn`` (UPER), compiled on first use and shared by the process."""
    return asn1tools.compile_files(str(SPEC_PATH), "uper")


def _scaled(x: np.ndarray, scale: float, hi: int, unavailable: int, lo: int) -> np.ndarray:
    """``x * scale`` rounded and clamped to [lo, hi]; NaN -> ``unavailable`` (int64)."""
    x = np.asarray(x, np.float64)
    nan = np.isnan(x)  # infinities clamp like any large value
    scaled = np.clip(np.where(nan, 0.0, x), lo / scale, hi / scale) * scale
    return np.where(nan, np.int64(unavailable), np.rint(scaled).astype(np.int64))


def _code(x: np.ndarray, hi: int, unavailable: int) -> np.ndarray:
    """An integer code in 0..hi; NaN, non-integers and values outside -> ``unavailable`` (int64)."""
    x = np.asarray(x, np.float64)
    ok = np.isfinite(x) & (x >= 0) & (x <= hi)
    ok &= np.where(ok, x, 0.0) == np.rint(np.where(ok, x, 0.0))
    return np.where(ok, np.where(ok, x, 0.0).astype(np.int64), np.int64(unavailable))


def to_wire(si: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """SI columns (``SI_KEYS``) -> int64 wire columns of the same names (``maneuver_peer``: ``PEER_NONE`` when
    absent)."""
    return {
        "u_des": _scaled(si["u_des"], 100.0, ACCEL_MAX, ACCEL_UNAVAILABLE, -ACCEL_MAX),
        "u_leader": _scaled(si["u_leader"], 100.0, ACCEL_MAX, ACCEL_UNAVAILABLE, -ACCEL_MAX),
        "v": _scaled(np.abs(np.asarray(si["v"], np.float64)), 100.0, SPEED_MAX, SPEED_UNAVAILABLE, 0),
        "platoon_id": _code(si["platoon_id"], PLATOON_ID_UNAVAILABLE - 1, PLATOON_ID_UNAVAILABLE),
        "platoon_index": _code(si["platoon_index"], INDEX_UNAVAILABLE - 1, INDEX_UNAVAILABLE),
        "maneuver": _code(si["maneuver"], MANEUVER_UNAVAILABLE - 1, MANEUVER_UNAVAILABLE),
        "maneuver_peer": _code(si["maneuver_peer"], STATION_ID_MAX, PEER_NONE),
    }


def from_wire(wire: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Wire columns -> float64 SI columns; "unavailable" (absent peer) -> NaN."""

    def restore(name: str, unavailable: int, divisor: float = 1.0) -> np.ndarray:
        q = np.asarray(wire[name], np.int64)
        return np.where(q == unavailable, np.nan, q / divisor)

    return {
        "u_des": restore("u_des", ACCEL_UNAVAILABLE, 100.0),
        "u_leader": restore("u_leader", ACCEL_UNAVAILABLE, 100.0),
        "v": restore("v", SPEED_UNAVAILABLE, 100.0),
        "platoon_id": restore("platoon_id", PLATOON_ID_UNAVAILABLE),
        "platoon_index": restore("platoon_index", INDEX_UNAVAILABLE),
        "maneuver": restore("maneuver", MANEUVER_UNAVAILABLE),
        "maneuver_peer": restore("maneuver_peer", PEER_NONE),
    }


def quantise_pm(si: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What a receiver reconstructs from a PM carrying ``si``: ``from_wire(to_wire(si))``."""
    return from_wire(to_wire(si))


def build_pm(station_id: int, generation_delta_time: int, wire: Mapping[str, int]) -> dict[str, Any]:
    """A PM value in asn1tools' form from one row of ``to_wire`` (scalars)."""
    params: dict[str, Any] = {
        "generationDeltaTime": int(generation_delta_time),
        "platoonId": int(wire["platoon_id"]),
        "positionInPlatoon": int(wire["platoon_index"]),
        "desiredAcceleration": int(wire["u_des"]),
        "leaderDesiredAcceleration": int(wire["u_leader"]),
        "speed": int(wire["v"]),
        "maneuverState": int(wire["maneuver"]),
    }
    if int(wire["maneuver_peer"]) != PEER_NONE:
        params["maneuverPeer"] = int(wire["maneuver_peer"])
    return {"header": {"protocolVersion": PROTOCOL_VERSION_PM, "messageID": MESSAGE_ID_PM,
                       "stationID": int(station_id)}, "pm": params}


def read_pm(pm: Mapping[str, Any]) -> dict[str, int]:
    """The wire columns of a decoded PM (the inverse of ``build_pm``), plus ``station_id``, ``message_id``,
    ``protocol_version`` and ``generation_delta_time``."""
    p = pm["pm"]
    return {
        "station_id": pm["header"]["stationID"],
        "message_id": pm["header"]["messageID"],
        "protocol_version": pm["header"]["protocolVersion"],
        "generation_delta_time": p["generationDeltaTime"],
        "platoon_id": p["platoonId"],
        "platoon_index": p["positionInPlatoon"],
        "u_des": p["desiredAcceleration"],
        "u_leader": p["leaderDesiredAcceleration"],
        "v": p["speed"],
        "maneuver": p["maneuverState"],
        "maneuver_peer": p.get("maneuverPeer", PEER_NONE),
    }


class PmCodec:
    """Encodes and decodes whole PMs in unaligned PER; encoding checks the value ranges."""

    def __init__(self) -> None:
        self._spec = pm_spec()

    def encode(self, pm: Mapping[str, Any]) -> bytes:
        """A PM value (as from ``build_pm``) -> UPER bytes."""
        # build_pm gives integers only: the type check would find nothing
        return bytes(self._spec.encode("PlatooningMessage", pm, check_types=False, check_constraints=True))

    def decode(self, data: bytes) -> dict[str, Any]:
        """UPER bytes -> the PM value."""
        return self._spec.decode("PlatooningMessage", data)

    def sizes(self) -> dict[bool, int]:
        """Encoded length [bytes] without and with a maneuver peer (UPER of these fields has no other variation)."""
        fields = {"platoon_id": 0, "platoon_index": 0, "u_des": 0, "u_leader": 0, "v": 0, "maneuver": 0}
        return {peer: len(self.encode(build_pm(0, 0, {**fields, "maneuver_peer": 0 if peer else PEER_NONE})))
                for peer in (False, True)}
