"""coopsim in a HELICS federation: a real helics_broker and another federate in its own process, both started on
loopback and stopped by pid."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario
from tests.orchestrator.processes import free_port, stop

pytestmark = pytest.mark.external  # needs a service or tool beside Python (pyproject.toml's markers; README "Tests")

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _broker_program() -> Path:
    """The broker itself, not the environment's ``bin/helics_broker`` wrapper script: stopping the wrapper by pid
    would leave its child, the real broker, running."""
    from helics.bin import BIN_DIR

    program = Path(BIN_DIR) / "helics_broker"
    return program if program.is_file() else BIN / "helics_broker"


@pytest.fixture
def broker(tmp_path) -> Iterator[int]:
    """A zmq helics_broker for two federates (coopsim and the peer); its port."""
    port = free_port()
    log = open(tmp_path / "broker.log", "w")  # noqa: SIM115 - closed below, after the broker stops
    proc = subprocess.Popen([str(_broker_program()), "-t", "zmq", "-f", "2", f"--local_port={port}",
                             "--loglevel=warning"], stdout=log, stderr=subprocess.STDOUT)
    try:
        yield port
    finally:
        stop(proc)
        log.close()


def test_coopsim_and_another_helics_federate_advance_together(tmp_path, broker):
    period, end = 0.1, 2.0
    peer = subprocess.Popen([sys.executable, str(REPO / "tests" / "orchestrator" / "helics_peer.py"), str(broker),
                             str(period), str(end), str(tmp_path / "peer.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        bridge = {"name": "grid", "type": "helics", "params": {
            "broker": f"127.0.0.1:{broker}", "period_s": period, "publish": {"state": ["id", "v"]},
            "subscribe": {"probe": {"v2": "peer/probe/v2", "id": "peer/probe/id"}}}}
        sink = {"name": "sink", "type": "tests.orchestrator.plugins:Sink", "params": {"path": str(tmp_path / "s.npz")}}
        scenario = parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=[
            f"duration_s={end}", "outputs.plots=false", "outputs.report=false",
            "leader.profile=sinusoid", "leader.params={speed_mps: 1.0, amplitude_mps: 0.3, frequency_hz: 0.5, "
            "start_s: 0.0}", f"federates={json.dumps([bridge, sink])}"])
        result = run_scenario(scenario, tmp_path / "run")
        _, err = peer.communicate(timeout=60)
        assert result.ok, result.error
        assert peer.returncode == 0, err
    finally:
        stop(peer)
    trace = pq.read_table(tmp_path / "run" / "trace" / "vehicles.parquet").to_pydict()
    t_s, robot, v = (np.asarray(trace[k]) for k in ("t_s", "robot", "v"))

    def speeds_at(t: float) -> np.ndarray:
        at = np.isclose(t_s, t)
        return v[at][np.argsort(robot[at])]

    # the peer, at each grant t, saw coopsim's speeds at t (robots in roster order)
    seen = json.loads((tmp_path / "peer.json").read_text())
    assert [round(e["t"], 6) for e in seen] == [round(period * k, 6) for k in range(1, 21)]
    for entry in seen:
        assert entry["id"] == [1.0, 2.0, 3.0, 4.0]
        np.testing.assert_array_equal(entry["v"], speeds_at(entry["t"]))
    # and coopsim received twice those speeds one period later (from t = 0.2 s on), bit for bit
    got = np.load(tmp_path / "s.npz")
    v2 = got["v2"].reshape(-1, 4)
    assert len(v2) == 19
    for k, row in enumerate(v2):
        np.testing.assert_array_equal(row, 2.0 * speeds_at(period * (k + 1)))
    assert np.ptp(v2) > 0.1  # the sinusoid leader makes the speeds move


def test_a_helics_federate_commands_a_robot(tmp_path, broker):
    period, end = 0.05, 3.0
    ecu = subprocess.Popen([sys.executable, str(REPO / "tests" / "orchestrator" / "helics_commander.py"),
                            str(broker), str(period), str(end)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        bridge = {"name": "grid", "type": "helics", "params": {
            "broker": f"127.0.0.1:{broker}", "period_s": period,
            "subscribe": {"commands_grid": {"robot": "ecu/cmd/robot", "speed": "ecu/cmd/speed"}}}}
        scenario = parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=[
            f"duration_s={end}", "outputs.plots=false", "outputs.report=false", "leader.profile=constant",
            "leader.params={speed_mps: 1.0}", f"federates={json.dumps([bridge])}",
            "drivers=[{federate: grid, robots: [robot0], command_timeout_s: 1.0}]"])
        result = run_scenario(scenario, tmp_path / "run")
        _, err = ecu.communicate(timeout=60)
        assert result.ok, result.error
        assert ecu.returncode == 0, err
    finally:
        stop(ecu)
    trace = pq.read_table(tmp_path / "run" / "trace" / "vehicles.parquet").to_pydict()
    t_s, robot, v = (np.asarray(trace[k]) for k in ("t_s", "robot", "v"))
    leader = robot == 1
    assert np.allclose(v[leader & (t_s < 1.0)], 1.0, atol=1e-9)
    assert np.allclose(v[leader & (t_s >= 2.0)], 1.5, atol=0.01)  # the ECU's step, through HELICS
    commands = pq.read_table(tmp_path / "run" / "trace" / "commands_grid.parquet").to_pydict()
    assert set(commands["robot"]) == {1} and max(commands["speed"]) == 1.5
    assert result.run_info["federates"]["physics"]["timeouts"] == 0
