"""FMI 2 co-simulation FMUs as a federate: a real FMU built with pythonfmu, hosted with fmpy, one instance per
robot; its outputs checked against the run's trace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario

pytestmark = pytest.mark.external  # needs a service or tool beside Python (pyproject.toml's markers; README "Tests")

REPO = Path(__file__).resolve().parents[2]
PERIOD = 0.1


@pytest.fixture(scope="module")
def odometer_fmu(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fmu")
    build = subprocess.run([str(Path(sys.executable).parent / "pythonfmu"), "build", "-f",
                            str(REPO / "tests" / "orchestrator" / "fmu" / "Odometer.py"), "-d", str(out)],
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    return out / "Odometer.fmu"


def run_with(tmp_path: Path, fmu_params: dict) -> object:
    federate = {"name": "odometer", "type": "fmu", "params": {"period_s": PERIOD, **fmu_params}}
    sink = {"name": "sink", "type": "tests.orchestrator.plugins:Sink", "params": {"path": str(tmp_path / "s.npz"),
                                                                      "port": "odometer"}}
    scenario = parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=[
        "duration_s=2", "outputs.plots=false", "outputs.report=false", "leader.profile=sinusoid",
        "leader.params={speed_mps: 1.0, amplitude_mps: 0.3, frequency_hz: 0.5, start_s: 0.0}",
        f"federates={json.dumps([federate, sink])}"])
    return run_scenario(scenario, tmp_path / "run")


def test_one_fmu_instance_per_robot_integrates_its_speed(tmp_path, odometer_fmu):
    result = run_with(tmp_path, {"path": str(odometer_fmu), "inputs": {"speed": "state.v"},
                                 "outputs": {"odometer": {"distance": "distance", "scaled": "scaled"}},
                                 "parameters": {"gain": 2.5}, "robots": ["robot0", "robot2"]})
    assert result.ok, result.error
    got = np.load(tmp_path / "s.npz")
    ids = got["id"].reshape(-1, 2)
    assert (ids == [1, 3]).all() and len(ids) == 21  # the two chosen robots, t = 0 .. 2 s every 0.1 s
    distance, scaled = got["distance"].reshape(-1, 2), got["scaled"].reshape(-1, 2)
    trace = pq.read_table(tmp_path / "run" / "trace" / "vehicles.parquet").to_pydict()
    t_s, robot, v = (np.asarray(trace[k]) for k in ("t_s", "robot", "v"))
    for col, rid in enumerate((1, 3)):
        speeds = np.array([v[(robot == rid) & np.isclose(t_s, PERIOD * k)][0] for k in range(21)])
        # held inputs: over [t_(k-1), t_k] the FMU integrates the speed read at t_(k-1)
        np.testing.assert_allclose(distance[:, col], np.concatenate([[0.0], np.cumsum(speeds[:-1] * PERIOD)]),
                                   rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(scaled[1:, col], 2.5 * speeds[:-1])  # the parameter reached the FMU
        assert scaled[0, col] == 0.0  # after initialisation, before any step
    assert np.ptp(scaled) > 0.3  # the sinusoid leader moves the speeds


def test_an_unknown_fmu_variable_names_what_there_is(tmp_path, odometer_fmu):
    result = run_with(tmp_path, {"path": str(odometer_fmu), "inputs": {"spead": "state.v"}})
    assert not result.ok and result.error.federate == "odometer"
    assert "Odometer.fmu has no variable 'spead'" in str(result.error) and "speed" in str(result.error)


def test_an_fmu_commands_the_robot_the_scenario_gives_it(tmp_path):
    out = tmp_path / "fmu"
    build = subprocess.run([str(Path(sys.executable).parent / "pythonfmu"), "build", "-f",
                            str(REPO / "tests" / "orchestrator" / "fmu" / "CruiseEcu.py"), "-d", str(out)],
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    ecu = {"name": "ecu", "type": "fmu", "params": {
        "path": str(out / "CruiseEcu.fmu"), "period_s": 0.05, "commands": {"speed": "v_ref", "steer": "delta_ref"},
        "parameters": {"base": 1.0, "step": 0.5, "step_time": 1.0}, "robots": []}}
    scenario = parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=[
        "duration_s=3", "outputs.plots=false", "outputs.report=false", "leader.profile=constant",
        "leader.params={speed_mps: 1.0}", f"federates={json.dumps([ecu])}",
        "drivers=[{federate: ecu, robots: [robot0]}]"])
    result = run_scenario(scenario, tmp_path / "run")
    assert result.ok, result.error
    trace = pq.read_table(tmp_path / "run" / "trace" / "vehicles.parquet").to_pydict()
    t_s, robot, v = (np.asarray(trace[k]) for k in ("t_s", "robot", "v"))
    leader = robot == 1
    assert np.allclose(v[leader & (t_s < 1.0)], 1.0, atol=1e-9)
    assert np.allclose(v[leader & (t_s >= 2.0)], 1.5, atol=0.01)  # the FMU's step, not the constant profile
    commands = pq.read_table(tmp_path / "run" / "trace" / "commands_ecu.parquet").to_pydict()
    assert set(commands["robot"]) == {1} and max(commands["speed"]) == 1.5
    assert all(np.isnan(commands["accel"]))  # not mapped: completed by the physics federate
