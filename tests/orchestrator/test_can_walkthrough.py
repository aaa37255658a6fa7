"""The CAN walk-through of docs/bridges.md, as written: its ECU script and its scenario, with the run started
well after the ECU (a loaded machine takes seconds to import, compile and validate). The ECU waits for the first
frame however long that takes, drives the robot, and ends once the bus has been quiet for 5 s."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from .can_net import GROUP, multicast_on_this_host
from .processes import stop

pytestmark = pytest.mark.external  # needs a service or tool beside Python (pyproject.toml's markers; README "Tests")

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "bridges.md"
DOC_PORT = "43113"


def _block(after: str, language: str) -> str:
    """The first fenced ``language`` block of docs/bridges.md after the text ``after``."""
    text = DOC.read_text(encoding="utf-8")
    found = re.search(rf"```{language}\n(.*?)```", text[text.index(after):], re.S)
    assert found is not None, after
    return found.group(1)


def test_the_walkthrough_ecu_waits_for_a_run_that_starts_late(tmp_path):
    ecu_code = _block("and the ECU as `ecu.py`", "python")
    scenario = _block("Save the scenario as `can_demo.yaml`", "yaml")
    assert GROUP in ecu_code and DOC_PORT in ecu_code and DOC_PORT in scenario
    assert "bus.recv()" in ecu_code  # the first frame without a timeout
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(REPO)}
    with multicast_on_this_host() as port:
        (tmp_path / "ecu.py").write_text(ecu_code.replace(DOC_PORT, str(port)))
        (tmp_path / "can_demo.yaml").write_text(scenario.replace(DOC_PORT, str(port)))
        ecu = subprocess.Popen([sys.executable, str(tmp_path / "ecu.py")], cwd=REPO, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            time.sleep(7.0)  # longer than any fixed wait an ECU could give up after: the machine is "loaded"
            assert ecu.poll() is None, ecu.communicate()  # still waiting for the first frame
            run = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(tmp_path / "can_demo.yaml"),
                                  "--out", str(tmp_path / "run"), "--set", "duration_s=3", "--quiet"], cwd=REPO,
                                 env=env, capture_output=True, text=True, timeout=300)
            assert run.returncode == 0, run.stderr
            out, err = ecu.communicate(timeout=60)  # ends by itself, 5 s after the last frame
        finally:
            stop(ecu)
    assert ecu.returncode == 0, err
    assert out.startswith("period 0: speed 1.00 m/s -> target 0.5 m/s"), out
    commands = pq.read_table(tmp_path / "run" / "trace" / "commands_can.parquet").to_pydict()
    assert len(commands["robot"]) > 100 and set(commands["robot"]) == {1}
    assert set(np.round(commands["speed"], 3)) == {0.5}
    veh = pq.read_table(tmp_path / "run" / "trace" / "vehicles.parquet", columns=["t_s", "robot", "v"]).to_pydict()
    v = np.asarray(veh["v"])[np.asarray(veh["robot"]) == 1]
    assert abs(v[-1] - 0.5) < 0.05  # the robot slowed to what the ECU asked
