"""Benchmark the platoon scenario: steps/s, real-time factor and peak memory.

    .venv/bin/python bench/bench_platoon.py                       # the 4-robot platoon, 40 s
    .venv/bin/python bench/bench_platoon.py --robots 1000 --platoon-size 8 --no-trace
    .venv/bin/python bench/bench_platoon.py --channel itsg5 --robots 1000 --platoon-size 8 --no-trace \
        --set channel.generation.mode=fixed_rate --set channel.generation.fixed_rate_hz=10

Each configuration is run once to load compiled kernels (reported as "cold") and then ``--repeat`` times
(reported as the best "warm" run). Wall time covers the scheduler run only (setup and reports excluded);
``--with-outputs`` times the whole ``run_scenario`` including traces, metrics, plots and report.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from core.timebase import seconds_to_ns  # noqa: E402
from orchestrator.build.world import build_world  # noqa: E402
from orchestrator.recording.port_recorder import PortRecorder  # noqa: E402
from orchestrator.recording.recorder import VehicleRecorder  # noqa: E402
from orchestrator.runner import run_scenario  # noqa: E402
from orchestrator.scenario import load_scenario  # noqa: E402

LAST_BREAKDOWN: dict[str, float] = {}


def once(scenario, trace: bool, with_outputs: bool) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        if with_outputs:
            t0 = time.perf_counter()
            run_scenario(scenario, Path(tmp))
            return time.perf_counter() - t0
        world = build_world(scenario, out_dir=Path(tmp) if trace else None)
        period = seconds_to_ns(scenario.step_s)
        # what a traced run records: the vehicles view and every other port (range, V2X log, channel load ...)
        observers = [VehicleRecorder(Path(tmp) / "trace" / "vehicles.parquet", period),
                     PortRecorder(Path(tmp) / "trace", period)] if trace else []
        world.scheduler.setup()
        cpu0, t0 = time.process_time(), time.perf_counter()
        world.scheduler.run(observers)
        wall = time.perf_counter() - t0
        LAST_BREAKDOWN.clear()
        LAST_BREAKDOWN.update(world.scheduler.wall_by_federate)
        LAST_BREAKDOWN["cpu_s"] = time.process_time() - cpu0  # every thread of the process, the writer's too
        return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default=str(REPO / "scenarios" / "platoon.yaml"))
    parser.add_argument("--robots", type=int, default=4)
    parser.add_argument("--platoon-size", type=int, default=None)
    parser.add_argument("--channel", default="ideal")
    parser.add_argument("--physics", default=None, help="vehicle model (default: the scenario's)")
    parser.add_argument("--duration", type=float, default=None, help="simulated seconds (default: the scenario's)")
    parser.add_argument("--no-trace", action="store_true", help="do not record the vehicles trace")
    parser.add_argument("--with-outputs", action="store_true", help="time run_scenario with all outputs")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="PATH=VALUE",
                        help="any scenario override, e.g. channel.generation.mode=fixed_rate")
    args = parser.parse_args()

    overrides = [f"vehicles.count={args.robots}", f"channel.type={args.channel}"]
    if args.platoon_size:
        overrides.append(f"platoon.size={args.platoon_size}")
    if args.duration:
        overrides.append(f"duration_s={args.duration}")
    if args.physics:
        overrides.append(f"vehicles.template.model={args.physics}")
    overrides += args.overrides
    scenario = load_scenario(args.scenario, overrides)
    steps = round(scenario.duration_s / scenario.step_s) + 1
    cold = once(scenario, not args.no_trace, args.with_outputs)
    warm = min(once(scenario, not args.no_trace, args.with_outputs) for _ in range(args.repeat))
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"machine      : {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    print(f"scenario     : {scenario.name}, {args.robots} robots, platoons of {scenario.platoon.size or args.robots}, "
          f"channel {args.channel}, {scenario.duration_s:g} s at {scenario.step_s * 1e3:g} ms, "
          f"trace {'off' if args.no_trace else 'on'}{', all outputs' if args.with_outputs else ''}"
          f"{''.join(' --set ' + o for o in args.overrides)}")
    print(f"cold run     : {cold:.3f} s wall ({scenario.duration_s / cold:.1f}x real time)")
    print(f"warm run     : {warm:.3f} s wall, {steps / warm:,.0f} steps/s, "
          f"{scenario.duration_s / warm:.1f}x real time")
    print(f"peak memory  : {peak_mib:.0f} MiB (max RSS of the process)")
    if LAST_BREAKDOWN:
        by_federate = {name: wall for name, wall in LAST_BREAKDOWN.items() if name != "cpu_s"}
        parts = ", ".join(f"{name} {wall:.3f} s ({scenario.duration_s / wall:.0f}x)" if wall > 0 else name
                          for name, wall in by_federate.items())
        print(f"per federate : {parts}  (last run; the rest is scheduling and recording)")
        print(f"loop CPU     : {LAST_BREAKDOWN['cpu_s']:.3f} s (last run, every thread of the process)")


if __name__ == "__main__":
    main()
