"""The CAN bridge's checksum and counter against values computed from their definitions, not from the code.

CRC-8 SAE J1850 (width 8, poly 0x1D, init 0xFF, not reflected, xorout 0xFF): the catalogue's check value over
ASCII "123456789" is 0x4B (G. Cook, "Catalogue of parametrised CRC algorithms", CRC-8/SAE-J1850), and AUTOSAR's
CRC library specification (AUTOSAR_SWS_CRCLibrary, "8-bit SAE J1850 CRC Calculation") lists the results for its
test vectors, used below. One value is worked by hand: CRC of the single byte 0x00.

    register 0xFF ^ 0x00 = 0xFF; eight MSB-first shifts, XOR 0x1D when the bit shifted out is 1:
    FF -> E3 -> DB -> AB -> 4B -> 96 -> 31 -> 62 -> C4; final XOR 0xFF: 0x3B
"""

from __future__ import annotations

import pytest

from federates.can.codec import Codec
from federates.can.e2e import checksum_ok, counter_step, crc8_sae_j1850, frame_checksum, next_counter

AUTOSAR_VECTORS = [
    ("00 00 00 00", 0x59),
    ("F2 01 83", 0x37),
    ("0F AA 00 55", 0x79),
    ("00 FF 55 11", 0xB8),
    ("33 22 55 AA BB CC DD EE FF", 0xCB),
    ("92 6B 55", 0x8C),
    ("FF FF FF FF", 0x74),
]


def test_crc8_sae_j1850_catalogue_check_value():
    assert crc8_sae_j1850(b"123456789") == 0x4B


@pytest.mark.parametrize(("data", "crc"), AUTOSAR_VECTORS)
def test_crc8_sae_j1850_autosar_vectors(data, crc):
    assert crc8_sae_j1850(bytes.fromhex(data)) == crc


def test_crc8_of_one_zero_byte_worked_by_hand():
    assert crc8_sae_j1850(b"\x00") == 0x3B


def test_the_frame_checksum_covers_the_id_little_endian_then_bytes_0_to_6():
    # id 0x000 and seven zero data bytes are nine zero bytes; byte 7 is not covered
    assert frame_checksum(0x000, bytes(7) + b"\xAA") == crc8_sae_j1850(bytes(9))
    # the AUTOSAR vector "33 22 55 AA BB CC DD EE FF" read as id 0x2233 (LE: 33 22) and data 55 AA BB CC DD EE FF
    assert frame_checksum(0x2233, bytes.fromhex("55 AA BB CC DD EE FF 00")) == 0xCB
    assert checksum_ok(0x2233, bytes.fromhex("55 AA BB CC DD EE FF CB"))
    assert not checksum_ok(0x2234, bytes.fromhex("55 AA BB CC DD EE FF CB"))  # another id: masquerade caught
    assert not checksum_ok(0x2233, bytes.fromhex("55 AA BB CC DD EE FF"))  # 7 bytes


def test_the_counter_counts_modulo_16():
    assert [next_counter(c) for c in (0, 1, 14, 15)] == [1, 2, 15, 0]
    assert counter_step(15, 0) == 1 and counter_step(3, 3) == 0 and counter_step(3, 5) == 2
    assert counter_step(0, 15) == 15  # one back is fifteen ahead: a jump, never "the next"


def test_a_command_frame_byte_by_byte():
    """TargetSpeed 1.5 m/s = raw 150 = 0x0096 (LE 96 00), TargetAccel and SteeringAngle NotGiven = -32768 = 0x8000
    (LE 00 80), counter 3 in the low nibble of byte 6, checksum over id 0x102 (02 01) and bytes 0-6."""
    frame_id, data = Codec().encode_command(2, 3, speed=1.5)
    assert frame_id == 0x102
    assert data[:7] == bytes.fromhex("96 00 00 80 00 80 03")
    assert data[7] == crc8_sae_j1850(bytes.fromhex("02 01 96 00 00 80 00 80 03"))


def test_state_values_are_scaled_rounded_and_saturated_to_the_dbc():
    codec = Codec()
    frame_id, data = codec.encode(codec.state, 5, {"Speed": 1.234, "Acceleration": -0.5, "YawRate": 99.0}, 15)
    assert frame_id == 0x205
    # 1.234 m/s / 0.01 = 123 (0x007B); -0.5 / 0.001 = -500 (0xFE0C); 99 rad/s saturates at 3.2767 = 0x7FFF
    assert data[:7] == bytes.fromhex("7B 00 0C FE FF 7F 0F")
    frame_id, data = codec.encode(codec.steer_gap, 5, {"SteeringAngle": -0.1, "Gap": float("nan"),
                                                       "GapRate": float("nan")}, 0)
    # -0.1 rad / 0.0001 = -1000 (0xFC18); no target: Gap 0xFFFF, GapRate 0x8000 (NotAvailable)
    assert frame_id == 0x305 and data[:7] == bytes.fromhex("18 FC FF FF 00 80 00")
