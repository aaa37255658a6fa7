"""Lock-step over HELICS beside lock-step over gRPC (``coopsim host``): p50/p99 per step, steps/s, peak memory.

    .venv/bin/python bench/bench_helics.py --steps 500 --counts 1 2 4 --robots 4 100
    .venv/bin/python bench/bench_helics.py --steps 500 --robots 4 --cores zmq tcp   # tcp: values under ~4 kB only

HELICS: a real ``helics_broker`` on loopback (a free port, stopped by pid) and one process per federate, stepped
at 50 Hz (``bench/helics_peer_process.py``). ``fan N``: a coordinating federate publishes coopsim's ``state``
table (encoded with ``federates/remote/codec.py``, sent as HELICS raw bytes) and N peers each answer with a probe
table; ``chain``: physics -> V2X (``cam_rx``) -> control (``commands``) -> physics. Every table is decoded and
compared with the one sent for that step; any mismatch, missing value or unexpected grant stops the benchmark.
An exchange that fails or hangs (a hung federate dumps its Python stack) is run once more and the first failure
is printed below the table. The round trip is the coordinator's, from encoding ``state`` at step k to having
decoded every answer at its next grant. Its steps/s and real-time factor are of that exchange alone (no
physics); peak memory is the largest federate process's.

gRPC, in the same run: ``bench/bench_remote.py``'s platoon run with N probes in one ``coopsim host`` (N = 1, 2, 4
and 3 for the chain's three federates), the same steps at 50 Hz. Its per-instant figure is the sum of the N remote
step calls of one instant (encode, round trip, host's work, decode), which is what the orchestrator waits for;
the first 10 % of the steps are left out of both.
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from bridge_args import machine  # noqa: E402
from helics_peer_process import run_exchange  # noqa: E402

RETRIES: list[str] = []  # exchanges that had to be run again, and why


def p50_p99(values_s: np.ndarray) -> str:
    """``p50 / p99`` in microseconds."""
    return f"{np.percentile(values_s, 50) * 1e6:,.0f} / {np.percentile(values_s, 99) * 1e6:,.0f}"


def helics_row(shape: str, peers: int, steps: int, robots: int, core: str) -> dict[str, Any]:
    """One HELICS exchange, checked: the coordinator's round trips and grant waits, steps/s, peak memory."""
    for attempt in (1, 2):
        try:
            exchange = run_exchange(shape, peers, steps, robots, core=core, timeout_s=60)
            break
        except RuntimeError as exc:
            if attempt == 2:
                raise
            # reported with the table: a failed or hung exchange is a finding too, not only a nuisance
            RETRIES.append(f"{core} {shape} {peers}, {robots} robots: first attempt failed: {exc}")
    if exchange.broker.poll() is None:
        raise SystemExit("the helics_broker is still running after the exchange")
    period_ns = 20_000_000
    for role in exchange.roles:
        result = exchange.results[role.name]
        first = 1 if role.offset_ns == 0 else 0
        want = [m * period_ns + role.offset_ns for m in range(first, steps + first)]
        if result["error_count"] or result["granted_ns"] != want:
            raise SystemExit(f"{shape} {peers}, {role.name}: {result['error_count']} bad inputs "
                             f"{result['errors'][:3]}, grants {result['granted_ns'][:5]}...")
    coordinator = exchange.results[exchange.roles[0].name]
    skip = steps // 10
    return {"round_trip": np.asarray(coordinator["round_trip_s"][skip:]),
            "grant_wait": np.asarray(coordinator["grant_wait_s"][skip:]),
            "steps_per_s": steps / coordinator["wall_s"], "real_time": steps * 0.02 / coordinator["wall_s"],
            "peak_mib": max(r["maxrss_kib"] for r in exchange.results.values()) / 1024,
            "state_bytes": coordinator["sizes"][exchange.roles[0].publishes], "stuck": exchange.stuck}


def grpc_rows(counts: list[int], steps: int, robots: int) -> dict[int, dict[str, np.ndarray]]:
    """``bench_remote``'s lock-step runs, one per count: each remote step call and the sum per instant."""
    import bench_remote

    import federates.remote.client as client

    times: dict[str, list[float]] = defaultdict(list)
    bench_remote._timed(client.RemoteFederate, times)
    out: dict[int, dict[str, np.ndarray]] = {}
    duration = steps * 0.02
    with tempfile.TemporaryDirectory(prefix="bench-helics-grpc-") as scratch:
        proc, address = bench_remote.start_host(max(counts), Path(scratch) / "host_step.npy")
        try:
            bench_remote.run(address, 1, robots, 2.0, defaultdict(list))  # warm-up: imports, kernels, the host
            for count in counts:
                times.clear()
                bench_remote.run(address, count, robots, duration, times)
                calls = [np.asarray(times[f"remote{k}"]) for k in range(count)]
                skip = len(calls[0]) // 10
                out[count] = {"per_federate": np.concatenate([c[skip:] for c in calls]),
                              "per_instant": np.sum([c[skip:] for c in calls], axis=0)}
        finally:
            bench_remote.stop(proc)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=500, help="lock-step steps at 50 Hz per run")
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2, 4], help="peers of the fan shape")
    parser.add_argument("--robots", type=int, nargs="+", default=[4], help="rows of the state table")
    parser.add_argument("--cores", nargs="+", default=["zmq"], help="HELICS core types (zmq, tcp, zmq_ss, ...)")
    parser.add_argument("--no-grpc", action="store_true", help="HELICS only")
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}; Python {platform.python_version()}; "
          f"{args.steps} steps at 50 Hz per run; microseconds")
    shapes = [("fan", n) for n in args.counts] + [("chain", 3)]
    for robots in args.robots:
        started = time.perf_counter()
        helics = {(core, shape, n): helics_row(shape, n, args.steps, robots, core)
                  for core in args.cores for shape, n in shapes}
        helics_s = time.perf_counter() - started
        grpc = {} if args.no_grpc else grpc_rows(sorted({n for _, n in shapes}), args.steps, robots)
        state_bytes = next(iter(helics.values()))["state_bytes"]
        print(f"\n{robots} robots: state table {state_bytes} bytes; HELICS runs took {helics_s:.1f} s in all")
        print("| shape | HELICS core | HELICS round trip p50 / p99 | of which grant wait p50 / p99 | HELICS steps/s "
              "(real time) | peak MiB per federate | gRPC per instant p50 / p99 | gRPC per federate p50 / p99 |")
        print("|---|---|---|---|---|---|---|---|")
        for (core, shape, n), row in helics.items():
            label = f"fan, {n} peer{'s' if n > 1 else ''}" if shape == "fan" else "physics -> V2X -> control"
            remote = grpc.get(n)
            grpc_cells = (f"{p50_p99(remote['per_instant'])} ({n} remote) | {p50_p99(remote['per_federate'])}"
                          if remote else "- | -")
            print(f"| {label} | {core} | {p50_p99(row['round_trip'])} | {p50_p99(row['grant_wait'])} | "
                  f"{row['steps_per_s']:,.0f} ({row['real_time']:.1f}x) | {row['peak_mib']:.0f} | {grpc_cells} |")
        for (core, shape, n), row in helics.items():
            if row["stuck"]:  # their figures were written before they tried to leave; they were stopped by pid
                print(f"{core} {shape} {n}: the disconnect of {', '.join(row['stuck'])} did not complete")
    for note in RETRIES:
        print(f"\n{note}")
    print(f"\nthis process's peak memory (gRPC orchestrator runs): "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
