"""HELICS federates exchanging coopsim port tables in lock-step, each in its own process, under one helics_broker.

Two shapes, both stepped every ``period`` of simulated time:

- ``fan``: a coordinating federate publishes the ``state`` table (coopsim's codec, as HELICS raw bytes) and N
  peers each answer with a probe table computed from it (``bench/bench_remote.py``'s probe: ``v2`` = 2 v).
- ``chain``: physics publishes ``state``; V2X answers with a ``cam_rx`` table (every ordered pair of robots);
  control reads both and answers with ``commands``, which physics reads.

The federate publishing ``state`` steps at 0, T, 2T, ...; every other federate is offset within the period, so
it is granted only after what it reads was published and it answers before the coordinator's next grant. The
coordinator's round trip of step k is from encoding ``state`` at kT to having decoded every answer at its grant
(k + 1) T: one HELICS time-grant exchange. Every federate checks every input at every grant against the table
expected for that step (tables are a function of the step index) and writes a JSON summary.

Run one federate: ``python bench/helics_peer_process.py SPEC_JSON`` (see :func:`run_exchange`, which starts them
all and the broker).
"""

from __future__ import annotations

import faulthandler
import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from bridge_args import stop  # noqa: E402

from federates.remote.codec import decode_port, encode_port, pb  # noqa: E402

Table = dict[str, np.ndarray]
DISCONNECT_S = 20.0
DISCONNECT_STUCK = 3  # exit status of a federate whose disconnect did not complete
STATE_KEYS = ("x", "y", "yaw", "v", "a", "yaw_rate", "steer")


# -- the tables of step k ---------------------------------------------------------------------------------------
def state_table(step: int, robots: int) -> Table:
    """coopsim's ``state`` port for ``robots`` robots at step ``step``: ids and seven float64 columns, different
    at every step so that a value of another step cannot pass for this one."""
    rng = np.random.default_rng(step)
    table: Table = {"id": np.arange(1, robots + 1, dtype=np.int64)}
    for key in STATE_KEYS:
        table[key] = rng.standard_normal(robots)
    return table


def answer_table(state: Table) -> Table:
    """A probe's answer (robot-indexed, as the gRPC benchmark's probe publishes)."""
    return {"id": state["id"], "v2": 2.0 * state["v"], "rx": np.full(len(state["id"]), len(state["id"]), np.int64)}


def cam_table(state: Table) -> Table:
    """An event-indexed ``cam_rx``-like table: every robot receives every other robot's pose and speed."""
    n = len(state["id"])
    sender, receiver = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    keep = sender != receiver
    sender, receiver = sender[keep], receiver[keep]
    return {"sender": state["id"][sender], "receiver": state["id"][receiver], "x": state["x"][sender],
            "y": state["y"][sender], "v": state["v"][sender], "distance": np.hypot(
                state["x"][sender] - state["x"][receiver], state["y"][sender] - state["y"][receiver])}


def command_table(state: Table, cam: Table) -> Table:
    """A ``commands``-like table: each robot's speed from the mean speed it heard, and an acceleration."""
    heard = np.bincount(np.searchsorted(state["id"], cam["receiver"]), weights=cam["v"], minlength=len(state["id"]))
    return {"robot": state["id"], "speed": heard / max(len(state["id"]) - 1, 1), "accel": -0.5 * state["a"]}


def encode(table: Table, where: str) -> bytes:
    """A port table as the bytes of coopsim's ``PortValue`` message (packed typed columns)."""
    return encode_port(table, pb.PortValue(), where).SerializeToString()


def decode(data: bytes, where: str) -> Table:
    """The port table of ``PortValue`` bytes."""
    message = pb.PortValue()
    message.ParseFromString(data)
    return decode_port(message, where) or {}


def digest(table: Table) -> str:
    """A hash of a table's column names, dtypes, shapes and values, for checking what a federate received."""
    h = hashlib.sha256()
    for key, value in table.items():
        h.update(f"{key}:{value.dtype.str}:{value.shape};".encode())
        h.update(np.ascontiguousarray(value).tobytes())
    return h.hexdigest()[:16]


