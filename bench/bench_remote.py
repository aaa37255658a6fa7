"""Lock-step cost of remote federates over gRPC and framed TCP: p50/p99 per step for 1, 2 and 4 hosted federates.

    .venv/bin/python bench/bench_remote.py
    .venv/bin/python bench/bench_remote.py --duration 20 --counts 1 2 4 --robots 4 --transports gRPC framed

Per transport (gRPC, ``host:port``; framed TCP, ``framed://host:port``) and count N, the platoon scenario (ideal
channel, 10 ms steps) runs with N probes in a ``coopsim host`` (another process on 127.0.0.1 serving both
transports, started and stopped here by pid) and one probe in process, the baseline, all stepped at 50 Hz; the
runs of the two transports alternate, count by count. A probe reads ``state`` and the queued ``cam_rx``
receptions and publishes a robot-indexed port, as the remote tests' probe does. Each federate's ``step`` is timed
call by call in the orchestrator: for a remote probe that is encoding the request, the round trip over the
transport, the host's work and decoding the reply.

With one remote federate, per transport, the step is split into encoding the request, the round trip (with the
host's own handling of the step, timed inside the host) and decoding the reply. For scale, a plain TCP round trip
of a message of the request's size (TCP_NODELAY, a Python echo process) is timed too, and so is the floor of the
gRPC transport itself: the same gRPC pattern as the client (an aio bidirectional stream driven by
``run_until_complete``) against a bare sync gRPC server in another process that answers each request with a
reply of the run's size at once, back to back and with 1 ms of busy work between calls (about the spacing of a
federate's steps in a run: the other threads sleep in between). Figures are per step of one federate, in
microseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from bridge_args import stop  # noqa: E402

from core.federate import Federate, FederateMeta, Input, SetupContext  # noqa: E402
from core.ports import STATE, port  # noqa: E402
from core.timebase import seconds_to_ns  # noqa: E402

PROBE = "bench_remote:BenchProbe"  # this file, imported by name on both sides (bench/ on the path)


class BenchProbe(Federate):
    """Reads the state and the receptions every ``period_s``; publishes ``<name>_out`` (the speeds, doubled)."""

    def __init__(self, name: str, period_s: float = 0.02) -> None:
        super().__init__(name)
        self.period_ns = seconds_to_ns(period_s)

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(inputs=(Input("state", fields=STATE.fields), Input("cam_rx", queued=True)),
                            outputs=(port(f"{self.name}_out", {"v2": "m/s", "rx": ("int64", "-")}),),
                            period_ns=self.period_ns)

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        state = inputs["state"]
        rx = sum(len(r["receiver"]) for r in inputs.get("cam_rx") or () if r is not None)
        return {f"{self.name}_out": {"id": state["id"], "v2": 2.0 * state["v"],
                                     "rx": np.full(len(state["id"]), rx, np.int64)}}


def _timed(cls: type, times: dict[str, list[float]]) -> None:
    """Wrap ``cls.step`` so that every call's wall time is kept per federate name."""
    original = cls.step

    def step(self: Any, t_ns: int, inputs: Any) -> Any:
        start = time.perf_counter()
        out = original(self, t_ns, inputs)
        times[self.name].append(time.perf_counter() - start)
        return out

    cls.step = step  # type: ignore[method-assign]


_HOST = """
import sys, time
import numpy as np
import federates.remote.host as host
spent = []
handle = host._Session.handle
def timed(self, request):
    start = time.perf_counter()
    reply = handle(self, request)
    if request.WhichOneof("call") == "step":
        spent.append(time.perf_counter() - start)
    return reply
host._Session.handle = timed
from federates.remote.host_command import main
code = main(sys.argv[1:])
np.save(OUT, np.asarray(spent))
sys.exit(code)
"""


