"""End-to-end protection of the bridge's frames: a 4-bit rolling counter and a CRC-8 SAE J1850 checksum.

CRC-8 SAE J1850 as defined in the CRC catalogue (R. Williams' model, catalogued by G. Cook, "CRC-8/SAE-J1850":
width 8, poly 0x1D, init 0xFF, refin false, refout false, xorout 0xFF, check 0x4B over ASCII "123456789") and used
by AUTOSAR's CRC library (``Crc_CalculateCRC8``) and E2E profile 1. The bytes covered are the 11-bit frame id as two
bytes, little-endian (so a frame replayed under another robot's id fails the check, like the data id of the E2E
profiles), then data bytes 0 to 6; byte 7 carries the result. The counter sits in bits 48-51 (low nibble of
byte 6), so the checksum covers it.
"""

from __future__ import annotations

from collections.abc import Iterable

CRC8_POLY = 0x1D
CRC8_INIT = 0xFF
CRC8_XOROUT = 0xFF
COUNTER_MODULO = 16
CHECKSUM_BYTE = 7
"""Index of the checksum byte in an 8-byte payload."""


def _table() -> tuple[int, ...]:
    # per-byte results of the MSB-first shift register, so the run pays one lookup per byte
    out = []
    for byte in range(256):
        reg = byte
        for _ in range(8):
            reg = ((reg << 1) ^ CRC8_POLY) & 0xFF if reg & 0x80 else (reg << 1) & 0xFF
        out.append(reg)
    return tuple(out)


_TABLE = _table()


def crc8_sae_j1850(data: Iterable[int]) -> int:
    """CRC-8 SAE J1850 of ``data`` (init 0xFF, poly 0x1D, xorout 0xFF, not reflected)."""
    reg = CRC8_INIT
    for byte in data:
        reg = _TABLE[reg ^ byte]
    return reg ^ CRC8_XOROUT


def frame_checksum(frame_id: int, payload: bytes | bytearray) -> int:
    """The checksum of an 8-byte frame: CRC-8 SAE J1850 over the id (2 bytes, little-endian) and bytes 0-6."""
    reg = _TABLE[CRC8_INIT ^ (frame_id & 0xFF)]
    reg = _TABLE[reg ^ ((frame_id >> 8) & 0xFF)]
    for byte in payload[:CHECKSUM_BYTE]:
        reg = _TABLE[reg ^ byte]
    return reg ^ CRC8_XOROUT


def seal(frame_id: int, payload: bytearray) -> bytearray:
    """Write the checksum into byte 7 of ``payload`` (in place) and return it."""
    payload[CHECKSUM_BYTE] = frame_checksum(frame_id, payload)
    return payload


def checksum_ok(frame_id: int, payload: bytes | bytearray) -> bool:
    """Whether byte 7 of an 8-byte ``payload`` is its checksum."""
    return len(payload) == 8 and payload[CHECKSUM_BYTE] == frame_checksum(frame_id, payload)


def next_counter(counter: int) -> int:
    """The counter of the next frame: +1 modulo 16 (15 is followed by 0)."""
    return (counter + 1) % COUNTER_MODULO


def counter_step(previous: int, counter: int) -> int:
    """How far ``counter`` is ahead of ``previous``, modulo 16: 1 for the next frame, 0 for a repeat."""
    return (counter - previous) % COUNTER_MODULO
