"""Cost of the ITS-G5 platooning message: the channel model alone, with and without PMs.

    .venv/bin/python bench/bench_itsg5_pm.py                 # 200 stations, platoons of 8, 10 s
    .venv/bin/python bench/bench_itsg5_pm.py --stations 1000

Stations in platoons of 8 (20 m apart, 60 m between platoons) drive along a line at 25 m/s; each follower listens
to its predecessor and its platoon leader. The model is stepped every 10 ms with the log drained, as the V2X
federate does. Each configuration runs once to compile and is then timed ``--repeat`` times (best reported).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from comms_models.base import Interest
from comms_models.itsg5.model import ItsG5Channel
from core.robots import RobotSpec


def once(n: int, duration_s: float, pm_rate_hz: float | None) -> tuple[float, dict]:
    """Wall time [s] of one run and the model's metrics."""
    params: dict = {"pcap": False}
    if pm_rate_hz is not None:
        params["platooning_message"] = {"rate_hz": pm_rate_hz}
    channel = ItsG5Channel(params, seed=1)
    channel.spawn([RobotSpec(id=i, name=f"r{i}") for i in range(n)])
    ids = np.arange(n)
    followers = ids[ids % 8 != 0]
    interest = Interest(np.concatenate([followers, followers]),
                        np.concatenate([followers - 1, followers - followers % 8]))
    x0 = -ids * 20.0 - (ids // 8) * 60.0
    zeros = np.zeros(n)
    t0 = time.perf_counter()
    for k in range(round(duration_s * 100)):
        t_ns = k * 10_000_000
        estimate = {"id": ids, "x": x0 + 25.0 * t_ns / 1e9, "y": zeros, "yaw": zeros, "v": np.full(n, 25.0),
                    "a": zeros, "yaw_rate": zeros, "u_des": np.sin(ids + t_ns / 1e9)}
        channel.step(t_ns, estimate, interest)
        channel.drain_records()
        channel.drain_load()
    return time.perf_counter() - t0, channel.metrics()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stations", type=int, default=200)
    parser.add_argument("--duration", type=float, default=10.0, help="simulated seconds")
    parser.add_argument("--pm-rate", type=float, default=10.0, help="PM rate [Hz] of the run with PMs")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for label, rate in (("CAMs only", None), (f"CAMs + PMs at {args.pm_rate:g} Hz", args.pm_rate)):
        once(min(args.stations, 16), 0.2, rate)  # compile
        best = min(once(args.stations, args.duration, rate)[0] for _ in range(args.repeat))
        metrics = once(args.stations, min(args.duration, 1.0), rate)[1]
        print(f"{label:24s}: {best:.3f} s wall for {args.duration:g} s simulated "
              f"({args.duration / best:.1f}x real time); in 1 s: {metrics['cams_sent']} CAMs, "
              f"{metrics.get('pms_sent', 0)} PMs, mean CBR {metrics['cbr_mean']:.3f}")


if __name__ == "__main__":
    main()
