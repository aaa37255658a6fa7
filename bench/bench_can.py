"""The CAN bridge's cost per step with 4 and 32 robots on python-can's ``virtual`` bus.

    .venv/bin/python bench/bench_can.py
    .venv/bin/python bench/bench_can.py --duration 20 --robots 4 32 --period 0.02

Per fleet size, the platoon scenario (ideal channel) with the bridge at 50 Hz:

- free mode, bus log off and on (``log: none`` / ``asc``): encoding and sending two state frames per robot, and
  writing them to ``can/<bridge>.asc``; an ECU bus on the same channel receives them;
- lock-step with every robot driven by an ECU thread in this process that answers each VehicleState frame with a
  Command echoing its counter: the full round trip (encode, send, receive, decode, check, answer, check).

The bridge's wall time per step comes from run.json (``wall_time_by_federate_s``); in lock-step it includes the
wait for the ECU thread, which competes for the same interpreter.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import can  # noqa: E402
from bridge_args import bridge_arguments, machine  # noqa: E402  (bench/, the script's own directory)

from federates.can import Codec  # noqa: E402
from orchestrator.runner import run_scenario  # noqa: E402
from orchestrator.scenario import parse_scenario  # noqa: E402

BRIDGE = "federates.can:CanBridge"


def scenario(robots: int, duration: float, bridge: dict, drive_all: bool):
    overrides = [f"duration_s={duration}", f"vehicles.count={robots}", f"platoon.size={robots}",
                 "outputs.plots=false", "outputs.report=false", "channel={type: ideal}",
                 f"federates={json.dumps([{'name': 'can', 'type': BRIDGE, 'params': bridge}])}"]
    if drive_all:
        overrides.append(f"drivers={json.dumps([{'federate': 'can', 'robots': 'all'}])}")
    return parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=overrides)


def ecu(channel: str, stop: threading.Event) -> None:
    """Answers every VehicleState frame with a 1 m/s Command echoing its counter."""
    codec = Codec()
    bus = can.Bus(interface="virtual", channel=channel)
    try:
        while not stop.is_set():
            msg = bus.recv(0.05)
            if msg is None or msg.arbitration_id & 0x700 != 0x200:
                continue
            counter = msg.data[6] & 0x0F
            frame_id, data = codec.encode_command(msg.arbitration_id & 0xFF, counter, speed=1.0)
            bus.send(can.Message(arbitration_id=frame_id, data=data, is_extended_id=False))
    finally:
        bus.shutdown()


def per_step_ms(info: dict, steps: int) -> float:
    return info["wall_time_by_federate_s"]["can"] / steps * 1e3


def main() -> None:
    args, steps = bridge_arguments(__doc__)
    print(f"CAN bridge (virtual bus), {args.duration:g} s simulated, bridge period {args.period:g} s ({steps} steps), "
          f"{machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.robots:
            channel = f"bench-{n}"
            listener = can.Bus(interface="virtual", channel=channel)  # someone on the bus receives the frames
            try:
                params = {"channel": channel, "period_s": args.period, "log": "none"}
                run_scenario(scenario(n, 1.0, params, False), Path(tmp) / f"warm{n}")  # compile kernels
                for log in ("none", "asc"):
                    info = run_scenario(scenario(n, args.duration, {**params, "log": log}, False),
                                        Path(tmp) / f"free{n}{log}").run_info
                    total = sum(info["wall_time_by_federate_s"].values())
                    print(f"{n:3d} robots, free, log {log:4s}: bridge {per_step_ms(info, steps):.3f} ms/step "
                          f"({info['federates']['can']['tx_frames'] / steps:.0f} frames/step, worst-case bus load "
                          f"{info['federates']['can']['bus_load_worst_case'] * 100:.0f} % at 500 kbit/s); all "
                          f"federates {total / steps * 1e3:.3f} ms/step")
            finally:
                listener.shutdown()
            stop = threading.Event()
            thread = threading.Thread(target=ecu, args=(channel, stop), daemon=True)
            thread.start()
            try:
                lock = {"channel": channel, "period_s": args.period, "mode": "lockstep", "log": "none"}
                result = run_scenario(scenario(n, args.duration, lock, True), Path(tmp) / f"lock{n}")
            finally:
                stop.set()
                thread.join(timeout=5)
            if not result.ok:
                print(f"    lock-step run failed: {result.error}")
                continue
            summary = result.run_info["federates"]["can"]
            trips = summary["lockstep"]
            print(f"{n:3d} robots, lock-step, all driven by an in-process ECU thread: bridge "
                  f"{per_step_ms(result.run_info, steps):.3f} ms/step; round trip p50 "
                  f"{trips['round_trip_p50_s'] * 1e3:.2f} ms, p99 {trips['round_trip_p99_s'] * 1e3:.2f} ms; "
                  f"{summary['commands'] / steps:.0f} commands/step, ignored {summary['ignored_total']}")


if __name__ == "__main__":
    main()
