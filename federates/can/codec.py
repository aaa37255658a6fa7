"""The bridge's frames as the DBC (``coopsim.dbc``) defines them: state frames out, command frames in.

Bus layout: one shared bus; every message has a base id and each robot a slot, its station id (1-255), so a
robot's frames are ``base + slot`` (Command 0x100, VehicleState 0x200, VehicleSteerGap 0x300). The DBC holds each
message once, at slot 0, and is loaded with ``frame_id_mask = 0x700``. Signals at their ``NotGiven`` or
``NotAvailable`` value (the DBC's value tables) mean "no value" (NaN).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .e2e import checksum_ok, frame_checksum

DBC_PATH = Path(__file__).with_name("coopsim.dbc")
FRAME_ID_MASK = 0x700
"""Id bits that name the message; the low 8 bits are the robot's slot."""
SLOT_BITS = 8
MAX_SLOT = (1 << SLOT_BITS) - 1
"""Largest robot slot (station id) the id space holds: 255 robots per bus."""
COMMAND_BASE, STATE_BASE, STEER_GAP_BASE = 0x100, 0x200, 0x300
COMMAND_FIELDS = {"TargetSpeed": "speed", "TargetAccel": "accel", "SteeringAngle": "steer"}
"""Command signal -> field of the command port."""


def load_dbc(path: Path = DBC_PATH) -> Any:
    """The DBC as a cantools database that finds a message by any of its robots' ids."""
    import cantools

    return cantools.database.load_file(str(path), frame_id_mask=FRAME_ID_MASK)


def _no_value(signal: Any) -> int | None:
    """The raw value the DBC's value table names NotGiven / NotAvailable, if any."""
    for raw, label in (signal.choices or {}).items():
        if str(label) in ("NotGiven", "NotAvailable"):
            return int(raw)
    return None


@dataclass(frozen=True)
class _Signal:
    name: str
    scale: float
    offset: float
    minimum: float
    maximum: float
    raw_min: int
    raw_max: int
    no_value: int | None

    @classmethod
    def of(cls, signal: Any) -> _Signal:
        bits = signal.length
        raw_min, raw_max = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signal.is_signed else (0, (1 << bits) - 1)
        return cls(signal.name, float(signal.scale), float(signal.offset), float(signal.minimum),
                   float(signal.maximum), raw_min, raw_max, _no_value(signal))

    def raw(self, value: float) -> int:
        """The raw integer of a physical value: rounded, saturated to the DBC's range; NaN -> no value."""
        if not math.isfinite(value):
            if self.no_value is not None and math.isnan(value):
                return self.no_value
            value = self.maximum if value > 0 else self.minimum
        value = min(max(value, self.minimum), self.maximum)
        return min(max(round((value - self.offset) / self.scale), self.raw_min), self.raw_max)

    def physical(self, raw: int) -> float:
        """The physical value of a raw integer (NaN for the no-value code)."""
        return math.nan if raw == self.no_value else raw * self.scale + self.offset

    def in_range(self, raw: int) -> bool:
        """Whether a raw value is the no-value code or within the DBC's [minimum, maximum]."""
        if raw == self.no_value:
            return True
        value = raw * self.scale + self.offset
        tol = 1e-9 * max(1.0, abs(value))
        return self.minimum - tol <= value <= self.maximum + tol


@dataclass(frozen=True)
class Command:
    """One accepted command frame, in SI units (NaN: not given)."""

    speed: float
    accel: float
    steer: float
    counter: int


class Codec:
    """Encodes the state frames and checks and decodes command frames, from the DBC."""

    def __init__(self, path: Path = DBC_PATH) -> None:
        self.db = load_dbc(path)
        self.command = self.db.get_message_by_frame_id(COMMAND_BASE)
        self.state = self.db.get_message_by_frame_id(STATE_BASE)
        self.steer_gap = self.db.get_message_by_frame_id(STEER_GAP_BASE)
        for message in (self.command, self.state, self.steer_gap):
            if message.length != 8 or message.is_extended_frame:
                raise ValueError(f"{message.name}: the bridge expects 8-byte standard frames")
        self._signals = {m.name: {s.name: _Signal.of(s) for s in m.signals}
                         for m in (self.command, self.state, self.steer_gap)}
        self._cmd = self._signals[self.command.name]

    def encode(self, message: Any, slot: int, values: dict[str, float], counter: int) -> tuple[int, bytes]:
        """(frame id, payload) of ``message`` for robot ``slot`` with physical ``values``, counter and checksum."""
        signals = self._signals[message.name]
        raw = {name: signals[name].raw(value) for name, value in values.items()}
        raw["Counter"], raw["Checksum"] = counter, 0
        frame_id = message.frame_id + slot
        payload = bytearray(message.encode(raw, scaling=False, strict=False))
        payload[7] = frame_checksum(frame_id, payload)
        return frame_id, bytes(payload)

    def check_command(self, frame_id: int, data: bytes) -> tuple[str | None, dict[str, int] | None]:
        """(reason it is malformed or None, raw signals): length and checksum; counter and range come later."""
        if len(data) != self.command.length:
            return "bad_length", None
        if not checksum_ok(frame_id, data):
            return "bad_checksum", None
        return None, self.command.decode(data, decode_choices=False, scaling=False)

    def command_of(self, raw: dict[str, int]) -> Command | None:
        """The command of checked raw signals; None if a value lies outside the DBC's range."""
        if not all(self._cmd[name].in_range(int(raw[name])) for name in COMMAND_FIELDS):
            return None
        speed, accel, steer = (self._cmd[name].physical(int(raw[name])) for name in COMMAND_FIELDS)
        return Command(speed, accel, steer, int(raw["Counter"]))

    def encode_command(self, slot: int, counter: int, speed: float = math.nan, accel: float = math.nan,
                       steer: float = math.nan) -> tuple[int, bytes]:
        """A command frame (what an ECU sends): for tests, benchmarks and scripts."""
        return self.encode(self.command, slot, {"TargetSpeed": speed, "TargetAccel": accel, "SteeringAngle": steer},
                           counter)