def same(a: Table, b: Table) -> bool:
    """Equal column names, dtypes and values (bit for bit: the codec is lossless)."""
    return list(a) == list(b) and all(a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a)


# -- who publishes what, and when -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Role:
    """One federate: its name, offset in the period, the key it publishes and the keys it reads."""

    name: str
    offset_ns: int
    publishes: str
    reads: tuple[str, ...]


def roles(shape: str, peers: int, period_ns: int) -> list[Role]:
    """The federates of a shape; the first one is the coordinator (offset 0, publishes ``state``)."""
    if shape == "fan":
        return [Role("coord", 0, "coord/state", tuple(f"peer{i}/answer" for i in range(peers)))] + [
            Role(f"peer{i}", period_ns // 2, f"peer{i}/answer", ("coord/state",)) for i in range(peers)]
    if shape == "chain":
        return [Role("physics", 0, "physics/state", ("control/commands",)),
                Role("v2x", period_ns // 4, "v2x/cam_rx", ("physics/state",)),
                Role("control", period_ns // 2, "control/commands", ("physics/state", "v2x/cam_rx"))]
    raise ValueError(f"unknown shape {shape!r} (fan or chain)")


def expected(key: str, step: int, robots: int) -> Table:
    """The table published under ``key`` for step ``step``."""
    state = state_table(step, robots)
    kind = key.rsplit("/", 1)[1]
    if kind == "state":
        return state
    if kind == "answer":
        return answer_table(state)
    if kind == "cam_rx":
        return cam_table(state)
    return command_table(state, cam_table(state))


def answer(role: Role, inputs: Mapping[str, Table]) -> Table:
    """What a non-coordinating federate publishes, computed from the tables it decoded."""
    kind = role.publishes.rsplit("/", 1)[1]
    state = next(v for k, v in inputs.items() if k.endswith("/state"))
    if kind == "answer":
        return answer_table(state)
    if kind == "cam_rx":
        return cam_table(state)
    return command_table(state, inputs["v2x/cam_rx"])


# -- one federate -----------------------------------------------------------------------------------------------
def federate(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Join the broker as ``spec["role"]``, run ``spec["steps"]`` lock-step grants, return the summary: granted
    times (ns), errors, (grant, key, step, digest) of every table received, and the coordinator's timings."""
    import helics as h

    period, steps, robots = int(spec["period_ns"]), int(spec["steps"]), int(spec["robots"])
    everyone = {r.name: r for r in roles(spec["shape"], int(spec["peers"]), period)}
    role = everyone[spec["role"]]
    offset_of = {r.publishes: r.offset_ns for r in everyone.values()}
    info = h.helicsCreateFederateInfo()
    h.helicsFederateInfoSetCoreTypeFromString(info, spec.get("core", "zmq"))
    h.helicsFederateInfoSetCoreInitString(info, f"--federates=1 --broker_address=tcp://127.0.0.1:{spec['port']}")
    # granted only the times it asks for: an interruptible federate is granted early when a value arrives
    h.helicsFederateInfoSetFlagOption(info, h.HELICS_FLAG_UNINTERRUPTIBLE, True)
    fed = h.helicsCreateValueFederate(role.name, info)
    pub = h.helicsFederateRegisterGlobalPublication(fed, role.publishes, h.HELICS_DATA_TYPE_RAW, "")
    subs = {key: h.helicsFederateRegisterSubscription(fed, key, "") for key in role.reads}
    h.helicsFederateEnterExecutingMode(fed)
    coordinator = role.offset_ns == 0
    granted: list[int] = []
    errors: list[str] = []
    round_trip: list[float] = []
    grant_wait: list[float] = []
    sizes: dict[str, int] = {}
    received: list[tuple[int, str, int, str]] = []  # grant, key, step, digest of the decoded table
    checked = 0
    start = time.perf_counter()
    sent_at = 0.0
    if coordinator:  # step 0 goes out at time 0, before the first grant
        sent_at = time.perf_counter()
        data = encode(state_table(0, robots), role.publishes)
        sizes[role.publishes] = len(data)
        h.helicsPublicationPublishBytes(pub, data)
    grants = range(1, steps + 1) if coordinator else range(steps)
    unchecked: list[tuple[int, str, int, Table]] = []

    def check() -> None:
        """Compare what the last grant brought with the tables of its steps (while waiting for the next grant,
        so that the check is not part of the round trip)."""
        nonlocal checked
        for grant, key, step, table in unchecked:
            checked += 1
            received.append((grant, key, step, digest(table)))
            if not same(table, expected(key, step, robots)):
                errors.append(f"grant {grant} ns: {key} is not the table of step {step}")
        unchecked.clear()

    for m in grants:
        t_ns = m * period + role.offset_ns
        asked = time.perf_counter()
        h.helicsFederateRequestTimeAsync(fed, t_ns / 1e9)
        check()
        granted.append(round(h.helicsFederateRequestTimeComplete(fed) * 1e9))
        grant_wait.append(time.perf_counter() - asked)
        inputs: dict[str, Table] = {}
        for key, sub in subs.items():
            # the publisher's last step strictly before this grant: HELICS shows a value from the next grant on
            step = (granted[-1] - offset_of[key] - 1) // period
            if step < 0:
                continue
            if not h.helicsInputIsUpdated(sub):
                errors.append(f"grant {granted[-1]} ns: no new value of {key} (step {step})")
                continue
            raw = h.helicsInputGetBytes(sub)
            sizes[key] = len(raw)
            inputs[key] = decode(raw, key)
            unchecked.append((granted[-1], key, step, inputs[key]))
        if coordinator:
            round_trip.append(time.perf_counter() - sent_at)
        if coordinator and m < steps:
            sent_at = time.perf_counter()
            h.helicsPublicationPublishBytes(pub, encode(state_table(m, robots), role.publishes))
        elif not coordinator and len(inputs) == len(subs):
            data = encode(answer(role, inputs), role.publishes)
            sizes[role.publishes] = len(data)
            h.helicsPublicationPublishBytes(pub, data)
    wall = time.perf_counter() - start
    check()
    summary = {"role": role.name, "granted_ns": granted, "errors": errors[:20], "error_count": len(errors),
               "checked": checked, "received": received, "round_trip_s": round_trip, "grant_wait_s": grant_wait,
               "wall_s": wall, "sizes": sizes, "maxrss_kib": peak_rss_kib()}
    Path(spec["out"]).write_text(json.dumps(summary))  # before leaving: what was measured survives a stuck exit
    # leaving is bounded: a federate that cannot disconnect exits with DISCONNECT_STUCK instead of hanging
    h.helicsFederateDisconnectAsync(fed)
    deadline = time.monotonic() + DISCONNECT_S
    while not h.helicsFederateIsAsyncOperationCompleted(fed):
        if time.monotonic() > deadline:
            print(f"{role.name}: the disconnect did not complete within {DISCONNECT_S:g} s", file=sys.stderr)
            sys.stderr.flush()
            os._exit(DISCONNECT_STUCK)
        time.sleep(0.005)
    h.helicsFederateDisconnectComplete(fed)
    h.helicsFederateFree(fed)
    return summary


def peak_rss_kib() -> int:
    """This process's peak resident memory. Not ``ru_maxrss``: Linux carries the parent's peak over fork and exec,
    so a federate started by a large process would report that one's."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


# -- the whole exchange -----------------------------------------------------------------------------------------
@dataclass
class Exchange:
    """What one run gave: each federate's summary by name, the broker process (stopped), the roles, the
    federates whose disconnect did not complete (their summaries were written before they tried), the broker's
    port."""

    results: dict[str, dict[str, Any]]
    broker: subprocess.Popen
    roles: list[Role] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    port: int = 0


def _free_port() -> int:
    """A loopback port that is free together with the next one: a zmq broker binds both."""
    import socket

    while True:
        with socket.socket() as first, socket.socket() as second:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port


def broker_program() -> Path:
    """The ``helics_broker`` program itself. The script of that name in the environment's ``bin`` is a Python
    wrapper that runs it as a child: stopping the wrapper by pid would leave the broker running."""
    from helics.bin import BIN_DIR

    program = Path(BIN_DIR) / "helics_broker"
    return program if program.is_file() else Path(sys.executable).parent / "helics_broker"


def run_exchange(shape: str, peers: int, steps: int, robots: int, period_s: float = 0.02, core: str = "zmq",
                 timeout_s: float = 120.0) -> Exchange:
    """Start a ``helics_broker`` (``core``: zmq, tcp, ...) on a free loopback port and every federate of ``shape``
    as a process; wait for them; stop the broker by pid (also on failure). RuntimeError if a federate fails; once
    more on another port if the broker could not bind its port (another process took it after the check)."""
    for attempt in range(3):
        try:
            return _exchange(shape, peers, steps, robots, period_s, core, timeout_s)
        except PortTakenError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


class PortTakenError(RuntimeError):
    """The broker could not bind the port it was given."""


def _exchange(shape: str, peers: int, steps: int, robots: int, period_s: float, core: str,
              timeout_s: float) -> Exchange:
    period_ns = round(period_s * 1e9)
    members = roles(shape, peers, period_ns)
    port = _free_port()
    broker_bin = broker_program()
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix="bench-helics-") as scratch:
        log = open(Path(scratch) / "broker.log", "w")  # noqa: SIM115 - closed after the broker stops
        broker = subprocess.Popen([str(broker_bin), "-t", core, "-f", str(len(members)), f"--local_port={port}",
                                   "--loglevel=warning"], stdout=log, stderr=subprocess.STDOUT)
        try:
            for role in members:
                spec = {"role": role.name, "shape": shape, "peers": peers, "steps": steps, "robots": robots,
                        "period_ns": period_ns, "port": port, "core": core,
                        "out": str(Path(scratch) / f"{role.name}.json")}
                with open(Path(scratch) / f"{role.name}.err", "w") as err:
                    procs.append(subprocess.Popen([sys.executable, __file__, json.dumps(spec)], cwd=REPO,
                                                  stdout=subprocess.DEVNULL, stderr=err))
            deadline = time.monotonic() + timeout_s
            while any(proc.poll() is None for proc in procs) and time.monotonic() < deadline:
                time.sleep(0.02)
            hung = [role.name for role, proc in zip(members, procs, strict=True) if proc.poll() is None]
            for proc in procs:
                if proc.poll() is None:  # where it hangs: each federate dumps its Python stack on SIGUSR1
                    os.kill(proc.pid, signal.SIGUSR1)
            if hung:
                time.sleep(1.0)
            failed = [f"federate {role.name} did not finish within {timeout_s:g} s" for role in members
                      if role.name in hung]
            failed += [f"federate {role.name} failed ({proc.returncode})" for role, proc in
                       zip(members, procs, strict=True) if role.name not in hung
                       and proc.returncode not in (0, DISCONNECT_STUCK)]
            stuck = [role.name for role, proc in zip(members, procs, strict=True)
                     if proc.returncode == DISCONNECT_STUCK]
            if failed:  # every failure is reported, with every federate's errors: the first is often a consequence
                log.flush()
                details = [f"{role.name}: {(Path(scratch) / f'{role.name}.err').read_text()[-1500:]}"
                           for role in members]
                broker_log = (Path(scratch) / "broker.log").read_text()[-1500:]
                kind = PortTakenError if "Unable to bind" in broker_log else RuntimeError
                raise kind("\n".join([*failed, *details, f"broker log: {broker_log}"]))
            results = {role.name: json.loads((Path(scratch) / f"{role.name}.json").read_text()) for role in members}
        finally:
            for proc in procs:
                stop(proc)
            stop(broker)
            log.close()
    return Exchange(results, broker, members, stuck, port)


if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1)
    federate(json.loads(sys.argv[1]))
