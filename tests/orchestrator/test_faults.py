"""Faults inside the process: a hung plug-in, broken outputs, a plug-in writing into its inputs, an output directory
that cannot be written, a disk that fills up. Each stops the run naming who and when, with the traces kept."""

from __future__ import annotations

import errno
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator import runner
from orchestrator.metrics import read_traces
from orchestrator.recorder import VehicleRecorder
from orchestrator.runner import run_scenario
from orchestrator.scenario import ScenarioError, parse_scenario

REPO = Path(__file__).resolve().parents[2]
PLATOON = (REPO / "scenarios" / "platoon.yaml").read_text()
QUIET = ["outputs.plots=false", "outputs.report=false", "duration_s=3"]


def _with(kind: str, **params) -> list[str]:
    entry = {"name": "bad", "type": f"tests.orchestrator.fault_plugins:{kind}", "params": params}
    return [*QUIET, f"federates={[entry]}".replace("'", '"')]


def _readable(run_dir: Path) -> dict[str, int]:
    return {p.name: pq.read_table(p).num_rows for p in sorted((run_dir / "trace").glob("*.parquet"))}


@pytest.mark.parametrize("kind", ["Sleeper", "Spinner"])
def test_a_hung_step_is_stopped_by_the_watchdog_naming_the_federate(tmp_path, kind):
    scenario = parse_scenario(PLATOON, overrides=_with(kind, at_s=0.5))
    started = time.perf_counter()
    result = run_scenario(scenario, tmp_path, step_timeout_s=0.5)
    assert time.perf_counter() - started < 15
    assert result.error is not None and result.error.federate == "bad"
    assert result.error.t_ns == 500_000_000 and "step_timeout_s = 0.5 s" in str(result.error)
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["status"] == "failed" and info["error"]["federate"] == "bad"
    rows = _readable(tmp_path)
    assert rows["vehicles.parquet"] == 4 * 50  # every instant completed before the hung one: t = 0 .. 0.49 s


@pytest.mark.parametrize(("kind", "message"), [
    ("NotAMapping", "step() returned a list, not a mapping of port -> data"),
    ("NanSpeeds", "field 'v_kmh' has NaN or infinite values"),
    ("ShortRows", "port 'speeds' is robot-indexed but its rows (ids [1, 2, 3]) are not the live robots"),
    ("InputMutator", "read-only"),
])
def test_broken_outputs_and_written_inputs_stop_the_run_naming_the_plugin(tmp_path, kind, message):
    scenario = parse_scenario(PLATOON, overrides=_with(kind, at_s=0.5))
    result = run_scenario(scenario, tmp_path)
    assert result.error is not None and result.error.federate == "bad" and result.error.t_ns == 500_000_000
    assert message in str(result.error)
    vehicles = read_traces(tmp_path, ["vehicles"])["vehicles"]
    assert np.isfinite(vehicles["x"]).all()  # nothing the plug-in did reached the recorded trace


def test_a_plugin_claiming_a_builtin_port_is_bad_input(tmp_path):
    scenario = parse_scenario(PLATOON, overrides=[*QUIET, 'federates=[{"name": "bad", "type": '
                                                  '"tests.orchestrator.fault_plugins:ClaimsState"}]'])
    with pytest.raises(ScenarioError, match="port 'state' is written by both 'physics' and 'bad'"):
        run_scenario(scenario, tmp_path)


def test_an_unwritable_output_directory_is_bad_input_before_the_run(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for out in (blocker / "run", Path("/proc/coopsim-run")):
        done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", "scenarios/platoon.yaml", "--out",
                               str(out), "--quiet"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        assert f"--out: cannot write the run directory {out}" in done.stderr and "Traceback" not in done.stderr


def test_a_full_disk_stops_the_run_and_keeps_what_was_written(tmp_path, monkeypatch):
    """The third row group of any trace fails with ENOSPC (as a full disk does): the run stops with a clear
    message, every trace is readable up to its last complete row group, and run.json says what happened."""
    real = pq.ParquetWriter.write_table
    calls = {"n": 0}

    def write_table(self, table, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] >= 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)
    # row groups of 100 instants, so that groups are written while the run goes
    monkeypatch.setattr(runner, "VehicleRecorder", functools.partial(VehicleRecorder, chunk_rows=4_000))
    overrides = [*QUIET, "duration_s=30", "vehicles.count=40", "platoon.size=8"]
    result = run_scenario(parse_scenario(PLATOON, overrides=overrides), tmp_path)
    assert result.error is not None and result.error.federate == "recorder"
    assert "No space left on device" in str(result.error)
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["status"] == "failed" and "No space left on device" in info["error"]["message"]
    assert info["sim_time_s"] < 30  # stopped early, not simulated into nothing
    rows = _readable(tmp_path)
    assert rows["vehicles.parquet"] == 2 * 4_000  # the two complete groups written before the disk was full