def start_host(max_sessions: int, times_file: Path) -> tuple[subprocess.Popen, dict[str, str]]:
    """A ``coopsim host`` serving gRPC and framed TCP whose session handler times every step (written to
    ``times_file`` when it stops); its address per transport."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "bench"), str(REPO)])}
    env.pop("COOPSIM_TOKEN", None)
    code = _HOST.replace("OUT", repr(str(times_file)))
    proc = subprocess.Popen([sys.executable, "-c", code, "--listen", "127.0.0.1:0", "--framed-listen", "127.0.0.1:0",
                             "--allow", "bench_remote", "--max-sessions", str(max_sessions)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines = [proc.stdout.readline() if proc.stdout else "" for _ in range(2)]
    if not all("listening on port" in line for line in lines):
        proc.kill()
        raise SystemExit(f"the host did not start: {lines!r}")
    grpc_port, framed_port = (int(line.rsplit(" ", 1)[1]) for line in lines)
    return proc, {"gRPC": f"127.0.0.1:{grpc_port}", "framed": f"framed://127.0.0.1:{framed_port}"}


_ECHO = """
import socket, sys
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
conn, _ = server.accept()
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
size = int(sys.argv[1])
while True:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    conn.sendall(data)
"""


def tcp_round_trip(size: int, count: int = 3000) -> np.ndarray:
    """Round trips of ``size`` bytes to a Python echo process on loopback (TCP_NODELAY), in seconds."""
    proc = subprocess.Popen([sys.executable, "-c", _ECHO, str(size)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline()) if proc.stdout else 0
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            message, buffer = b"x" * size, bytearray(size)
            out = []
            for _ in range(count):
                start = time.perf_counter()
                conn.sendall(message)
                got = 0
                view = memoryview(buffer)
                while got < size:
                    got += conn.recv_into(view[got:], size - got)
                out.append(time.perf_counter() - start)
        return np.asarray(out[200:])
    finally:
        stop(proc)


_GRPC_ECHO = """
import sys
from concurrent import futures
import grpc
size = int(sys.argv[1])
def session(requests, context):
    for _ in requests:
        yield bytes(size)
server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Echo", {
    "Session": grpc.stream_stream_rpc_method_handler(session)}),))
