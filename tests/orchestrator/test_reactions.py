"""The open_gap and leave reactions to misbehaviour act, and only once the detector has spoken. In the shipped Ploeg
platoon (scenarios/attacks_platoon.yaml, 14.5 m gaps at 25 m/s) car2 floods the channel with true CAMs at 50 Hz
from 5 s to 14 s (a DoS: the beacon frequency check flags them, their content leaves the control laws alone), so
that only the reaction moves car3, the follower that hears car2 as its predecessor:

- open_gap (factor 2, 3 m/s): car3's gap stays at the CACC's 14.5 m until the first suspicion, then opens towards
  2 x 14.5 m, and closes again once the suspicion is over (hold_s 2 s after the attack); car4 keeps its gap;
- leave: car3 asks to leave at its first suspicion, the leader accepts, car3 opens a gap, changes lane and drives
  on alone (its own platoon, no predecessor or leader), and car4 follows car2.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[2]
FROM_S, TO_S, HOLD_S = 5.0, 14.0, 2.0
CAR0, CAR2, CAR3, CAR4 = 1, 3, 4, 5  # robot ids
ATTACK = f"[{{robot: car2, type: dos, params: {{rate_hz: 50}}, from_s: {FROM_S}, to_s: {TO_S}}}]"
REACTIONS = {"open_gap": ["--set", "detection.reaction=open_gap", "--set", "detection.gap_rate_mps=3",
                          "--set", "duration_s=26"],
             "leave": ["--set", "detection.reaction=leave", "--set", "duration_s=20"]}

pytestmark = pytest.mark.slow  # two runs of ~15 s


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("reactions")
    procs = {name: (base / name, subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "run", "scenarios/attacks_platoon.yaml", "--out", str(base / name),
         "--quiet", "--set", "outputs.plots=false", "--set", "outputs.report=false", "--set", f"attacks={ATTACK}",
         "--set", f"detection.hold_s={HOLD_S}", *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)) for name, args in REACTIONS.items()}
    for _, proc in procs.values():
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
    return {name: out for name, (out, _) in procs.items()}


def first_suspicion_s(out: Path, receiver: int) -> float:
    sus = pq.read_table(out / "trace" / "suspicions.parquet").to_pydict()
    mine = np.array(sus["receiver"]) == receiver
    assert set(np.array(sus["sender"])[mine]) == {CAR2}
    return float(np.array(sus["t_ns"])[mine].min()) / 1e9


def gap(out: Path, robot: int) -> tuple[np.ndarray, np.ndarray]:
    t = pq.read_table(out / "trace" / "vehicles.parquet", columns=["t_s", "robot", "range_m"]).to_pydict()
    rows = np.array(t["robot"]) == robot
    return np.array(t["t_s"])[rows], np.array(t["range_m"])[rows]


def test_open_gap_widens_the_gap_after_detection_only(runs: dict[str, Path]) -> None:
    out = runs["open_gap"]
    detected = first_suspicion_s(out, CAR3)
    assert FROM_S <= detected < FROM_S + 0.1  # the second CAM within 100 ms
    t, g = gap(out, CAR3)
    before = (t > 2.0) & (t < detected)
    assert g[before].min() > 14.0 and g[before].max() < 16.0  # the CACC's 14.5 m (h = 0.5 s, r = 2 m at 25 m/s)
    at_end = g[np.abs(t - TO_S) < 0.05].mean()
    assert 24.0 < at_end < 31.0  # towards 2 x 14.5 m
    assert g[t > 24.0].mean() < 22.0  # closing again once the suspicion is over
    t4, g4 = gap(out, CAR4)
    assert g4[t4 > 2.0].max() < 16.0  # car4 suspects nobody
    assert np.isin(pq.read_table(out / "trace" / "suspicions.parquet").column("receiver").to_numpy(), [CAR3]).all()


def test_leave_makes_the_member_leave_after_detection_only(runs: dict[str, Path]) -> None:
    out = runs["leave"]
    detected = first_suspicion_s(out, CAR3)
    events = pq.read_table(out / "trace" / "maneuver_events.parquet").to_pydict()
    mine = [(t / 1e9, e) for t, r, e in zip(events["t_ns"], events["robot"], events["event"], strict=True)
            if r == CAR3]
    assert mine[0][1] == "requested" and detected <= mine[0][0] < detected + 0.05
    assert [e for _, e in mine] == ["requested", "gap_opening", "lane_change", "completed"]
    state = pq.read_table(out / "trace" / "platoon_state.parquet").to_pydict()
    rows = {name: np.array(state[name]) for name in ("t_ns", "robot", "platoon_id", "predecessor", "leader")}
    t = rows["t_ns"] / 1e9

    def at(robot: int, when: float, name: str) -> float:
        pick = np.flatnonzero((rows["robot"] == robot) & (np.abs(t - when) < 0.006))
        return float(rows[name][pick[0]])

    assert (at(CAR3, detected - 0.05, "platoon_id"), at(CAR3, detected - 0.05, "predecessor")) == (0.0, CAR2)
    done = mine[-1][0]
    assert at(CAR3, done + 1.0, "platoon_id") == 1 + CAR3  # its own platoon: the platoon count + its id
    assert np.isnan(at(CAR3, done + 1.0, "predecessor")) and np.isnan(at(CAR3, done + 1.0, "leader"))
    assert at(CAR4, done + 1.0, "predecessor") == CAR2 and at(CAR4, done + 1.0, "leader") == CAR0
