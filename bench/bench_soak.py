"""Peak memory against simulated time: 100 robots over ITS-G5 with every output (traces, metrics, plots, report).

    .venv/bin/python bench/bench_soak.py                      # 150 s, 600 s and 3,600 s
    .venv/bin/python bench/bench_soak.py --durations 150,600 --robots 50

Each duration runs in its own process (``coopsim run``), so each peak RSS is that run's alone: the simulation and
all post-processing. Memory should not grow with simulated time: the recorders write row groups as the run goes
and metrics, plots and the digest stream over the traces afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_PEAK_OF = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
"""Runs the command given and prints the peak RSS of its largest descendant (plot workers included)."""


def soak(duration_s: float, robots: int, out: Path) -> dict[str, float]:
    """One run in a child process: wall time, peak RSS [MiB], simulated time and trace size."""
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = [sys.executable, "-m", "orchestrator.cli", "run", "scenarios/platoon.yaml", "--out", str(out), "--quiet",
           "--set", f"vehicles.count={robots}", "--set", "channel.type=itsg5", "--set", f"duration_s={duration_s}"]
    # through a process of its own, which prints the largest of its descendants (KiB on Linux): this process's
    # RUSAGE_CHILDREN is the largest child so far, so a longer run could never show a smaller peak than a shorter
    done = subprocess.run([sys.executable, "-c", _PEAK_OF, *run], cwd=REPO, env=env, check=True, capture_output=True,
                          text=True)
    wall = time.perf_counter() - started
    peak = int(done.stdout.split()[-1])
    info = json.loads((out / "run.json").read_text())
    size = sum(p.stat().st_size for p in (out / "trace").glob("*.parquet"))
    return {"sim_s": info["sim_time_s"], "run_wall_s": info["wall_time_s"], "total_wall_s": wall,
            "peak_mib": peak / 1024, "trace_mib": size / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--durations", default="150,600,3600", help="simulated seconds, comma-separated, ascending")
    parser.add_argument("--robots", type=int, default=100)
    args = parser.parse_args()
    print(f"{'simulated':>10} {'run wall':>9} {'with outputs':>13} {'peak RSS':>10} {'traces':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for k, duration in enumerate(float(d) for d in args.durations.split(",")):
            r = soak(duration, args.robots, Path(tmp) / f"run{k}")
            print(f"{r['sim_s']:>8.0f} s {r['run_wall_s']:>7.1f} s {r['total_wall_s']:>11.1f} s "
                  f"{r['peak_mib']:>6.0f} MiB {r['trace_mib']:>5.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
