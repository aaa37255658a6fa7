"""The speed targets in one table: each figure measured in its own process, beside its target and the peer measured
in the same run (the fused-kernel limit and, when installed, SUMO).

    make bench                                   # everything (a few minutes on 2 cores)
    .venv/bin/python bench/suite.py --only help,spawn_10000

Peers come from ``../shared/peers`` next to the repository (``limit/limit_us.py``: the fused numba kernel of
kinematics + look-ahead CACC; ``sumo-highway/``: 1,000 SUMO vehicles at 10 ms steps). A figure whose peer is
missing is printed without a ratio. Benchmarks are not timed tests: the table says which targets are met today.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PEERS = REPO.parent / "shared" / "peers"
PY = sys.executable
COOPSIM = [PY, "-m", "orchestrator.cli"]


def _run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 900) -> float:
    """Wall time of a command (it must succeed)."""
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, env={**os.environ, **(env or {})}, check=True, capture_output=True,
                   timeout=timeout)
    return time.perf_counter() - t0


def _quiet_run(out: Path, *sets: str) -> list[str]:
    return [*COOPSIM, "run", "scenarios/platoon.yaml", "--quiet", "--out", str(out),
            *(a for s in sets for a in ("--set", s))]


# -- the measurements, each run in a child process (``--one NAME`` prints one JSON line) ------------------------
def first_run() -> dict:
    """The first run after an install (an empty kernel cache, then the install's ``orchestrator.warm`` step, as
    ``make demo`` does) against the same run warm; the detail gives the run without the install step too."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = _quiet_run(Path(tmp) / "run", "outputs.plots=false", "outputs.report=false")
        bare = {"NUMBA_CACHE_DIR": str(Path(tmp) / "bare")}
        cold = _run(cmd, bare)
        env = {"NUMBA_CACHE_DIR": str(Path(tmp) / "installed")}
        install = _run([PY, "-m", "orchestrator.warm", "--quiet"], env)
        first = _run(cmd, env)
        warm = min(_run(cmd, env) for _ in range(2))
    return {"figure": first - warm, "unit": "s", "target": 1.5, "better": "lower",
            "detail": f"first {first:.2f} s, warm {warm:.2f} s; without the install step {cold:.2f} s "
                      f"(the install's warm-up takes {install:.1f} s)"}


def whole_command() -> dict:
    """`coopsim run` of the 40 s platoon with every output, over its simulation loop."""
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for k in range(2):
            out = Path(tmp) / f"run{k}"
            wall = _run(_quiet_run(out))
            loop = json.loads((out / "run.json").read_text())["wall_time_s"]
            runs.append((wall / loop, wall, loop))
    ratio, wall, loop = min(runs)
    return {"figure": ratio, "unit": "x", "target": 2.0, "better": "lower",
            "detail": f"whole {wall:.2f} s, loop {loop:.2f} s"}


def help_time() -> dict:
    """`coopsim --help`."""
    best = min(_run([*COOPSIM, "--help"]) for _ in range(3))
    return {"figure": best, "unit": "s", "target": 0.3, "better": "lower", "detail": "best of 3"}


LOOP_CPU: list[float] = []  # process CPU time of the fastest loop of the last _loop_seconds (all threads)


def _loop_seconds(sets: list[str], trace: bool, repeat: int = 2) -> float:
    """Wall time of the scheduler loop (as bench_platoon times it), best of ``repeat`` after a warm-up run; the CPU
    time of that run goes to ``LOOP_CPU`` (on a busy machine it shows what the loop itself costs)."""
    sys.path.insert(0, str(REPO / "bench"))
    from bench_platoon import LAST_BREAKDOWN, once

    from orchestrator.scenario import load_scenario

    scenario = load_scenario(REPO / "scenarios" / "platoon.yaml", sets)
    once(scenario, trace, False)  # compile and warm
    runs = []
    for _ in range(repeat):
        wall = once(scenario, trace, False)
        runs.append((wall, LAST_BREAKDOWN["cpu_s"]))
    wall, cpu = min(runs)
    LOOP_CPU[:] = [cpu]
    return wall


def _cpu_note() -> str:
    return f" (CPU {LOOP_CPU[0]:.2f} s)" if LOOP_CPU else ""


def full_fidelity_4() -> dict:
    """4 robots, dynamic physics, ITS-G5, look-ahead CACC, traces on: real-time factor."""
    wall = _loop_seconds(["vehicles.template.model=dynamic", "channel.type=itsg5"], trace=True)
    return {"figure": 40.0 / wall, "unit": "x real time", "target": 500.0, "better": "higher",
            "detail": f"40 s simulated in {wall:.3f} s{_cpu_note()}"}


def _limit_us(n: int) -> float | None:
    script = PEERS / "limit" / "limit_us.py"
    if not script.exists():
        return None
    out = subprocess.run([PY, str(script), str(n), "1000"], capture_output=True, text=True, check=True, timeout=600)
    return float(out.stdout.strip().splitlines()[-1])


