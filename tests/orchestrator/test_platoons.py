"""Platoons as researchers write them: each platoon its own leader drive, lane and law; followers start behind their
leader along its heading or its track; platoons with their own lanes never meet; bad layouts fail validation at
their lines."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.build.placement import Track
from orchestrator.build.world import expand_robots
from orchestrator.runner import run_scenario
from orchestrator.scenario import ScenarioError, load_scenario, parse_scenario

REPO = Path(__file__).resolve().parents[2]
HEAD = """
version: 1
name: p
duration_s: 5.0
leader: {profile: constant, params: {speed_mps: 1.0}}
outputs: {plots: false, report: false}
"""


def platoon_at(yaw_deg: float) -> str:
    yaw = math.radians(yaw_deg)
    return HEAD + f"platoons: [{{count: 4, start: {{x: 3.0, y: -2.0, yaw: {yaw!r}}}}}]\n"


@pytest.mark.parametrize("yaw_deg", [0, 90, 180, 270])
def test_followers_start_behind_their_leader_along_its_heading(yaw_deg):
    robots = expand_robots(parse_scenario(platoon_at(yaw_deg)))
    yaw = math.radians(yaw_deg)
    assert [r.name for r in robots] == ["p0_0", "p0_1", "p0_2", "p0_3"]
    for pred, robot in itertools.pairwise(robots):
        a, b = pred.initial.plain(), robot.initial.plain()
        dx, dy = a["x"] - b["x"], a["y"] - b["y"]
        spacing = math.hypot(dx, dy)
        assert spacing > robot.dims.length_m  # bodies apart
        assert dx == pytest.approx(spacing * math.cos(yaw), abs=1e-9)
        assert dy == pytest.approx(spacing * math.sin(yaw), abs=1e-9)
        assert b["yaw"] == pytest.approx(yaw)


def test_on_a_track_followers_start_behind_the_leader_along_the_track():
    text = HEAD.replace("leader: {profile: constant, params: {speed_mps: 1.0}}", """leader:
  profile: waypoints
  path: {closed: true, waypoints: [[0, 0], [10, 0], [10, 10], [0, 10]]}""") + "platoons: [{count: 3}]\n"
    robots = expand_robots(parse_scenario(text))
    track = Track(np.array([[0, 0], [10, 0], [10, 10], [0, 10]], float), closed=True)
    lead = robots[0].initial.plain()
    assert (lead["x"], lead["y"], lead["yaw"]) == (0.0, 0.0, 0.0)
    for robot in robots[1:]:  # on the closing segment x = 0, heading south towards the start
        pose = robot.initial.plain()
        assert pose["x"] == pytest.approx(0.0) and 0 < pose["y"] < 10
        assert pose["yaw"] == pytest.approx(-math.pi / 2)
    assert track.length_m == 40.0


def test_a_lane_is_the_track_moved_sideways():
    square = Track(np.array([[0, 0], [10, 0], [10, 10], [0, 10]], float), closed=True)
    inner = square.shifted(1.0)  # counter-clockwise: left is inside
    np.testing.assert_allclose(inner.points, [[1, 1], [9, 1], [9, 9], [1, 9]], atol=1e-12)
    assert inner.length_m == pytest.approx(32.0)


@pytest.mark.slow
def test_two_platoons_in_their_own_lanes_never_meet(tmp_path):
    scenario = load_scenario(REPO / "scenarios" / "two_platoons.yaml",
                             ["duration_s=25", "outputs.plots=false", "outputs.report=false"])
    result = run_scenario(scenario, tmp_path)
    assert result.run_info["status"] == "ok" and result.run_info["outcomes"]["collisions"] == 0
    trace = pq.read_table(tmp_path / "trace" / "vehicles.parquet", columns=["t_ns", "robot", "x", "y"]).to_pydict()
    t, robot, x, y = (np.asarray(trace[k]) for k in ("t_ns", "robot", "x", "y"))
    inner, outer = robot <= 6, robot > 6
    times = np.unique(t)[::10]
    closest = min(np.min(np.hypot(x[(t == s) & inner][:, None] - x[(t == s) & outer][None, :],
                                  y[(t == s) & inner][:, None] - y[(t == s) & outer][None, :])) for s in times)
    assert closest > 0.5  # lanes 0.8 m apart: the platoons pass each other, never into each other
    # each leader keeps to its own lane: the inner one stays about 0.8 m inside the outer lane's track
    lane = Track(np.array(scenario.leader.path.waypoints, float), closed=True).shifted(0.8)
    lead = robot == 1
    points = np.array([[lane.pose_at(s)["x"], lane.pose_at(s)["y"]] for s in np.arange(0, lane.length_m, 0.05)])
    off_lane = [np.min(np.hypot(points[:, 0] - px, points[:, 1] - py)) for px, py in zip(x[lead], y[lead],
                                                                                        strict=True)]
    assert max(off_lane) < 0.3


@pytest.mark.slow
def test_each_platoon_has_its_own_law_and_validate_says_so():
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "validate",
                           str(REPO / "scenarios" / "two_platoons.yaml")], cwd=REPO, capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "13 robots in 3 platoons" in proc.stdout  # the two platoons and the joiner
    assert "controller acc (5 robots), controller ela_cacc (5 robots)" in proc.stdout
    robots = expand_robots(load_scenario(REPO / "scenarios" / "two_platoons.yaml"))
    assert {r.controller.type for r in robots if r.platoon == 0 and r.controller is not None} == {"acc"}
    assert robots[6].driver.path["waypoints"][0] == [0.0, 0.0]  # the outer leader on the track itself
    # the inner leader's lane: 0.8 m inside; at the first vertex (a 45 degree turn) the mitre point is
    # 0.8 (n1 + n2) / (1 + n1 . n2) with the left normals n1 = (1, 1) / sqrt 2 and n2 = (0, 1)
    assert robots[0].driver.path["waypoints"][0] == pytest.approx([0.8 * (math.sqrt(2) - 1), 0.8])


@pytest.mark.parametrize(("change", "where", "message"), [
    ("platoons: [{count: 3}, {count: 3}]", "platoons[1].count",
     "robots 'p0_0' and 'p1_0' would overlap when they appear"),
    ("platoons: [{count: 3, overrides: {p0_7: {spawn_at_s: 1.0}}}]", "platoons[0].overrides.p0_7",
     "no robot named 'p0_7' in platoon 0"),
    ("platoons: [{count: 3}]\nvehicles: {count: 3}", "", "either as 'vehicles'"),
    ("platoons: [{count: 3}]\nplatoon: {size: 3}", "platoon.size", "sizes each platoon itself"),
    ("vehicles: {count: 5}\nplatoon: {size: 2}", "platoon.size", "5 robots do not make platoons of 2"),
    ("platoons: [{count: 3, overrides: {p0_1: {spawn_at_s: 9.0}}}]", "platoons[0].overrides.p0_1.spawn_at_s",
     "must be in [0, duration_s)"),
    ("platoons: [{count: 3, members: [{name: a}]}]", "platoons[0]", "exactly one of 'members'"),
])
def test_bad_platoon_layouts_fail_validation_at_their_line(tmp_path, change, where, message):
    path = tmp_path / "bad.yaml"
    path.write_text(HEAD + change + "\n")
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "validate", str(path)], cwd=REPO,
                          capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "COLUMNS": "200"})
    assert proc.returncode == 2, proc.stdout
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert f"{path}:" in proc.stderr and where in proc.stderr


def test_members_are_named_and_platoons_can_be_given_to_a_source():
    text = HEAD + """platoons:
  - {members: [{name: lead}, {name: second}], start: {y: 5.0}}
  - {name: b, count: 2}
federates: [{name: cmd, type: "tests.orchestrator.command_plugins:SpeedCommander"}]
drivers: [{federate: cmd, platoons: [1]}]
"""
    robots = expand_robots(parse_scenario(text))
    assert [r.name for r in robots] == ["lead", "second", "b_0", "b_1"]
    assert [r.platoon for r in robots] == [0, 0, 1, 1] and robots[3].leader == robots[2].id
    assert [(r.command_source is not None) for r in robots] == [False, False, True, True]
    with pytest.raises(ScenarioError, match="no platoon 2"):
        parse_scenario(text.replace("platoons: [1]", "platoons: [2]"))
