"""Sweeping attacks and reactions: ``--param attacks[0].type=...`` (a list index in the path) switches the attack and
keeps only the parameters the new one takes, as ``detection.type`` does the detector's; a sweep over attack types and
reactions reports each follower's missed forged messages, false alarms and time to detection beside the platoon's
gaps and collisions; and each run's report has a misbehaviour section."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.scenario.errors import ScenarioError
from orchestrator.scenario.loader import load_scenario

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "scenarios" / "attacks_platoon.yaml"


def test_an_attack_of_another_type_keeps_only_the_parameters_it_takes() -> None:
    shipped = load_scenario(SCENARIO)
    assert shipped.attacks[0].params == {"u_mps2": 4.0}
    switched = load_scenario(SCENARIO, ["attacks[0].type=dos"])
    assert switched.attacks[0].type == "dos" and switched.attacks[0].params == {}
    assert (switched.attacks[0].robot, switched.attacks[0].from_s) == ("car2", 15.0)  # the rest of the entry stays
    same = load_scenario(SCENARIO, ["attacks[0].type=desired_accel_constant"])
    assert same.attacks[0].params == {"u_mps2": 4.0}
    jammer = load_scenario(REPO / "scenarios" / "attacks_jamming.yaml", ["attacks[0].type=jamming_periodic",
                                                                          "attacks[0].params.period_s=0.05"])
    assert jammer.attacks[0].params == {"power_dbm": 20.0, "x_m": 600.0, "y_m": 10.0, "period_s": 0.05}  # shared
    detector = load_scenario(SCENARIO, ["detection.params={min_failed: 2}", "detection.type=kalman"])
    assert detector.detection.type == "kalman" and detector.detection.params == {}
    with pytest.raises(ScenarioError, match="min_failed"):  # kalman takes no min_failed: the params did not go
        load_scenario(SCENARIO, ["detection.type=kalman", "detection.params={min_failed: 2}"])


@pytest.mark.slow  # four runs of ~3 s
def test_a_sweep_over_attacks_and_reactions(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "sweep", str(SCENARIO), "--param",
         "attacks[0].type=desired_accel_constant,dos", "--param", "detection.reaction=none,ignore", "--set",
         "duration_s=8", "--set", "attacks[0].from_s=2", "--set", "attacks[0].to_s=7", "--set", "outputs.plots=false",
         "--metrics", "collisions,min_gap_m,forged_missed,false_alarms,time_to_detection_s", "--jobs", "2", "--out",
         str(out), "--quiet"], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((out / "sweep.json").read_text())
    points = {(p["params"]["attacks[0].type"], p["params"]["detection.reaction"]): p for p in result["points"]}
    assert sorted(points) == [("desired_accel_constant", "ignore"), ("desired_accel_constant", "none"),
                              ("dos", "ignore"), ("dos", "none")]
    for (kind, _), point in points.items():
        run = out / point["name"]
        metrics = json.loads((run / "metrics.json").read_text())
        entry = metrics["misbehaviour"]["attacks"][0]
        assert entry["type"] == kind and entry["recall"] > 0.99  # both caught (desired_accel, beacon_frequency)
        car3 = metrics["followers"]["car3"]  # the follower of car2, the attacker
        assert car3["forged_received"] == entry["messages"] and car3["forged_missed"] <= 1
        assert point["metrics"]["false_alarms"]["worst"] == 0 and point["metrics"]["time_to_detection_s"]["worst"] < 0.1
        page = re.sub(r"<[^>]+>", " ", (run / "report.html").read_text())
        assert "Attacks and misbehaviour detection" in page and kind in page
    # the platoon effect: the falsified desired acceleration pulls car3 towards car2 unless it is ignored
    gap = {key: json.loads((out / p["name"] / "metrics.json").read_text())["followers"]["car3"]["min_gap_m"]
           for key, p in points.items()}
    assert gap[("desired_accel_constant", "none")] < 5.0 and gap[("desired_accel_constant", "ignore")] > 14.0
    assert gap[("dos", "none")] > 14.0  # true CAMs at 50 Hz leave the law alone