def _ideal(n: int, seconds: float | None = None) -> dict:
    seconds = seconds or (2.0 if n <= 1000 else 1.0)
    wall = _loop_seconds([f"vehicles.count={n}", "platoon.size=8", f"duration_s={seconds}"], trace=False)
    per_step = wall / (seconds / 0.01) * 1e6
    limit = _limit_us(n)
    return {"figure": per_step / limit if limit else per_step, "unit": "x the limit" if limit else "us/step",
            "target": 1.5 if limit else None, "better": "lower",
            "detail": f"{per_step:.0f} us/step" + (f" vs fused kernel {limit:.0f} us" if limit else "") + _cpu_note()}


def ideal_1000() -> dict:
    """1,000 robots, ideal channel, per step against the fused-kernel limit."""
    return _ideal(1000)


def ideal_10000() -> dict:
    """10,000 robots, ideal channel, per step against the fused-kernel limit."""
    return _ideal(10_000)


# The leaders' S-curve profile drives straight for the first seconds, where the kinematics and the look-ahead CACC
# skip trigonometry whose value is exact at a zero heading; 20 s include the curves, where every step pays for it.
def ideal_1000_curves() -> dict:
    """1,000 robots, ideal channel, 20 s including the S-curves, per step against the fused-kernel limit."""
    return _ideal(1000, 20.0)


def ideal_10000_curves() -> dict:
    """10,000 robots, ideal channel, 20 s including the S-curves, per step against the fused-kernel limit."""
    return _ideal(10_000, 20.0)


def _sumo_rtf() -> float | None:
    cfg = PEERS / "sumo-highway" / "hw.sumocfg"
    sumo = shutil.which("sumo")
    if sumo is None:
        try:
            import sumo as sumo_package  # eclipse-sumo's wheel ships the binary

            sumo = str(Path(sumo_package.SUMO_HOME) / "bin" / "sumo")
        except ImportError:
            return None
    if not cfg.exists() or not Path(sumo).exists():
        return None
    out = subprocess.run([sumo, "-c", str(cfg), "--no-step-log", "--duration-log.statistics"], cwd=cfg.parent,
                         capture_output=True, text=True, timeout=900)
    match = re.search(r"Real time factor:\s*([0-9.]+)", out.stdout + out.stderr)
    return float(match.group(1)) if match else None


def itsg5_1000_10hz() -> dict:
    """1,000 ITS-G5 stations at 10 Hz: real-time factor, and against SUMO on 1,000 vehicles (no V2X)."""
    seconds = 5.0
    wall = _loop_seconds(["vehicles.count=1000", "platoon.size=8", f"duration_s={seconds}", "channel.type=itsg5",
                          "channel.generation.mode=fixed_rate", "channel.generation.fixed_rate_hz=10"],
                         trace=False, repeat=1)
    rtf = seconds / wall
    sumo = _sumo_rtf()
    return {"figure": rtf, "unit": "x real time", "target": 10.0, "better": "higher",
            "detail": f"{seconds:g} s in {wall:.2f} s{_cpu_note()}" + (f"; SUMO {sumo:.1f}x, ratio {rtf / sumo:.2f}"
                                                                       if sumo else "; SUMO not installed")}


def itsg5_10000_etsi() -> dict:
    """10,000 ITS-G5 stations with the ETSI generation rules: real-time factor and peak memory."""
    seconds = 2.0
    wall = _loop_seconds(["vehicles.count=10000", "platoon.size=8", f"duration_s={seconds}", "channel.type=itsg5"],
                         trace=False, repeat=1)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"figure": seconds / wall, "unit": "x real time", "target": 1.0, "better": "higher",
            "detail": f"{seconds:g} s in {wall:.2f} s{_cpu_note()}; peak memory {peak:.0f} MiB (target < 1,024)"}


def cv2x_1000_10hz() -> dict:
    """1,000 C-V2X (LTE-V2X mode 4) stations at 10 Hz: real-time factor (the ITS-G5 row's target)."""
    seconds = 5.0
    wall = _loop_seconds(["vehicles.count=1000", "platoon.size=8", f"duration_s={seconds}", "channel.type=cv2x",
                          "channel.generation.mode=fixed_rate", "channel.generation.fixed_rate_hz=10"],
                         trace=False, repeat=1)
    return {"figure": seconds / wall, "unit": "x real time", "target": 10.0, "better": "higher",
            "detail": f"{seconds:g} s in {wall:.2f} s{_cpu_note()}; load {os.getloadavg()[0]:.1f}"}


def cv2x_10000_etsi() -> dict:
    """10,000 C-V2X stations with the ETSI generation rules: real-time factor and peak memory."""
    seconds = 2.0
    wall = _loop_seconds(["vehicles.count=10000", "platoon.size=8", f"duration_s={seconds}", "channel.type=cv2x"],
                         trace=False, repeat=1)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"figure": seconds / wall, "unit": "x real time", "target": 1.0, "better": "higher",
            "detail": f"{seconds:g} s in {wall:.2f} s{_cpu_note()}; load {os.getloadavg()[0]:.1f}; peak memory "
                      f"{peak:.0f} MiB"}


