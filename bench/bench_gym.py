"""Speed of the Gymnasium environment (``orchestrator.gym``): steps per second of one environment of the 4-robot AuNa
platoon and agent-steps per second of a vector of copies, on the ideal channel and on ITS-G5, and the reset.

    .venv/bin/python bench/bench_gym.py                 # ideal and ITS-G5, one env and a vector of 256
    .venv/bin/python bench/bench_gym.py --vector 64 --channels ideal

Targets (issue 27): 20,000 steps/s for one environment, 500,000 agent-steps/s for a vector of 256, ideal channel.
The policy hands back the built-in law's acceleration (``info["law_accel"]``), so its own cost is nil and the
episode is the scenario's. One step is one decision at the law's 20 ms period: two physics steps and the V2X and
control steps between them. The fused-kernel limit of one 10 ms step of 4 robots (``../shared/peers/limit``) is
printed beside the figures when it is there.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.gym.env import PlatoonEnv  # noqa: E402
from orchestrator.gym.vector import make_vector  # noqa: E402

SCENARIO = REPO / "scenarios" / "platoon.yaml"
LIMIT = REPO.parent / "shared" / "peers" / "limit" / "limit_us.py"


def single(channel: str, steps: int = 2000, rounds: int = 3) -> dict:
    """One environment: steps/s (best of ``rounds`` episodes' first ``steps`` steps) and the reset's cost."""
    env = PlatoonEnv(SCENARIO, overrides=[f"channel.type={channel}"])
    best = float("inf")
    for _ in range(rounds):
        _, info = env.reset(seed=42)
        t0 = time.perf_counter()
        for _ in range(steps):
            _, _, terminated, truncated, info = env.step(info["law_accel"])
            if terminated or truncated:
                _, info = env.reset(seed=42)
        best = min(best, time.perf_counter() - t0)
    seen = min(_timed(lambda: env.reset(seed=42)) for _ in range(20))
    seeds = iter(range(1000, 2000))
    new = min(_timed(lambda: env.reset(seed=next(seeds))) for _ in range(5))
    return {"steps_per_s": steps / best, "us_per_step": best / steps * 1e6, "reset_ms": seen * 1e3,
            "reset_new_seed_ms": new * 1e3}


def vector(channel: str, copies: int, steps: int = 20) -> dict:
    """A vector of ``copies`` environments: agent-steps/s over ``steps`` vector steps (after one to warm up)."""
    vec = make_vector(copies, scenario=SCENARIO, overrides=[f"channel.type={channel}"])
    t0 = time.perf_counter()
    _, info = vec.reset(seed=list(range(copies)))
    reset_s = time.perf_counter() - t0
    vec.step(info["law_accel"])
    t0 = time.perf_counter()
    for _ in range(steps):
        _, _, _, _, info = vec.step(info["law_accel"])
    wall = time.perf_counter() - t0
    vec.close()
    return {"agent_steps_per_s": copies * steps / wall, "copies": copies, "first_reset_s": reset_s}


def limit_us(robots: int = 4) -> float | None:
    """The fused kernel's time for one 10 ms step of ``robots`` robots [us], when the peer is there."""
    if not LIMIT.exists():
        return None
    out = subprocess.run([sys.executable, str(LIMIT), str(robots), "1000"], capture_output=True, text=True,
                         check=True, timeout=600)
    return float(out.stdout.strip().splitlines()[-1])


def _timed(call) -> float:
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vector", type=int, default=256, help="copies in the vector (default 256)")
    parser.add_argument("--channels", default="ideal,itsg5", help="comma-separated channel types")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    results: dict[str, dict] = {}
    limit = limit_us()
    for channel in args.channels.split(","):
        one = single(channel)
        many = vector(channel, args.vector)
        results[channel] = {**one, **many}
        print(f"{channel}: one env {one['steps_per_s']:,.0f} steps/s ({one['us_per_step']:.0f} us/step; target "
              f"20,000), reset {one['reset_ms']:.2f} ms (new seed {one['reset_new_seed_ms']:.1f} ms; target 20 ms)")
        print(f"{channel}: vector of {args.vector}: {many['agent_steps_per_s']:,.0f} agent-steps/s (target 500,000), "
              f"first reset of all copies {many['first_reset_s']:.2f} s")
    if limit is not None:
        per_step = 2 * limit  # a decision is two 10 ms physics steps
        print(f"fused-kernel limit: {limit:.2f} us per 10 ms step of 4 robots, {1e6 / per_step:,.0f} decisions/s")
        results["limit_us_per_step"] = {"us": limit}
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=float))


if __name__ == "__main__":
    main()
