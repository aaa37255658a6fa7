"""The shipped SUMO scenario's cut-in, and a lane change SUMO refuses, through the command line with real SUMO
(libsumo).

``scenarios/highway_sumo.yaml``: SUMO's car ``cutter`` drives in lane 2 beside the 14.5 m gap between car_3 and
car_4 of the CACC platoon (lane 1) and is told at 5 s to move into lane 1, with the lane change mode 1024 (the gaps
of others not respected) and SUMO's sublane model. car_4's range sensor switches from car_3 to it, and car_4 and
the cars behind it slow down to open the gap, without contact. The same request in SUMO's default mode (1621, safe
gaps respected) is refused: a ``traffic`` event, a ``run.json`` note and, with ``--strict``, exit code 3.

Both runs are shortened with ``--set duration_s``; nothing depends on wall-clock time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

pytest.importorskip("libsumo")

pytestmark = pytest.mark.external  # needs a service or tool beside Python (pyproject.toml's markers; README "Tests")

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "scenarios" / "highway_sumo.yaml"
TOLD_S = 5.0  # the scenario's lane_changes[0].t_s
HOLDS_S = 5.0  # its duration_s
SPEED = 25.0  # the platoon's speed [m/s]
FOLLOWERS_BEHIND = ("car_4", "car_5", "car_6", "car_7")  # car_4 is behind the gap, the others follow it


def coopsim(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(SCENARIO), "--out", str(out),
                           "--quiet", "--set", "outputs.plots=false", "--set", "outputs.report=false", *args],
                          cwd=REPO, capture_output=True, text=True, env={"PYTHONPATH": str(REPO),
                                                                          "PATH": "/usr/bin:/bin", "COLUMNS": "200"})


def trace(out: Path, name: str) -> dict[str, np.ndarray]:
    table = pq.read_table(out / "trace" / f"{name}.parquet")
    return {k: table.column(k).to_numpy(zero_copy_only=False) for k in table.column_names}


def robot_ids(out: Path) -> dict[str, int]:
    return {name: int(rid) for rid, name in json.loads((out / "run.json").read_text())["robot_names"].items()}


def lane_change_events(out: Path) -> list[dict]:
    return [row for row in pq.read_table(out / "trace" / "traffic.parquet").to_pylist()
            if row["event"].startswith("lane_change")]


@pytest.fixture(scope="module")
def cut_in(tmp_path_factory) -> Path:
    """The shipped scenario up to 13 s: the cut-in and the deepest speed dip behind it (at about 11.8 s)."""
    out = tmp_path_factory.mktemp("highway_cut_in") / "run"
    proc = coopsim(out, "--set", "duration_s=13", "--strict")
    assert proc.returncode == 0, proc.stderr
    return out


def test_the_shipped_cut_in_is_made_seen_and_answered_without_contact(cut_in):
    out = cut_in
    ids = robot_ids(out)
    events = lane_change_events(out)
    assert [(e["event"], e["sumo_id"], e["lane_from"], e["lane_to"]) for e in events] == [
        ("lane_change_requested", "cutter", 2, 1), ("lane_change_done", "cutter", 2, 1)]
    requested, done = (e["t_ns"] / 1e9 for e in events)
    assert requested == TOLD_S and TOLD_S < done < TOLD_S + HOLDS_S
    cutter = events[0]["robot"]
    assert cutter not in ids.values()  # SUMO's car, not one of the platoon's
    # car_4 sees car_3 until the car comes in, then the car, and never car_3 again
    ranges = trace(out, "range")
    car4 = ranges["robot"] == ids["car_4"]
    t = ranges["t_ns"][car4] / 1e9
    target = ranges["target"][car4]
    on_cutter = target == cutter
    switch = int(np.argmax(on_cutter))
    t_switch = t[switch]
    assert on_cutter.any() and on_cutter[switch:].all()
    assert set(target[:switch].tolist()) == {ids["car_3"]}
    assert TOLD_S < t_switch < TOLD_S + HOLDS_S, t_switch
    assert ranges["bearing_rad"][car4][switch] > 0.02  # coming in from the left
    # it comes in well inside the platoon's gap (14.5 m), and it is never touched
    seen = ranges["range_m"][car4][switch:]
    assert seen[0] < 10.0 and seen.min() > 3.0, (seen[0], seen.min())
    # no other follower ever has it ahead: the cut-in is into one gap
    others = np.isin(ranges["robot"], [ids[n] for n in FOLLOWERS_BEHIND[1:]])
    assert cutter not in set(ranges["target"][others].tolist())
    # the followers behind the gap slow down in response, from the platoon's 25 m/s
    rows = trace(out, "vehicles")
    for name in FOLLOWERS_BEHIND:
        mine = rows["robot"] == ids[name]
        tv, v = rows["t_ns"][mine] / 1e9, rows["v"][mine]
        np.testing.assert_allclose(v[tv < TOLD_S], SPEED, atol=0.1)
        assert v[tv >= t_switch].min() < SPEED - 2.0, (name, v[tv >= t_switch].min())
        assert v[tv < t_switch].min() > SPEED - 0.1  # not before the sensor had the car
    ahead = rows["robot"] == ids["car_3"]
    assert rows["v"][ahead].min() > SPEED - 0.1  # the cars ahead of the gap do not notice
    assert pq.read_table(out / "trace" / "collisions.parquet").num_rows == 0
    info = json.loads((out / "run.json").read_text())
    assert info["outcomes"]["collisions"] == 0 and info["outcomes"]["unmet_requests"] == []
    assert info["status"] == "ok"


def test_a_lane_change_sumo_refuses_is_an_event_a_note_and_fails_strict(tmp_path):
    """SUMO's default lane change mode respects the safe gaps of the vehicles on the target lane: the 14.5 m gap
    is far too small, SUMO keeps the car in lane 2 until the request ends, and says so only when asked
    (``getLaneChangeStatePretty``)."""
    out = tmp_path / "run"
    proc = coopsim(out, "--set", "duration_s=10.5", "--set", "channel.type=ideal",
                   "--set", "federates[0].params.lane_changes[0].mode=1621", "--strict")
    assert proc.returncode == 3, proc.stderr
    assert "exit code 3: unmet_request (--strict" in proc.stderr
    refusal = ("traffic: lane_changes[0] at 5.0 s: SUMO did not move 'cutter' from lane 2 to lane 1: still on lane 2 "
               "when the request ended (blocked by right follower)")
    assert refusal in " ".join(proc.stderr.split())  # the terminal wraps it
    events = lane_change_events(out)
    kinds = [(e["event"], e["t_ns"], e["sumo_id"], e["lane_from"], e["lane_to"]) for e in events]
    assert kinds == [("lane_change_requested", 5_000_000_000, "cutter", 2, 1),
                     ("lane_change_delayed", 5_100_000_000, "cutter", 2, 1),
                     ("lane_change_refused", 10_000_000_000, "cutter", 2, 1)]
    assert "blocked by right follower" in events[1]["detail"] and "blocked" in events[2]["detail"]
    info = json.loads((out / "run.json").read_text())
    assert refusal in info["notes"]
    assert info["outcomes"]["unmet_requests"] == [refusal]
    assert info["status"] == "ok"  # the run itself completed; only --strict fails it
    rows = trace(out, "vehicles")
    cutter = rows["robot"] == events[0]["robot"]
    np.testing.assert_allclose(rows["y"][cutter], 3.2, atol=1e-3)  # it never left lane 2
