"""A hosted federate asks for robots at run time: its spawn and despawn requests travel back with its replies and
the orchestrator's scheduler applies them, as for an in-process federate (a real ``coopsim host`` on loopback)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario
from tests.orchestrator.remote_plugins import GUEST_ID
from tests.orchestrator.test_command_sources import BASE

DISPATCHER = "tests.orchestrator.remote_plugins:Dispatcher"


def scenario(remote: str | None) -> str:
    entry = {"name": "disp", "type": DISPATCHER, **({"remote": remote} if remote else {})}
    return BASE + f"federates: [{json.dumps(entry)}]\ndrivers: [{{federate: disp, robots: [robot0]}}]\n"


def guest(out: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = pq.read_table(out / "trace" / "vehicles.parquet", columns=["t_s", "robot", "v", "y"]).to_pydict()
    mine = np.asarray(t["robot"]) == GUEST_ID
    return np.asarray(t["t_s"])[mine], np.asarray(t["v"])[mine], np.asarray(t["y"])[mine]


def test_a_hosted_federate_spawns_drives_and_despawns_a_robot(tmp_path, host):
    remote = run_scenario(parse_scenario(scenario(host)), tmp_path / "remote")
    assert remote.ok, remote.error
    t, v, y = guest(tmp_path / "remote")
    # asked for during the step at 1.0 s: spawned at the next instant; asked to go at 3.0 s: last seen then
    assert t.min() == 1.01 and t.max() == 3.0 and len(t) == 200
    assert np.allclose(y, 8.0)  # beside robot0, where the federate put it
    assert v[0] < 0.1 and np.allclose(v[t >= 2.0], 2.0, atol=0.01)  # standing, then at the commanded 2 m/s
    local = run_scenario(parse_scenario(scenario(None)), tmp_path / "local")
    assert local.ok and local.run_info["digest"] == remote.run_info["digest"]


def test_spawn_requests_travel_only_to_an_orchestrator_that_announced_them():
    """At the protocol level: the requests ride on the reply of the call that made them, and a client whose Hello
    lacks the "spawn_requests" capability gets the federate's refusal instead."""
    from core.robot_blocks import CommandSourceSpec, InitialState
    from core.robots import RobotSpec
    from federates.remote.client import build_request
    from federates.remote.codec import pb
    from federates.remote.host import _Host, _Session
    from federates.remote.policy import HostPolicy

    host = _Host(HostPolicy.from_options(allow=["tests.orchestrator"]), None, 1 << 20, 60.0)
    robot = RobotSpec(1, "robot0", command_source=CommandSourceSpec("disp"), initial=InitialState(0.0, 0.0, 0.0, 0.0))
    replies = {}
    for capabilities in ([], ["spawn_requests"]):
        session = _Session(host, context=None)
        assert not session.handle(pb.Request(hello=pb.Hello(protocol_version=1, capabilities=capabilities))).error.type
        setup = build_request("setup", federate={"name": "disp", "type": DISPATCHER,
                                                 "params": {"spawn_at_s": 0.5, "despawn_at_s": 0.5}},
                              seed=1, end_ns=10**9, out_dir=None)
        assert not session.handle(setup).HasField("error")
        session.handle(build_request("spawn", robots=[robot]))
        assert not session.handle(build_request("step", t_ns=0, inputs={})).requests  # nothing asked yet
        replies[bool(capabilities)] = session.handle(build_request("step", t_ns=500_000_000, inputs={}))
        session.close()
    refused, granted = replies[False], replies[True]
    assert refused.error.type == "RuntimeError" and not refused.requests
    assert refused.error.message.startswith("this orchestrator does not take spawn requests from a remote federate")
    spawn, despawn = granted.requests
    assert (spawn.spawn.robot.id, spawn.spawn.robot.name, spawn.spawn.at_ns) == (GUEST_ID, "guest", 500_000_000)
    assert spawn.spawn.robot.platoon == -1 and (despawn.despawn.robot_id, despawn.despawn.at_ns) == (GUEST_ID,
                                                                                                        500_000_000)
    assert len(granted.outputs.outputs) == 1  # and the step's commands came back with them