def spawn_10000() -> dict:
    """Spawning 10,000 robots at t = 0 in every federate."""
    from orchestrator.build.world import build_world
    from orchestrator.scenario import load_scenario

    best = float("inf")
    for _ in range(3):
        scenario = load_scenario(REPO / "scenarios" / "platoon.yaml", [
            "vehicles.count=10000", "platoon.size=8", "duration_s=1", "outputs.trace=false"])
        world = build_world(scenario)
        world.scheduler.setup()
        t0 = time.perf_counter()
        world.scheduler._apply_pending(0)  # the spawns queued for t = 0, as the first instant applies them
        best = min(best, time.perf_counter() - t0)
    return {"figure": best * 1e3, "unit": "ms", "target": 20.0, "better": "lower", "detail": "best of 3"}


def gym_one() -> dict:
    """One Gymnasium environment of the 4-robot platoon (``bench/bench_gym.py``), ideal channel: decisions per
    second (20 ms each), against the fused kernel's limit for the same two 10 ms steps."""
    from bench_gym import limit_us, single

    one = single("ideal")
    limit = limit_us(4)
    return {"figure": one["steps_per_s"], "unit": "steps/s", "target": 20_000.0, "better": "higher",
            "detail": f"{one['us_per_step']:.0f} us/step, reset {one['reset_ms']:.2f} ms"
                      + (f"; fused kernel {2 * limit:.1f} us per decision" if limit else "")}


def gym_256() -> dict:
    """A vector of 256 copies of the Gymnasium environment, ideal channel: agent-steps per second (copies stepped
    one after the other: no one-world batching yet)."""
    from bench_gym import vector

    many = vector("ideal", 256)
    return {"figure": many["agent_steps_per_s"], "unit": "agent-steps/s", "target": 500_000.0, "better": "higher",
            "detail": "SyncVectorEnv of copies"}


def sweep_1000() -> dict:
    """The whole `coopsim sweep` of the 40 s platoon over 1,000 time gaps, ideal channel, ``--jobs 2`` (the points
    batched into shared worlds), beside the fused kernel's time for the same 4,000 robots over 4,000 steps."""
    values = ",".join(f"{0.5 + 0.001 * k:.3f}" for k in range(1000))
    with tempfile.TemporaryDirectory() as tmp:
        wall = _run([*COOPSIM, "sweep", "scenarios/platoon.yaml", "--param", f"controller.time_gap_s={values}",
                     "--jobs", "2", "--quiet", "--out", str(Path(tmp) / "sweep")], timeout=3600)
        batching = json.loads((Path(tmp) / "sweep" / "sweep.json").read_text())["batching"]
    limit = _limit_us(4000)
    return {"figure": wall, "unit": "s", "target": 30.0, "better": "lower",
            "detail": f"{batching['batched_runs']} runs in {batching['worlds']} worlds"
                      + (f"; fused kernel {limit * 4000 / 1e6:.2f} s" if limit else "")}


MEASUREMENTS: dict[str, Callable[[], dict]] = {
    "first_run": first_run, "whole_command": whole_command, "help": help_time, "full_fidelity_4": full_fidelity_4,
    "ideal_1000": ideal_1000, "ideal_10000": ideal_10000, "ideal_1000_curves": ideal_1000_curves,
    "ideal_10000_curves": ideal_10000_curves, "itsg5_1000_10hz": itsg5_1000_10hz,
    "itsg5_10000_etsi": itsg5_10000_etsi, "cv2x_1000_10hz": cv2x_1000_10hz, "cv2x_10000_etsi": cv2x_10000_etsi,
    "spawn_10000": spawn_10000, "gym_one": gym_one, "gym_256": gym_256,
    "sweep_1000": sweep_1000,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated measurements (default: all): " + ", ".join(MEASUREMENTS))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(MEASUREMENTS[args.one]()))
        return
    names = args.only.split(",") if args.only else list(MEASUREMENTS)
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"coopsim speed targets · {platform.machine()} · {os.cpu_count()} cores · "
                        f"{time.strftime('%Y-%m-%d')}")
    for column in ("measurement", "figure", "target", "met", "detail"):
        table.add_column(column, justify="right" if column in ("figure", "target") else "left")
    results = {}
    for name in names:
        proc = subprocess.run([PY, __file__, "--one", name], cwd=REPO, capture_output=True, text=True)
        if proc.returncode != 0:
            table.add_row(name, "-", "-", "error", proc.stderr.strip().splitlines()[-1][:80])
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        results[name] = r
        met = "-" if r["target"] is None else ("yes" if (r["figure"] <= r["target"] if r["better"] == "lower"
                                                         else r["figure"] >= r["target"]) else "no")
        target = "-" if r["target"] is None else f"{'<=' if r['better'] == 'lower' else '>='} {r['target']:g}"
        table.add_row(name, f"{r['figure']:.3g} {r['unit']}", target, met, r["detail"])
    Console().print(table)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
