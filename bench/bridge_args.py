"""What the bridge and remote benchmarks share: their arguments (run length, robot counts, bridge period), the
machine line and stopping the processes they start."""

from __future__ import annotations

import argparse
import os
import subprocess


def bridge_arguments(doc: str | None) -> tuple[argparse.Namespace, int]:
    """Parse ``--duration``, ``--robots`` and ``--period``; returns them and the bridge steps of one run."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10.0, help="simulated seconds per run")
    parser.add_argument("--robots", type=int, nargs="+", default=[4, 32])
    parser.add_argument("--period", type=float, default=0.02, help="bridge period [s]")
    args = parser.parse_args()
    return args, round(args.duration / args.period) + 1


def machine() -> str:
    """CPUs and load, for the header of a figure measured on a shared machine."""
    return f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}"


def stop(proc: subprocess.Popen) -> None:
    """Stop a process the benchmark started, by pid: SIGTERM, then SIGKILL after 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
