"""Speed of the C-V2X channel model alone, beside the ITS-G5 model on the same stations.

    .venv/bin/python bench/bench_cv2x.py                      # 1,000 stations, 10 Hz CAMs and ETSI rules, 5 s
    .venv/bin/python bench/bench_cv2x.py --stations 200 --duration 10

Stations in platoons of 8 (20 m apart, 60 m between platoons) drive along one lane at 25 m/s; each follower listens
to its predecessor and its platoon leader. The model is stepped every 10 ms with its log drained, as the V2X federate
does. Each configuration runs once briefly to compile and is then timed ``--repeat`` times; the best time is given
as a real-time factor (simulated seconds per wall second), beside the process CPU time of that run and the load
average (other processes on the machine stretch the wall time, hardly the CPU time).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from comms_models import COMMS_MODELS
from comms_models.base import Interest
from core.robots import RobotSpec


def once(kind: str, n: int, duration_s: float, generation: dict) -> tuple[float, dict]:
    """Wall time [s] of one run of channel ``kind`` and its metrics (its CPU time under ``"cpu_s"``)."""
    params: dict = {"generation": generation}
    if kind == "itsg5":
        params["pcap"] = False
    channel = COMMS_MODELS.get(kind)(params, 1, None)
    channel.spawn([RobotSpec(id=i, name=f"r{i}") for i in range(n)])
    ids = np.arange(n)
    followers = ids[ids % 8 != 0]
    interest = Interest(np.concatenate([followers, followers]),
                        np.concatenate([followers - 1, followers - followers % 8]))
    x0 = -ids * 20.0 - (ids // 8) * 60.0
    zeros = np.zeros(n)
    t0, c0 = time.perf_counter(), time.process_time()
    for k in range(round(duration_s * 100)):
        t_ns = k * 10_000_000
        estimate = {"id": ids, "x": x0 + 25.0 * t_ns / 1e9, "y": zeros, "yaw": zeros, "v": np.full(n, 25.0),
                    "a": zeros, "yaw_rate": zeros}
        channel.step(t_ns, estimate, interest)
        channel.drain_records()
        channel.drain_load()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return wall, {**channel.metrics(), "cpu_s": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stations", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=5.0, help="simulated seconds")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--channels", default="cv2x,itsg5")
    args = parser.parse_args()
    modes = (("10 Hz", {"mode": "fixed_rate", "fixed_rate_hz": 10}), ("ETSI rules", {"mode": "etsi"}))
    for kind in args.channels.split(","):
        for label, generation in modes:
            once(kind, 16, 0.3, generation)  # compile
            runs = [once(kind, args.stations, args.duration, generation) for _ in range(args.repeat)]
            wall, metrics = min(runs, key=lambda r: r[0])
            print(f"{kind:6s} {args.stations:6d} stations, {label:10s}: {args.duration / wall:6.2f}x real time "
                  f"({wall:.1f} s for {args.duration:g} s; CPU {metrics['cpu_s']:.1f} s: "
                  f"{args.duration / metrics['cpu_s']:.2f}x; load {os.getloadavg()[0]:.1f}; CAMs sent "
                  f"{metrics['cams_sent']}, CBR mean {metrics['cbr_mean']:.3f})", flush=True)


if __name__ == "__main__":
    main()
