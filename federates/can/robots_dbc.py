"""A DBC for one scenario's bus: every robot's frames at their real arbitration ids.

``coopsim.dbc`` holds each message once, at slot 0, and is meant to be loaded with ``frame_id_mask = 0x700``;
tools that take a DBC as it is (a bus monitor, Wireshark, SavvyCAN, cantools without the mask) then decode no
frame of a run, whose ids are ``base + station id``. The DBC written here is the same contract spelled out for a
given set of robots: one copy of each message per robot at ``base + slot``, named after the robot, with the
bridge's period as its cycle time. ``Command`` copies are written only for the robots the bridge drives (commands
to any other robot are ignored by the bridge).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .codec import COMMAND_BASE, DBC_PATH, MAX_SLOT

_BASES = {"Command": COMMAND_BASE, "VehicleState": 0x200, "VehicleSteerGap": 0x300}


@dataclass(frozen=True)
class BusRobot:
    """A robot on the bus: its station id (the slot), its name, and whether the bridge takes its commands."""

    slot: int
    name: str
    driven: bool


def message_suffix(name: str) -> str:
    """A robot name as a DBC identifier suffix (letters, digits, underscores)."""
    return re.sub(r"\W", "_", name, flags=re.ASCII) or "robot"


def robots_dbc(robots: Sequence[BusRobot], period_s: float) -> str:
    """The DBC text for ``robots`` on one bridge with period ``period_s``. ValueError for a station id without a
    CAN slot (0-255), naming the robot."""
    import cantools

    base = cantools.database.load_file(str(DBC_PATH))
    cycle_ms = max(1, round(period_s * 1000))
    messages = []
    names: set[str] = set()
    for robot in sorted(robots, key=lambda r: r.slot):
        if not 0 <= robot.slot <= MAX_SLOT:
            raise ValueError(f"robot '{robot.name}': station id {robot.slot} has no CAN slot (0-{MAX_SLOT})")
        for message_name, base_id in _BASES.items():
            if message_name == "Command" and not robot.driven:
                continue
            message = copy.deepcopy(base.get_message_by_name(message_name))
            message.frame_id = base_id + robot.slot
            name = f"{message_name}_{message_suffix(robot.name)}"
            if name in names:  # two robot names that read alike as identifiers: the slot tells them apart
                name = f"{message_name}_{robot.slot}"
            names.add(name)
            message.name = name
            message.comment = f"{message.comment} Robot '{robot.name}', station id {robot.slot}."
            message.cycle_time = cycle_ms
            _set_cycle_attribute(message, cycle_ms)
            messages.append(message)
    database = cantools.database.can.Database(messages=messages, nodes=base.nodes, version=base.version,
                                              dbc_specifics=base.dbc)
    return database.as_dbc_string()


def _set_cycle_attribute(message: Any, cycle_ms: int) -> None:
    """``GenMsgCycleTime`` is what the DBC file says (``cycle_time`` alone is not written back)."""
    attributes = message.dbc.attributes if message.dbc is not None else {}
    old = attributes.get("GenMsgCycleTime")
    if old is not None:
        attributes["GenMsgCycleTime"] = type(old)(value=cycle_ms, definition=old.definition)
