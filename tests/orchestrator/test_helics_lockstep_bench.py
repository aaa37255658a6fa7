"""The HELICS lock-step exchange of ``bench/bench_helics.py``, short: a real helics_broker and one process per
federate on loopback. Every table must arrive decoded bit for bit at the grant of the step it was sent for, every
federate must be granted exactly its times, and the broker must be stopped afterwards."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("helics", reason="the helics package is not installed (pip install 'coopsim[helics]')")

pytestmark = pytest.mark.external  # needs a service or tool beside Python (pyproject.toml's markers; README "Tests")

# loaded by path, so that bench/ does not go on sys.path ahead of the tests' own modules
_SPEC = importlib.util.spec_from_file_location(
    "helics_peer_process", Path(__file__).resolve().parents[2] / "bench" / "helics_peer_process.py")
assert _SPEC is not None and _SPEC.loader is not None
bench = sys.modules.setdefault("helics_peer_process", importlib.util.module_from_spec(_SPEC))
_SPEC.loader.exec_module(bench)
digest, expected, run_exchange, same, state_table = (bench.digest, bench.expected, bench.run_exchange, bench.same,
                                                     bench.state_table)

PERIOD_NS = 20_000_000
ROBOTS = 4


def check(shape: str, peers: int, steps: int) -> dict[str, dict]:
    """Run the exchange and check grants, payloads and the broker; returns each federate's summary."""
    exchange = run_exchange(shape, peers, steps, ROBOTS, period_s=PERIOD_NS / 1e9, timeout_s=60)
    broker = exchange.broker
    assert broker.poll() is not None, "the helics_broker still runs"
    # and no broker of this exchange is left anywhere (the program itself, not only a wrapper around it)
    port = f"--local_port={exchange.port}".encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:  # the process ended meanwhile
            continue
        assert not (any(a.endswith(b"helics_broker") for a in args) and port in args), cmdline
    offsets = {role.publishes: role.offset_ns for role in exchange.roles}
    for role in exchange.roles:
        got = exchange.results[role.name]
        assert got["error_count"] == 0, got["errors"]
        # the coordinator publishes step 0 at time 0 and is granted T, 2T, ... (answers to the step before);
        # the others are granted kT + their offset, after what they read was published
        first = 1 if role.offset_ns == 0 else 0
        want = [k * PERIOD_NS + role.offset_ns for k in range(first, steps + first)]
        assert got["granted_ns"] == want, role.name
        received = {(grant, key): (step, value) for grant, key, step, value in got["received"]}
        assert len(received) == len(got["received"]) == steps * len(role.reads), role.name
        for grant in want:
            for key in role.reads:
                # the step this grant must see: the publisher's last step before it, worked out here on its own
                step = next(k for k in range(steps, -1, -1) if k * PERIOD_NS + offsets[key] < grant)
                assert received[grant, key] == (step, digest(expected(key, step, ROBOTS))), (role.name, grant, key)
    return exchange.results


def test_two_peers_answer_every_step_at_the_next_grant():
    results = check("fan", 2, 40)
    assert len(results["coord"]["round_trip_s"]) == 40
    assert results["coord"]["sizes"]["coord/state"] > 8 * ROBOTS * 8  # eight columns of four rows, and framing


def test_physics_v2x_control_chain_closes_within_a_period():
    results = check("chain", 3, 30)
    assert results["control"]["checked"] == 2 * 30  # the state and the V2X receptions of the same step


def test_the_check_tells_steps_and_bits_apart():
    # what the federates compare with: a table of another step, or with one bit flipped, is not the same
    now, before = state_table(7, ROBOTS), state_table(6, ROBOTS)
    assert same(now, state_table(7, ROBOTS)) and digest(now) == digest(state_table(7, ROBOTS))
    assert not same(now, before) and digest(now) != digest(before)
    flipped = {k: v.copy() for k, v in now.items()}
    flipped["v"].view(np.uint64)[2] ^= 1
    assert not same(now, flipped) and digest(now) != digest(flipped)
    retyped = {**now, "id": now["id"].astype(np.int32)}
    assert not same(now, retyped) and digest(now) != digest(retyped)
