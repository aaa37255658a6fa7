"""Outcomes that cannot be missed: a collision makes the run "collided" (exit 0 unless asked), a red line names the
first contact, --strict or outputs.fail_on turn it into exit code 3; likewise a station that sent no CAM at all
and a law past its stability bound."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from orchestrator.build.world import expand_robots
from orchestrator.reporting.outcomes import run_outcomes
from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario

REPO = Path(__file__).resolve().parents[2]
# a cruise-controlled follower set to twice the leader's speed drives into it at about 4 s
CRASH = """
version: 1
name: crash
seed: 1
duration_s: 6.0
step_s: 0.01
vehicles:
  count: 3
  overrides: {robot1: {controller: {type: cruise, desired_speed_mps: 2.0}}}
leader: {profile: constant, params: {speed_mps: 1.0}}
controller: {type: ela_cacc, time_gap_s: 0.5}
outputs: {plots: false, report: true}
"""


def coopsim(tmp_path: Path, text: str, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    return subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", str(path), "--out", str(tmp_path / "out"),
                           "--quiet", *args], cwd=REPO, capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "COLUMNS": "200"})


@pytest.mark.slow
def test_a_collision_is_loud_and_fails_only_when_asked(tmp_path):
    proc = coopsim(tmp_path, CRASH)
    assert proc.returncode == 0, proc.stderr
    assert "collision: robot0 and robot1 touched at t = 3.970 s" in proc.stderr
    info = json.loads((tmp_path / "out" / "run.json").read_text())
    assert info["status"] == "collided"
    assert info["outcomes"]["collisions"] >= 1 and info["outcomes"]["first_contact"]["robots"] == ["robot0", "robot1"]
    assert (tmp_path / "out" / "metrics.json").exists()  # the run completed: its metrics stand
    report = (tmp_path / "out" / "report.html").read_text()
    banner = report[report.index("<div class='banner'"):]
    assert report.index("<div class='banner'") < report.index("<h2>")  # above every section
    assert banner.startswith("<div class='banner' role='alert'>status: collided<ul><li>collision: robot0 and "
                             "robot1 touched at t = 3.970 s")
    strict = coopsim(tmp_path, CRASH, "--strict")
    assert strict.returncode == 3 and "exit code 3: collision (--strict" in strict.stderr
    asked = coopsim(tmp_path, CRASH.replace("outputs: {", "outputs: {fail_on: [collision], "))
    assert asked.returncode == 3 and "outputs.fail_on" in asked.stderr
    other = coopsim(tmp_path, CRASH.replace("outputs: {", "outputs: {fail_on: [silent_station], "))
    assert other.returncode == 0  # a collision is not what this scenario fails on


def test_a_clean_run_has_no_outcomes(tmp_path):
    result = run_scenario(parse_scenario(CRASH.replace("overrides: {robot1: {controller: {type: cruise, "
                                                       "desired_speed_mps: 2.0}}}", "name_prefix: robot")), tmp_path)
    assert result.run_info["status"] == "ok"
    assert result.run_info["outcomes"] == {"collisions": 0, "first_contact": None, "silent_stations": None,
                                           "unstable": [], "unmet_requests": []}  # the ideal channel: every
    # station sends by construction
    assert "class='banner'" not in (tmp_path / "report.html").read_text()


def test_a_station_that_sent_no_cam_is_found_in_the_itsg5_log(tmp_path):
    text = CRASH.replace("overrides: {robot1: {controller: {type: cruise, desired_speed_mps: 2.0}}}",
                         "name_prefix: robot") + "channel: {type: itsg5}\n"
    scenario = parse_scenario(text)
    result = run_scenario(scenario, tmp_path)
    assert result.run_info["outcomes"]["silent_stations"] == []  # every ITS-G5 station sent
    # the same log with every transmission of station 3 (robot2) taken out, as if its CA service never triggered
    path = tmp_path / "trace" / "v2x.parquet"
    table = pq.read_table(path)
    pq.write_table(table.filter(pc.invert(pc.equal(table["sender"], 3))), path)
    found = run_outcomes([], expand_robots(scenario), 6_000_000_000, tmp_path, [], logs_transmissions=True)
    assert found["silent_stations"] == ["robot2"]
    # a robot alive for less than T_GenCamMax (1 s) may rightly be silent
    assert run_outcomes([], expand_robots(scenario), 900_000_000, tmp_path, [], True)["silent_stations"] == []


def test_a_law_past_its_stability_bound_fails_a_strict_run(tmp_path):
    text = (REPO / "scenarios" / "platoon.yaml").read_text()
    proc = coopsim(tmp_path, text, "--strict", "--set", "controller.k2=3.5", "--set", "controller.time_gap_s=0.2",
                   "--set", "duration_s=1", "--set", "outputs.plots=false", "--set", "outputs.report=false")
    assert proc.returncode == 3, proc.stderr
    assert "unstable: ela_cacc robot1 .. robot3" in proc.stderr


@pytest.mark.parametrize("bad", ["[crash]", "collision"])
def test_fail_on_names_known_outcomes(bad):
    from orchestrator.scenario import ScenarioError

    with pytest.raises(ScenarioError, match="fail_on"):
        parse_scenario(CRASH.replace("outputs: {", f"outputs: {{fail_on: {bad}, "))
