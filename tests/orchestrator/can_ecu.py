"""An "ECU" in its own process on the other side of a python-can bus, for the tests: reads the bridge's
VehicleState frames with the DBC and commands one robot's target speed along a profile.

Run: python can_ecu.py INTERFACE CHANNEL PORT SLOT PERIOD_S END_S OUT_JSON MODE

On every VehicleState frame of robot SLOT (one per bridge period, so the k-th is simulation time k * PERIOD_S) it
answers with a Command: target speed ``1.0`` m/s before ``STEP_AT_S`` and ``1.5`` after, steering and acceleration
not given. MODE ``lockstep`` echoes the state frame's counter; ``free`` counts its own. It prints "ready" once its
bus is open and writes what it received and sent to OUT_JSON when the period at END_S has been answered (or after
a wall-clock timeout).
"""

from __future__ import annotations

import json
import sys
import time

import can
import cantools

from federates.can.codec import DBC_PATH
from federates.can.e2e import frame_checksum

STEP_AT_S = 2.0
PROFILE = (1.0, 1.5)  # [m/s] before and after STEP_AT_S


def main(interface: str, channel: str, port: int, slot: int, period_s: float, end_s: float, out: str, mode: str,
         wall_timeout_s: float = 60.0) -> None:
    db = cantools.database.load_file(str(DBC_PATH), frame_id_mask=0x700)
    command = db.get_message_by_name("Command")
    options = {"port": port} if interface == "udp_multicast" else {}
    bus = can.Bus(interface=interface, channel=channel, **options)
    print("ready", flush=True)
    log: list[dict] = []
    counter, k = 0, 0
    deadline = time.monotonic() + wall_timeout_s
    try:
        while time.monotonic() < deadline:
            msg = bus.recv(0.5)
            if msg is None or msg.arbitration_id != 0x200 + slot:
                continue
            state = db.get_message_by_frame_id(msg.arbitration_id).decode(msg.data)
            t_s = k * period_s
            target = PROFILE[0] if t_s < STEP_AT_S - 1e-9 else PROFILE[1]
            counter = state["Counter"] if mode == "lockstep" else (counter + 1) % 16
            signals = {"TargetSpeed": target, "TargetAccel": "NotGiven", "SteeringAngle": "NotGiven",
                       "Counter": counter, "Checksum": 0}
            data = bytearray(command.encode(signals, strict=False))
            frame_id = command.frame_id + slot
            data[7] = frame_checksum(frame_id, data)
            bus.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=False))
            log.append({"k": k, "t_s": t_s, "speed": float(state["Speed"]), "state_counter": state["Counter"],
                        "target": target, "counter": counter})
            k += 1
            if t_s >= end_s - 1e-9:
                break
    finally:
        bus.shutdown()
        with open(out, "w") as f:
            json.dump(log, f)


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], int(a[2]), int(a[3]), float(a[4]), float(a[5]), a[6], a[7])
