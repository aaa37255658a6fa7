"""A fuzzer in its own process on a python-can ``udp_multicast`` bus, for the tests: once the bridge's first
VehicleState frame of robot DRIVEN is seen, it sends one valid Command (the reference for the counter) and then
1,000 malformed frames in a seeded random order, each of a kind whose reason the bridge must report:

- ``bad_length``: a Command id of DRIVEN with 0-7 data bytes; ``bad_checksum``: 8 bytes, checksum off by 1-255;
- ``counter_jump``: a valid frame whose counter skips 1-14 values; ``counter_repeat``: the previous counter again;
- ``out_of_range``: the next counter, but a target speed or acceleration past the DBC's maximum;
- ``unknown_id``: ids outside the Command range, 29-bit ids and random data;
- ``not_driven``: Command ids of OTHER (a robot the bridge does not drive) and of slot 200 (no robot);
- ``not_data``: remote frames; ``unreadable``: UDP datagrams that are no python-can frame at all.

Run: python can_fuzzer.py INTERFACE CHANNEL PORT DRIVEN OTHER OUT_JSON

Writes ``{"malformed": {reason: count}, "valid": 1, "finished_before_end": bool}`` to OUT_JSON; the last is whether
the bridge's state frames were still coming after the last malformed frame (the run had not ended).
"""

from __future__ import annotations

import json
import random
import socket
import sys
import time

import can
import cantools

from federates.can.codec import DBC_PATH
from federates.can.e2e import frame_checksum

PLAN = {"bad_length": 150, "bad_checksum": 150, "counter_jump": 150, "counter_repeat": 50, "out_of_range": 100,
        "unknown_id": 150, "not_driven": 100, "not_data": 50, "unreadable": 100}


def main(interface: str, channel: str, port: int, driven: int, other: int, out: str) -> None:
    rng = random.Random(7)
    command = cantools.database.load_file(str(DBC_PATH), frame_id_mask=0x700).get_message_by_name("Command")
    bus = can.Bus(interface=interface, channel=channel, port=port)
    raw = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    print("ready", flush=True)
    cmd_id = command.frame_id + driven
    last = [0]

    def sealed(counter: int, speed: int = 100, accel: int = -32768) -> bytearray:
        data = bytearray(command.encode({"TargetSpeed": speed, "TargetAccel": accel, "SteeringAngle": -32768,
                                         "Counter": counter, "Checksum": 0}, scaling=False, strict=False))
        data[7] = frame_checksum(cmd_id, data)
        return data

    def frame(kind: str) -> can.Message | bytes:
        if kind == "bad_length":
            return can.Message(arbitration_id=cmd_id, data=rng.randbytes(rng.randint(0, 7)), is_extended_id=False)
        if kind == "bad_checksum":
            data = sealed((last[0] + 1) % 16)
            data[7] = (data[7] + rng.randint(1, 255)) % 256
            return can.Message(arbitration_id=cmd_id, data=data, is_extended_id=False)
        if kind == "counter_jump":
            last[0] = (last[0] + rng.randint(2, 15)) % 16
            return can.Message(arbitration_id=cmd_id, data=sealed(last[0]), is_extended_id=False)
        if kind == "counter_repeat":
            return can.Message(arbitration_id=cmd_id, data=sealed(last[0]), is_extended_id=False)
        if kind == "out_of_range":
            last[0] = (last[0] + 1) % 16
            data = sealed(last[0], speed=20_000) if rng.random() < 0.5 else sealed(last[0], accel=30_000)
            return can.Message(arbitration_id=cmd_id, data=data, is_extended_id=False)
        if kind == "unknown_id":
            choice = rng.random()
            if choice < 0.3:  # a 29-bit id that looks like a Command id in its low bits
                return can.Message(arbitration_id=0x100 + driven, data=rng.randbytes(8), is_extended_id=True)
            frame_id = rng.choice([rng.randint(0, 0xFF), rng.randint(0x400, 0x7FF)])
            return can.Message(arbitration_id=frame_id, data=rng.randbytes(rng.randint(0, 8)), is_extended_id=False)
        if kind == "not_driven":
            slot = other if rng.random() < 0.5 else 200
            return can.Message(arbitration_id=command.frame_id + slot, data=rng.randbytes(8), is_extended_id=False)
        if kind == "not_data":
            return can.Message(arbitration_id=cmd_id, is_remote_frame=True, dlc=8, is_extended_id=False)
        return rng.randbytes(rng.randint(1, 64))  # unreadable: no msgpack frame

    kinds = [k for k, n in PLAN.items() for _ in range(n)]
    rng.shuffle(kinds)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the run is on: its state frames are coming
            msg = _recv(bus, 0.5)
            if msg is not None and msg.arbitration_id == 0x200 + driven:
                break
        bus.send(can.Message(arbitration_id=cmd_id, data=sealed(0), is_extended_id=False))  # the valid one
        for i, kind in enumerate(kinds):
            item = frame(kind)
            for attempt in range(100):  # a loaded host's socket buffer can fill for a moment: wait, do not drop
                try:
                    if isinstance(item, bytes):
                        raw.sendto(item, (channel, port, 0, 0))
                    else:
                        bus.send(item)
                    break
                except (OSError, can.CanOperationError):
                    if attempt == 99:
                        raise
                    time.sleep(0.01)
            if i % 4 == 3:
                time.sleep(0.002)  # about 2,000 frames/s: a busy bus, not a lost-datagram test
        still_running = False
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and not still_running:
            msg = _recv(bus, 0.2)
            still_running = msg is not None and msg.arbitration_id & 0x700 == 0x200
    finally:
        bus.shutdown()
        raw.close()
    with open(out, "w") as f:
        json.dump({"malformed": dict(sorted(PLAN.items())), "valid": 1, "finished_before_end": still_running}, f)


def _recv(bus: can.BusABC, timeout: float) -> can.Message | None:
    """The next readable frame, or None; the unreadable datagrams this fuzzer sent come back to its own bus on the
    group (multicast loops back), and on a loaded host they may still be queued when it reads: skip them."""
    try:
        return bus.recv(timeout)
    except can.CanOperationError:
        return None


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], int(a[2]), int(a[3]), int(a[4]), a[5])
