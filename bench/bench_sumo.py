"""SUMO coupling cost: a platoon of 8 among N SUMO vehicles on the shipped four-lane motorway, per SUMO step.

    .venv/bin/python bench/bench_sumo.py                        # 200 and 1,000 SUMO vehicles, ideal channel
    .venv/bin/python bench/bench_sumo.py --vehicles 200 --channel itsg5 --seconds 5

The N vehicles are inserted at t = 0, spread over the four lanes of scenarios/sumo/highway.net.xml (3.6 km), so
the count holds for the whole measurement. Prints, per configuration, the wall time per SUMO step spent in the
SUMO federate (libsumo stepping, reading the poses, mirroring the platoon, spawns) and in every other federate
(which now steps 8 + N robots), the real-time factor and peak memory. Needs ``coopsim[sumo]``.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.build.world import build_world  # noqa: E402
from orchestrator.scenario import load_scenario  # noqa: E402

SCENARIO = """version: 1
name: sumo_bench
seed: 7
duration_s: {seconds}
step_s: 0.01
platoons:
  - name: car
    count: 8
    template: {{preset: passenger_car, model: kinematic}}
    start: {{x: 2400.0, y: 0.0, yaw: 0.0}}
leader: {{profile: constant, params: {{speed_mps: 25.0}}}}
controller: {{type: ploeg_cacc, period_s: 0.02}}
channel: {{type: {channel}}}
federates:
  - name: traffic
    type: sumo
    params: {{net: highway.net.xml, routes: [traffic.rou.xml], period_s: 0.1}}
outputs: {{trace: false, plots: false, report: false}}
"""


def routes(n: int) -> str:
    """``n`` cars inserted at t = 0, evenly over the four lanes of the first 2.2 km (the platoon starts beyond)."""
    per_lane = -(-n // 4)
    spacing = 2200.0 / per_lane
    cars = []
    for k in range(n):
        lane, slot = k % 4, k // 4
        cars.append(f'    <vehicle id="c{k}" type="car" route="r" depart="0" departLane="{lane}" '
                    f'departPos="{10.0 + slot * spacing:.2f}" departSpeed="0"/>')
    return ('<routes>\n    <vType id="car" length="4.6" minGap="2.5" accel="2.6" decel="4.5" sigma="0.5" '
            'maxSpeed="36.0"/>\n    <route id="r" edges="motorway"/>\n' + "\n".join(cars) + "\n</routes>\n")


def measure(n: int, channel: str, seconds: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(REPO / "scenarios" / "sumo" / "highway.net.xml", tmp)
        (Path(tmp) / "traffic.rou.xml").write_text(routes(n))
        path = Path(tmp) / "bench.yaml"
        path.write_text(SCENARIO.format(seconds=seconds, channel=channel))
        world = build_world(load_scenario(path))
        world.scheduler.setup()
        t0 = time.perf_counter()
        world.scheduler.run()
        wall = time.perf_counter() - t0
        robots = len(world.scheduler.roster)  # the platoon and every SUMO vehicle still on the road
        split = world.scheduler.wall_by_federate
        for fed in world.federates.values():
            fed.finalize()
    steps = seconds / 0.1
    return {"wall": wall, "rtf": seconds / wall, "sumo_ms": split.get("traffic", 0.0) / steps * 1e3,
            "others_ms": sum(v for k, v in split.items() if k != "traffic") / steps * 1e3,
            "robots": robots}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vehicles", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--channel", default="ideal")
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    measure(20, args.channel, 1.0)  # compile the kernels first
    print(f"platoon of 8 + N SUMO vehicles, {args.channel} channel, {args.seconds:g} s, SUMO at 10 Hz (libsumo)")
    print(f"{'N':>6} {'robots':>7} {'SUMO federate / SUMO step':>27} {'other federates / SUMO step':>29} "
          f"{'real time':>10}")
    for n in args.vehicles:
        r = measure(n, args.channel, args.seconds)
        print(f"{n:>6} {r['robots']:>7} {r['sumo_ms']:>24.2f} ms {r['others_ms']:>26.2f} ms {r['rtf']:>9.1f}x")
    print(f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
