"""Real-time pacing: how closely a paced run follows the wall clock.

    .venv/bin/python bench/bench_realtime.py                       # 10 s, 4 robots, ITS-G5, factor 1.0
    .venv/bin/python bench/bench_realtime.py --duration 30 --robots 32 --factor 2

Runs the platoon scenario paced (``execution.realtime``) in this process and prints the wall time of the
scheduler loop against the simulated time (target: within 2 %), the lateness percentiles from ``run.json`` (how far
behind its wall-clock time each instant finished; target p99 < 5 ms on an idle machine) and peak memory.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from orchestrator.runner import run_scenario
from orchestrator.scenario import load_scenario

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10.0, help="simulated seconds")
    parser.add_argument("--robots", type=int, default=4)
    parser.add_argument("--factor", type=float, default=1.0, help="real-time factor")
    parser.add_argument("--channel", default="itsg5")
    args = parser.parse_args()
    scenario = load_scenario(REPO / "scenarios" / "platoon.yaml", [
        f"duration_s={args.duration}", f"vehicles.count={args.robots}", f"channel.type={args.channel}",
        f"execution.realtime={args.factor}", "outputs.plots=false", "outputs.report=false"])
    warm = load_scenario(REPO / "scenarios" / "platoon.yaml", [
        "duration_s=1", f"channel.type={args.channel}", "outputs.plots=false", "outputs.report=false"])
    with tempfile.TemporaryDirectory() as tmp:
        run_scenario(warm, Path(tmp) / "warm")  # compile the kernels first: the paced run measures pacing only
        started = time.perf_counter()
        result = run_scenario(scenario, Path(tmp) / "paced")
        total = time.perf_counter() - started
    info = result.run_info
    late = info["realtime"]["lateness_s"]
    target = args.duration / args.factor
    # the scheduler loop spans the first to the last instant: wall time of the run minus building and outputs
    loop = sum(info["wall_time_by_federate_s"].values())
    print(f"paced run: {args.duration:g} s simulated at {args.factor:g}x, {args.robots} robots, {args.channel}")
    span = info["realtime"]["wall_span_s"]
    print(f"  first to last instant: {span:.4f} s of wall time for {target:.4f} s target "
          f"({(span / target - 1) * 100:+.3f} %); whole call with set-up and outputs {total:.3f} s")
    print(f"  federates busy {loop:.3f} s ({loop / target * 100:.1f} % of the wall clock)")
    print(f"  lateness p50 {late['p50'] * 1e3:.3f} ms, p99 {late['p99'] * 1e3:.3f} ms, max {late['max'] * 1e3:.3f} ms; "
          f"late instants {info['realtime']['late_instants']} of {info['realtime']['instants']}")
    print(f"  peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