print(server.add_insecure_port("127.0.0.1:0"), flush=True)
server.start()
server.wait_for_termination()
"""


def grpc_round_trip(size: int, reply_size: int, gap_s: float, count: int = 2000) -> np.ndarray:
    """Round trips of ``size`` bytes answered by ``reply_size`` bytes over one gRPC stream, driven as the client
    drives its calls, with ``gap_s`` of busy work between calls, in seconds."""
    import asyncio

    import grpc

    proc = subprocess.Popen([sys.executable, "-c", _GRPC_ECHO, str(reply_size)], stdout=subprocess.PIPE, text=True)
    loop = asyncio.new_event_loop()
    try:
        port = int(proc.stdout.readline()) if proc.stdout else 0

        async def open_stream() -> tuple[Any, Any]:
            channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
            await channel.channel_ready()
            return channel, channel.stream_stream("/bench.Echo/Session")()

        async def exchange(stream: Any, message: bytes) -> bytes:
            await stream.write(message)
            return await stream.read()

        channel, stream = loop.run_until_complete(open_stream())
        message, out = bytes(size), []
        for _ in range(count):
            start = time.perf_counter()
            loop.run_until_complete(exchange(stream, message))
            end = time.perf_counter()
            out.append(end - start)
            while time.perf_counter() < end + gap_s:  # the orchestrator's own work between two calls
                pass
        stream.cancel()
        loop.run_until_complete(channel.close())
        return np.asarray(out[200:])
    finally:
        loop.close()
        stop(proc)


def run(address: str, count: int, robots: int, duration: float, times: dict[str, list[float]]) -> None:
    from orchestrator.runner import run_scenario
    from orchestrator.scenario import parse_scenario

    entries = [{"name": "local", "type": PROBE}]
    entries += [{"name": f"remote{k}", "type": PROBE, "remote": address} for k in range(count)]
    overrides = [f"duration_s={duration}", f"vehicles.count={robots}", f"platoon.size={robots}",
                 "outputs.plots=false", "outputs.report=false", "channel={type: ideal, rate_hz: 10}",
                 f"federates={json.dumps(entries)}"]
    scenario = parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=overrides)
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as out:
        result = run_scenario(scenario, Path(out))
    if not result.ok:
        raise SystemExit(f"run with {count} remote federates failed: {result.error}")


def _pct(values: np.ndarray) -> str:
    return f"{np.percentile(values, 50):.0f} / {np.percentile(values, 99):.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=20.0, help="simulated seconds per run")
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2, 4], help="remote federates per run")
    parser.add_argument("--robots", type=int, default=4)
    parser.add_argument("--transports", nargs="+", default=["gRPC", "framed"], choices=["gRPC", "framed"])
    args = parser.parse_args()

    import federates.remote.client as client
    import federates.remote.framed_client as framed_client

    sys.modules.setdefault("bench_remote", sys.modules[__name__])
    times: dict[str, list[float]] = defaultdict(list)
    _timed(client.RemoteFederate, times)
    _timed(BenchProbe, times)
    # where a remote step's time goes, on the orchestrator's side: the round trip is ``_run`` over gRPC and
    # ``FramedTransport.exchange`` over framed TCP (both include the host's handling)
    parts: dict[str, list[float]] = defaultdict(list)
    sizes: list[int] = []
    reply_sizes: list[int] = []
    patched = [(client, "build_request"), (client, "decode_outputs"), (client, "_run"),
               (framed_client.FramedTransport, "exchange")]
    for owner, name in patched:
        original = getattr(owner, name)
        key = "round_trip" if name in ("_run", "exchange") else name

        def timed(*a: Any, _original: Any = original, _key: str = key, **k: Any) -> Any:
            start = time.perf_counter()
            out = _original(*a, **k)
            parts[_key].append(time.perf_counter() - start)
            if _key == "build_request":
                sizes.append(out.ByteSize())
            elif _key == "round_trip" and hasattr(out, "ByteSize"):
                reply_sizes.append(out.ByteSize())
            return out

        setattr(owner, name, timed)
    rows = []
    split: dict[str, dict[str, np.ndarray]] = {}
    size, reply_size = 600, 140  # without a run of one federate to measure them: about a step of the probe
    with tempfile.TemporaryDirectory(prefix="bench-remote-host-") as scratch:
        host_times = Path(scratch) / "host_step.npy"
        proc, addresses = start_host(max(args.counts), host_times)
        try:
            for transport in args.transports:  # warm-up: imports, compiled kernels, the host
                run(addresses[transport], 1, args.robots, 2.0, defaultdict(list))
            for count in args.counts:
                for transport in args.transports:
                    times.clear()
                    parts.clear()
                    sizes.clear()
                    reply_sizes.clear()
                    run(addresses[transport], count, args.robots, args.duration, times)
                    steps = [np.asarray(times[f"remote{k}"][50:]) for k in range(count)]
                    local = np.asarray(times["local"][50:]) * 1e6
                    rows.append((transport, count, local, np.concatenate(steps) * 1e6, np.sum(steps, axis=0) * 1e6))
                    if count == 1:
                        split[transport] = {k: np.asarray(v[50:]) * 1e6 for k, v in parts.items()}
                        size, reply_size = int(np.median(sizes)), int(np.median(reply_sizes))
        finally:
            stop(proc)
        host_step = np.load(host_times) * 1e6 if host_times.is_file() else np.zeros(1)
    tcp = tcp_round_trip(size) * 1e6
    bare = {gap: grpc_round_trip(size, reply_size, gap) * 1e6 for gap in (0.0, 1e-3)}
    print(f"{args.robots} robots, {args.duration:g} s at 50 Hz per run; per step of one federate, microseconds")
    print("| transport | remote federates | in-process p50 / p99 | remote p50 / p99 | all remote per instant "
          "p50 / p99 |")
    print("|---|---|---|---|---|")
    for transport, count, local, remote, per_instant in rows:
        print(f"| {transport} | {count} | {_pct(local)} | {_pct(remote)} | {_pct(per_instant)} |")
    for transport, parts_of in split.items():
        print(f"{transport}, one remote federate, p50 / p99: encode the request {_pct(parts_of['build_request'])}, "
              f"round trip {_pct(parts_of['round_trip'])}, decode the reply {_pct(parts_of['decode_outputs'])}")
    print(f"the host's handling of a step, all runs: {_pct(host_step)}; request {size} bytes, reply {reply_size}")
    print(f"plain TCP round trip of {size} bytes (Python echo, TCP_NODELAY): p50 / p99 {_pct(tcp)}")
    print(f"bare gRPC round trip, {size} bytes out and {reply_size} back (the client's aio stream, a sync server "
          f"answering at once): back to back p50 / p99 {_pct(bare[0.0])}, 1 ms apart {_pct(bare[1e-3])}")


if __name__ == "__main__":
    main()
