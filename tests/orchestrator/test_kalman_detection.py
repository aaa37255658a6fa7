"""The Kalman residual check in a run: car2 of the shipped Ploeg platoon claims 2 m/s more than it drives (a speed
offset the consecutive checks let pass: 0.3 m per CAM at 25 m/s against their 0.6 m + slack). Every check runs;
only ``kalman`` flags the forged CAMs, from about 2 s in (its window of 10 CAMs filled), and no honest CAM before
the attack ends."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from comms_models.misbehaviour.checks import CHECKS, bit

REPO = Path(__file__).resolve().parents[2]
FROM_S, TO_S = 5.0, 10.0

pytestmark = pytest.mark.slow  # one ~10 s run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kalman") / "run"
    attack = f"[{{robot: car2, type: speed_offset, params: {{dv_mps: 2.0}}, from_s: {FROM_S}, to_s: {TO_S}}}]"
    detection = "{type: plausibility, reaction: none, params: {checks: [" + ", ".join(CHECKS) + "]}}"
    done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", "scenarios/attacks_platoon.yaml", "--out",
                           str(out), "--quiet", "--set", "duration_s=12", "--set", "outputs.plots=false", "--set",
                           "outputs.report=false", "--set", f"attacks={attack}", "--set", f"detection={detection}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_only_the_kalman_check_sees_a_small_speed_offset(run: Path) -> None:
    t = pq.read_table(run / "trace" / "misbehaviour.parquet").to_pydict()
    attack, checks = np.array(t["attack"]), np.array(t["checks"])
    gen = np.array(t["generated_ns"]) / 1e9
    forged = attack == 1
    assert forged.sum() >= 25  # car3 hears car2's CAMs (~6 Hz by the ETSI rules at 25 m/s) for 5 s
    assert (checks[forged] & ~bit("kalman") == 0).all()  # no other check fires on them
    caught = forged & ((checks & bit("kalman")) != 0)
    assert gen[caught].min() < FROM_S + 2.5
    assert caught[forged & (gen > FROM_S + 2.5)].all()  # from then on every forged CAM
    honest_alarms = (attack == 0) & (checks != 0)
    assert not honest_alarms[gen < TO_S].any()  # the only honest alarms: the first CAMs after the bias ended
    assert honest_alarms.sum() <= 3 and (gen[honest_alarms] < TO_S + 0.6).all()
    entry = json.loads((run / "metrics.json").read_text())["misbehaviour"]["attacks"][0]
    assert entry["type"] == "speed_offset" and 1.5 < entry["time_to_detection_s"] < 2.5
