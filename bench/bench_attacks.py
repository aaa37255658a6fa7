"""Cost of attacks and misbehaviour detection on 1,000 ITS-G5 stations, against the same run without them.

    .venv/bin/python bench/bench_attacks.py                      # 1,000 stations, platoons of 8, 5 s
    .venv/bin/python bench/bench_attacks.py --split              # also attacks alone and detection alone
    .venv/bin/python bench/bench_attacks.py --stations 200 --duration 2 --profile

Both runs are ``scenarios/platoon.yaml`` as bench/suite.py's itsg5_1000_10hz row has it (1,000 robots in platoons
of 8, ideal placement along the line, ITS-G5 with CAMs at a fixed 10 Hz, no traces) with platooning messages at
10 Hz, so that the desired acceleration attacks have something to forge. The attacked run adds one attacker per
platoon (its third member, 125 on 1,000 stations), the attack types taken in turn over the platoons (every
built-in attack on messages but the ghost and the DoS, which add frames and so change the channel load rather than
cost: see ``--with-added-frames``; the jammers act on the channel, not on messages), attacking from 1 s on, and the
plausibility detector with every check (``checks.CHECKS``: the Kalman residuals and the freshness, leader and
maneuver checks included) on every receiver with the ``ignore`` reaction. ``--split`` also times the attacks
without detection and the detection without attacks: the attacks change the traffic and what the channel carries,
which costs apart from the attack code and the detector.

The figure is CPU time (``time.process_time`` of the scheduler loop, every thread of the process), not wall time,
so that other load on the machine does not spoil it. Each configuration runs in its own process (for its peak
memory): one warm-up run, then ``--repeat`` timed runs of the scheduler loop (bench/bench_platoon.py's ``once``);
``--rounds`` rounds run the configurations in turn (base, attacked, base, attacked, ...) so that a change of load
over time touches them alike, and each configuration's figure is the median of all its timed runs. The channel
runs its link loops on one thread (``NUMBA_NUM_THREADS=1``; ``--threads`` lets it try its parallel loops, whose
choice depends on the load and whose waiting threads count as CPU time). ``--profile`` prints the top self times
of one attacked run (cProfile).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

# attack -> params; targets / ids that depend on the platoon are filled in by ``attacks``
ATTACK_TYPES: list[tuple[str, dict]] = [
    ("constant_position", {"x_m": 40.0, "y_m": 3.0}),
    ("constant_offset", {"dx_m": 5.0}),
    ("random_position", {"half_width_m": 3000.0}),
    ("random_offset", {"max_offset_m": 50.0}),
    ("eventual_stop", {}),
    ("constant_speed", {"v_mps": 100.0}),
    ("speed_offset", {"dv_mps": 20.0}),
    ("random_speed", {"max_mps": 30.0}),
    ("data_replay", {}),
    ("desired_accel_constant", {"u_mps2": 2.0}),
    ("desired_accel_sinusoid", {"amplitude_mps2": 1.0, "frequency_hz": 0.5}),
    ("delayed_message", {"delay_s": 1.0}),
    ("forged_leader", {"u_leader_mps2": 1.0}),
    ("forged_maneuver", {"request": "split"}),
]
ADDED_FRAMES: list[tuple[str, dict]] = [("dos", {"rate_hz": 50.0}), ("ghost", {"ahead_m": 5.0})]


def attacks(stations: int, size: int, added_frames: bool) -> list[dict]:
    """One attacker per platoon (its third member), the types in turn."""
    kinds = ATTACK_TYPES + (ADDED_FRAMES if added_frames else [])
    out = []
    for k, first in enumerate(range(0, stations - 2, size)):
        name, params = kinds[k % len(kinds)]
        params = dict(params)
        if name in ("data_replay", "forged_leader", "forged_maneuver"):  # its platoon's leader
            params["impersonate" if name == "forged_leader" else "peer" if name == "forged_maneuver" else "target"] \
                = f"robot{first}"
        if name == "ghost":
            params["station_id"] = 900_000 + k
        out.append({"robot": f"robot{first + 2}", "type": name, "params": params, "from_s": 1.0})
    return out


CONFIGS = {"base": (False, False), "detection": (False, True), "attacks": (True, False), "attacked": (True, True)}
"""label -> (attacks, detection)"""


def overrides(stations: int, duration: float, config: str, added_frames: bool) -> list[str]:
    sets = [f"vehicles.count={stations}", "platoon.size=8", f"duration_s={duration}", "channel.type=itsg5",
            "channel.generation.mode=fixed_rate", "channel.generation.fixed_rate_hz=10",
            "channel.platooning_message={rate_hz: 10}", "outputs.trace=false"]
    with_attacks, with_detection = CONFIGS[config]
    if with_attacks:
        sets.append(f"attacks={json.dumps(attacks(stations, 8, added_frames))}")
    if with_detection:
        from comms_models.misbehaviour.checks import CHECKS

        sets.append("detection={reaction: ignore, params: {checks: [" + ", ".join(CHECKS) + "]}}")
    return sets


def measure(stations: int, duration: float, config: str, added_frames: bool, repeat: int) -> dict:
    """Run in this process: warm-up, then ``repeat`` timed loops (each one's CPU and wall time)."""
    from bench_platoon import LAST_BREAKDOWN, once

    from orchestrator.scenario import load_scenario

    scenario = load_scenario(REPO / "scenarios" / "platoon.yaml", overrides(stations, duration, config,
                                                                           added_frames))
    once(scenario, False, False)
    runs = []
    for _ in range(repeat):
        wall = once(scenario, False, False)
        runs.append({"wall_s": wall, "cpu_s": LAST_BREAKDOWN["cpu_s"],
                     "federates": {k: v for k, v in LAST_BREAKDOWN.items() if k != "cpu_s"}})
    return {"runs": runs, "steps": round(duration / scenario.step_s) + 1,
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def summary(parts: list[dict], duration: float) -> dict:
    """The medians over every timed run of a configuration (of every round)."""
    runs = [r for part in parts for r in part["runs"]]
    wall = statistics.median(r["wall_s"] for r in runs)
    federates = {k: statistics.median(r["federates"][k] for r in runs) for k in runs[0]["federates"]}
    return {"cpu_s": statistics.median(r["cpu_s"] for r in runs), "cpu_all": sorted(r["cpu_s"] for r in runs),
            "wall_s": wall, "rtf": duration / wall, "steps_per_s": parts[0]["steps"] / wall,
            "peak_mib": max(part["peak_mib"] for part in parts), "federates": federates}


def profile(stations: int, duration: float, added_frames: bool, top: int = 25) -> str:
    from bench_platoon import once

    from orchestrator.scenario import load_scenario

    scenario = load_scenario(REPO / "scenarios" / "platoon.yaml", overrides(stations, duration, "attacked",
                                                                                 added_frames))
    once(scenario, False, False)
    prof = cProfile.Profile()
    prof.enable()
    once(scenario, False, False)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return buf.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stations", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=5.0, help="simulated seconds")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs per process")
    parser.add_argument("--rounds", type=int, default=3, help="processes per configuration, in turn")
    parser.add_argument("--with-added-frames", action="store_true", help="also DoS and ghost attackers")
    parser.add_argument("--profile", action="store_true", help="cProfile one attacked run (top self times)")
    parser.add_argument("--split", action="store_true", help="also time attacks alone and detection alone")
    parser.add_argument("--threads", action="store_true", help="let the channel try its parallel link loops "
                        "(default: one thread, NUMBA_NUM_THREADS=1, so that CPU time is the work done)")
    parser.add_argument("--one", choices=tuple(CONFIGS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.stations, args.duration, args.one, args.with_added_frames, args.repeat)))
        return
    if args.profile:
        print(profile(args.stations, args.duration, args.with_added_frames))
        return
    labels = ("base", "detection", "attacks", "attacked") if args.split else ("base", "attacked")
    parts: dict[str, list[dict]] = {label: [] for label in labels}
    for _ in range(args.rounds):
        for label in labels:
            cmd = [sys.executable, __file__, "--one", label, "--stations", str(args.stations), "--duration",
                   str(args.duration), "--repeat", str(args.repeat)] + (["--with-added-frames"]
                                                                         if args.with_added_frames else [])
            env = os.environ if args.threads else {**os.environ, "NUMBA_NUM_THREADS": "1"}
            proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True, env=env)
            parts[label].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    results = {label: summary(p, args.duration) for label, p in parts.items()}
    base, attacked = results["base"], results["attacked"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine   : {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}, load average {load:.1f}")
    print(f"scenario  : {args.stations} stations in platoons of 8, ITS-G5, CAMs and PMs at 10 Hz, "
          f"{args.duration:g} s, no traces; attacked: {len(attacks(args.stations, 8, args.with_added_frames))} "
          f"attackers, plausibility detection with every check, reaction ignore; median of "
          f"{args.rounds} x {args.repeat} runs")
    for label, r in results.items():
        fed = ", ".join(f"{k} {v:.2f} s" for k, v in r["federates"].items())
        cpus = " ".join(f"{c:.2f}" for c in r["cpu_all"])
        print(f"{label:9s} : CPU {r['cpu_s']:.2f} s (runs {cpus}), wall {r['wall_s']:.2f} s, {r['rtf']:.2f}x real "
              f"time, {r['steps_per_s']:.0f} steps/s, peak {r['peak_mib']:.0f} MiB; wall by federate: {fed}")
    for label in ("detection", "attacks"):
        if label in results:
            r = results[label]
            print(f"{label} alone: {(r['cpu_s'] / base['cpu_s'] - 1) * 100:+.1f} % CPU over the base")
    overhead = attacked["cpu_s"] / base["cpu_s"] - 1.0
    print(f"overhead  : {overhead * 100:+.1f} % CPU (target <= 20 %), "
          f"{(attacked['wall_s'] / base['wall_s'] - 1) * 100:+.1f} % wall, "
          f"{(attacked['peak_mib'] / base['peak_mib'] - 1) * 100:+.1f} % peak memory")


if __name__ == "__main__":
    main()
