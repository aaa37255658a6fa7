"""What the live view costs a run: unwatched (nobody connected) and watched (one viewer reading every frame).

    .venv/bin/python bench/bench_live.py                        # 4 robots, ideal channel, 200 s, 5 rounds
    .venv/bin/python bench/bench_live.py --robots 100 --channel itsg5 --duration 30

Runs the platoon scenario unpaced and without traces (so the loop is all there is to slow down), interleaving
three variants per round: no live view, a live view nobody watches, and a live view with one websocket viewer.
Prints the minimum wall time of each over the rounds and the overhead against the plain run (target: unwatched
under a few percent).
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import threading
import time
from pathlib import Path

from orchestrator.live import LiveServer
from orchestrator.runner import run_scenario
from orchestrator.scenario import load_scenario

REPO = Path(__file__).resolve().parents[1]


def _timed(scenario: object, out: Path, variant: str) -> float:
    if variant == "plain":
        started = time.perf_counter()
        run_scenario(scenario, out)
        return time.perf_counter() - started
    with LiveServer("127.0.0.1", 0) as server, contextlib.ExitStack() as stack:
        if variant == "watched":
            from websockets.sync.client import connect

            viewer = stack.enter_context(connect(server.url.replace("http://", "ws://") + "ws"))

            def read() -> None:
                with contextlib.suppress(Exception):
                    while True:
                        viewer.recv()

            threading.Thread(target=read, daemon=True).start()
            while not server.watchers.watched:
                time.sleep(0.01)
        started = time.perf_counter()
        run_scenario(scenario, out, extra_observers=[server.observer()])
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=200.0, help="simulated seconds")
    parser.add_argument("--robots", type=int, default=4)
    parser.add_argument("--channel", default="ideal")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    overrides = [f"vehicles.count={args.robots}", f"channel.type={args.channel}", "outputs.trace=false",
                 "outputs.plots=false", "outputs.report=false"]
    scenario = load_scenario(REPO / "scenarios" / "platoon.yaml", [f"duration_s={args.duration}", *overrides])
    warm = load_scenario(REPO / "scenarios" / "platoon.yaml", ["duration_s=1", *overrides])
    variants = ("plain", "unwatched", "watched")
    best = dict.fromkeys(variants, float("inf"))
    with tempfile.TemporaryDirectory() as tmp:
        run_scenario(warm, Path(tmp) / "warm")  # compile the kernels first
        for k in range(args.rounds):
            for variant in variants:
                best[variant] = min(best[variant], _timed(scenario, Path(tmp) / f"{variant}{k}", variant))
    steps = round(args.duration / scenario.step_s) + 1
    print(f"{args.robots} robots, {args.channel}, {args.duration:g} s simulated ({steps} instants), unpaced, no "
          f"trace; min of {args.rounds} interleaved rounds")
    for variant in variants:
        extra = (best[variant] / best["plain"] - 1) * 100
        print(f"  {variant:>9}: {best[variant]:.3f} s ({best[variant] / steps * 1e6:.1f} us/instant, "
              f"{extra:+.2f} % against plain)")


if __name__ == "__main__":
    main()
