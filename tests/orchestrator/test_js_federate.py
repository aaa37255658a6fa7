"""A federate in another language: Node.js serves the ``.proto`` on loopback (``js_federate/federate.js``, with
@grpc/grpc-js and @grpc/proto-loader from npm, nothing generated) and commands a robot of a platoon run."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario
from tests.orchestrator.processes import listening
from tests.orchestrator.test_command_sources import BASE

pytestmark = pytest.mark.external  # needs a service or tool beside Python (pyproject.toml's markers; README "Tests")

REPO = Path(__file__).resolve().parents[2]
JS = Path(__file__).resolve().parent / "js_federate"
PROTO = REPO / "federates" / "remote" / "proto" / "coopsim_federate_v1.proto"
PROFILE = [[0.0, 1.0], [1.0, 1.5], [2.5, 0.8]]  # [t_s, speed_mps]: the commanded speed steps


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """``npm ci`` from the committed lock file into js_federate/node_modules (ignored by git), once."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("needs node and npm")
    installed = JS / "node_modules" / ".package-lock.json"
    with (JS / "package.json").open() as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process installing at the same time waits for this one
        if not installed.is_file() or installed.stat().st_mtime < (JS / "package-lock.json").stat().st_mtime:
            done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=JS, capture_output=True, text=True,
                                  timeout=300)
            if done.returncode != 0:
                if any(word in done.stderr for word in ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT",
                                                           "network")):
                    pytest.skip(f"npm cannot reach the registry: {done.stderr.strip().splitlines()[-1]}")
                raise AssertionError(f"npm ci failed:\n{done.stderr}")
    return JS / "node_modules"


@contextlib.contextmanager
def js_federate(env: dict[str, str] | None = None) -> Iterator[str]:
    """``node federate.js`` on a free loopback port, stopped by pid; yields its address."""
    with listening(["node", str(JS / "federate.js"), str(PROTO), "0"], JS, env) as address:
        yield address


def scenario(address: str) -> str:
    entry = {"name": "js", "type": "js:speed_profile", "remote": address,
             "params": {"period_s": 0.05, "profile": PROFILE}}
    return BASE + f"federates: [{json.dumps(entry)}]\ndrivers: [{{federate: js, robots: [robot0]}}]\n"


def commanded(t_s: np.ndarray) -> np.ndarray:
    return np.select([t_s >= at for at, _ in reversed(PROFILE)], [v for _, v in reversed(PROFILE)])


def test_a_node_js_federate_commands_a_robot_through_the_proto(tmp_path, node_modules, monkeypatch):
    monkeypatch.delenv("COOPSIM_TOKEN", raising=False)
    monkeypatch.delenv("COOPSIM_TLS_CA", raising=False)
    digests = []
    with js_federate() as address:
        for run in ("first", "again"):
            result = run_scenario(parse_scenario(scenario(address)), tmp_path / run)
            assert result.ok, result.error
            digests.append(result.run_info["digest"])
    assert digests[0] == digests[1]  # same scenario and seed: the same run, Node.js in the loop or not
    out = tmp_path / "first"
    # every 50 ms the JS federate sent robot0 (id 1) the profile's speed, read back as float64 and int64 exactly
    commands = pq.read_table(out / "trace" / "commands_js.parquet").to_pydict()
    t_cmd = np.arange(81) * 0.05
    assert commands["robot"] == [1] * 81
    assert np.array_equal(commands["speed"], commanded(t_cmd)) and np.isnan(commands["accel"]).all()
    # and robot0 follows that profile: each step settled well before the next one
    t = pq.read_table(out / "trace" / "vehicles.parquet", columns=["t_s", "robot", "v"]).to_pydict()
    robot, t_s, v = np.asarray(t["robot"]), np.asarray(t["t_s"]), np.asarray(t["v"])
    mine = robot == 1
    for at, speed in ((0.95, 1.0), (2.45, 1.5), (4.0, 0.8)):
        got = v[mine][np.argmin(abs(t_s[mine] - at))]
        assert abs(got - speed) < 0.01, (at, got, speed)
    assert v[mine][(t_s[mine] > 1.0) & (t_s[mine] < 2.5)].max() > 1.45  # it did speed up, not only hold 1 m/s
    # what the JS federate saw of robot0's state (its input, decoded in JS) is the recorded state
    view = pq.read_table(out / "trace" / "js_view.parquet").to_pydict()
    at = {round(ti, 2): vi for ti, vi in zip(t_s[mine], v[mine], strict=True)}
    assert len(view["t_ns"]) == 81 and view["robot"] == [1] * 81
    assert [at[round(tn / 1e9, 2)] for tn in view["t_ns"]] == view["v"]


def test_the_node_js_federate_refuses_a_client_without_its_token(tmp_path, node_modules, monkeypatch):
    monkeypatch.delenv("COOPSIM_TOKEN", raising=False)
    monkeypatch.delenv("COOPSIM_TLS_CA", raising=False)
    with js_federate({**os.environ, "COOPSIM_TOKEN": "node-secret"}) as address:
        result = run_scenario(parse_scenario(scenario(address)), tmp_path / "refused")
        assert not result.ok and result.error.federate == "js"
        assert "UNAUTHENTICATED wrong or missing token" in str(result.error)
        monkeypatch.setenv("COOPSIM_TOKEN", "node-secret")
        assert run_scenario(parse_scenario(scenario(address)), tmp_path / "admitted").ok
