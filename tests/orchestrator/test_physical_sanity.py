"""Physical sanity before the run: values that validate also run. Each finding of the bad-input campaign (a 0 ns or
1 ns step, a zero wheelbase, NaN, infinite or far-away start positions, ITS-G5 parameters of 1e308, a 1 ns control
period, a fleet too large for the machine, despawn before spawn, spawn after the end, a step longer than the run,
the cruise law without a desired gap) is a bad-input error at its file, line and field, or now runs."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orchestrator.build.plan import check_plan
from orchestrator.build.resources import MemoryBudget, estimate_resources
from orchestrator.build.world import DEFAULT_STANDSTILL_GAP_M, DEFAULT_TIME_GAP_S, expand_robots
from orchestrator.runner import run_scenario
from orchestrator.scenario import ScenarioError, load_scenario, parse_scenario

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((REPO / "scenarios").glob("*.yaml"))
COOPSIM = [sys.executable, "-m", "orchestrator.cli"]

BASE = """\
version: 1
name: t
duration_s: 5
step_s: 0.01
vehicles:
  count: 3
controller:
  type: ela_cacc
  time_gap_s: 1.0
"""
"""Line 3 is duration_s, 4 step_s, 6 count, 8 the law, 10 the first appended line."""

LIST = """\
version: 1
name: t
duration_s: 5
vehicles:
  - name: lead
  - name: f1
    initial: {x: -3.0}
"""
"""A vehicle list: line 7 is f1's initial pose, 8 the first appended line (f1's keys at indent 4)."""


BUDGET = MemoryBudget(gb=8.0)
"""A fixed memory budget, so that no test depends on the memory this machine happens to have free."""


def problems(text: str, overrides: tuple[str, ...] = (), budget: MemoryBudget = BUDGET) -> list[str]:
    """The rendered problems of validating and planning ``text``, one per line."""
    with pytest.raises(ScenarioError) as info:
        check_plan(parse_scenario(textwrap.dedent(text), "s.yaml", overrides), budget)
    return str(info.value).splitlines()


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([*COOPSIM, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


# -- steps and periods -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("step", ["1.0e-10", "1.0e-9", "0.0"])  # 1e-10 s rounds to a 0 ns step
def test_a_step_below_one_microsecond_is_refused_at_its_line(step: str):
    assert problems(BASE.replace("step_s: 0.01", f"step_s: {step}")) == [
        f"s.yaml:4: step_s: must be at least 1e-06 s (1 us), got {float(step):g}"]


def test_a_step_longer_than_the_run_is_refused():
    text = BASE.replace("duration_s: 5", "duration_s: 0.5").replace("step_s: 0.01", "step_s: 1.0")
    assert problems(text) == ["s.yaml:4: step_s: must not exceed duration_s (0.5 s): a step or period longer than "
                              "the run never comes round, got 1"]


def test_a_one_nanosecond_control_period_is_refused_at_its_line():
    assert problems(BASE + "  period_s: 1.0e-9\n") == [
        "s.yaml:10: controller.period_s: must be at least 1e-06 s (1 us), got 1e-09"]


def test_periods_longer_than_the_run_are_refused_each_at_its_line():
    text = BASE + textwrap.dedent("""\
          period_s: 6.0
        outputs: {trace_period_s: 7.0}
        physics:
          gnss: {period_s: 8.0}
          range_sensor: {period_s: 9.0}
        """)
    msg = problems(text)
    for line, path, value in ((10, "controller.period_s", 6), (11, "outputs.trace_period_s", 7),
                              (13, "physics.gnss.period_s", 8), (14, "physics.range_sensor.period_s", 9)):
        assert (f"s.yaml:{line}: {path}: must not exceed duration_s (5 s): a step or period longer than the run "
                f"never comes round, got {value}") in msg


def test_an_extra_federates_period_is_held_to_the_same_bounds():
    text = BASE + "federates:\n  - {name: ros, type: ros2, params: {period_s: 1.0e-9}}\n"
    assert problems(text) == ["s.yaml:11: federates[0].params.period_s: must be at least 1e-06 s (1 us), got 1e-09"]


def test_default_periods_are_not_held_against_a_short_run():
    scenario = parse_scenario(BASE.replace("duration_s: 5", "duration_s: 0.01"))
    assert scenario.controller.period_s == 0.02 and scenario.physics.gnss.period_s == 0.1


# -- spawn and despawn -------------------------------------------------------------------------------------------
def test_despawn_before_spawn_is_refused_at_the_despawn():
    text = LIST + "    spawn_at_s: 2.0\n    despawn_at_s: 1.0\n"
    assert problems(text) == ["s.yaml:9: vehicles[1].despawn_at_s: must be after spawn_at_s (2 s), got 1"]


def test_spawn_at_or_after_the_end_is_refused():
    text = BASE.replace("  count: 3\n", "  count: 3\n  overrides:\n    robot2: {spawn_at_s: 5.0}\n")
    assert problems(text) == ["s.yaml:8: vehicles.overrides.robot2.spawn_at_s: must be in [0, duration_s) = [0, 5) "
                              "s: a robot spawned at or after the end never runs, got 5"]


def test_despawn_after_the_end_is_refused_and_within_the_run_accepted():
    assert problems(LIST + "    despawn_at_s: 6.0\n") == [
        "s.yaml:8: vehicles[1].despawn_at_s: must be in (spawn_at_s, duration_s] = (0, 5] s, got 6"]
    robots = expand_robots(parse_scenario(LIST + "    spawn_at_s: 1.0\n    despawn_at_s: 5.0\n"))
    assert (robots[1].spawn_ns, robots[1].despawn_ns) == (1_000_000_000, 5_000_000_000)


# -- finite values, lengths and masses ---------------------------------------------------------------------------
@pytest.mark.parametrize(("key", "value", "shown"), [("x", ".nan", "nan"), ("x", ".inf", "inf"),
                                                     ("y", "-.inf", "-inf")])
def test_a_start_position_that_is_not_finite_is_refused(key: str, value: str, shown: str):
    text = LIST.replace("initial: {x: -3.0}", f"initial: {{{key}: {value}}}")
    assert problems(text) == [f"s.yaml:7: vehicles[1].initial.{key}: Input should be a finite number, got {shown}"]


def test_a_start_position_far_from_the_origin_is_refused():
    text = LIST.replace("initial: {x: -3.0}", "initial: {x: 1.0e+20}")
    assert problems(text) == ["s.yaml:7: vehicles[1].initial.x: Input should be less than or equal to 100000, "
                              "got 1e+20"]


def test_a_default_placement_beyond_the_frame_is_refused_at_the_fleet():
    text = BASE + "platoon: {size: 1, lateral_spacing_m: 60000.0}\n"
    assert problems(text) == ["s.yaml:6: vehicles.count: robot 'robot2' would start at (x, y) = (0, -120000) m, "
                              "more than 100 km from the origin (the range of the local frame); use fewer robots per "
                              "platoon, smaller gaps or platoon.lateral_spacing_m, or place it with 'initial'"]


def test_a_waypoint_far_from_the_origin_is_refused():
    text = BASE + "leader:\n  profile: waypoints\n  path: {waypoints: [[0, 0], [2.0e+5, 0]]}\n"
    assert problems(text) == ["s.yaml:12: leader.path.waypoints[1][0]: must be in [-100000, 100000] m (within 100 "
                              "km of the origin), got 200000"]


@pytest.mark.parametrize(("key", "value", "message"), [
    ("wheelbase_m", "0", "must be a finite number in (0, 100], got 0"),
    ("mass_kg", "-1.0", "must be a finite number in (0, 1e+06], got -1.0"),
    ("length_m", ".nan", "must be a finite number in (0, 100], got nan"),
    ("yaw_inertia_kgm2", "1.0e+308", "must be a finite number in (0, 1e+09], got 1e+308"),
    ("cornering_stiffness_front_npr", "0", "must be a finite number in (0, 1e+08], got 0"),
    ("max_power_w", ".inf", "must be a finite number in (0, 1e+09], got inf"),
])
def test_vehicle_lengths_masses_and_stiffnesses_are_physical(key: str, value: str, message: str):
    text = BASE.replace("  count: 3\n", f"  count: 3\n  template:\n    params:\n      {key}: {value}\n")
    assert problems(text) == [f"s.yaml:9: vehicles.template.params.{key}: {message}"]


def test_the_centre_of_gravity_lies_between_the_axles():
    text = BASE.replace("  count: 3\n", "  count: 3\n  template: {params: {wheelbase_m: 0.3, cg_to_front_m: 0.4}}\n")
    assert problems(text) == ["s.yaml:7: vehicles.template.params.cg_to_front_m: must be below wheelbase_m (0.3): "
                              "the centre of gravity lies between the axles, got 0.4"]


@pytest.mark.parametrize(("block", "line", "path", "message"), [
    ("channel: {type: itsg5, radio: {breakpoint_m: 1.0e+308}}", 10, "channel.radio.breakpoint_m",
     "Input should be less than or equal to 10000, got 1e+308"),
    ("channel: {type: itsg5, radio: {tx_power_dbm: -1.0e+308}}", 10, "channel.radio.tx_power_dbm",
     "Input should be greater than or equal to -30, got -1e+308"),
    ("channel: {type: itsg5, generation: {t_gen_cam_max_s: 1.0e+308}}", 10, "channel.generation.t_gen_cam_max_s",
     "Input should be less than or equal to 60, got 1e+308"),
    ("channel: {type: itsg5, mac: {slot_s: .nan}}", 10, "channel.mac.slot_s",
     "Input should be a finite number, got nan"),
    ("channel: {type: ideal, outages: [{start_s: 1.0, end_s: .inf}]}", 10, "channel.outages[0].end_s",
     "Input should be a finite number, got inf"),
])
def test_channel_parameters_are_finite_and_physical(block: str, line: int, path: str, message: str):
    assert problems(BASE + block + "\n") == [f"s.yaml:{line}: {path}: {message}"]


@pytest.mark.parametrize(("text", "expected"), [
    (BASE + "  k1: .nan\n", "s.yaml:10: controller.k1: Input should be a finite number, got nan"),
    (BASE + "  standstill_m: 1.0e+308\n",
     "s.yaml:10: controller.standstill_m: Input should be less than or equal to 100, got 1e+308"),
    (BASE + "leader: {params: {speed_mps: .inf}}\n", "s.yaml:10: leader.params.speed_mps: Input should be a finite "
     "number, got inf"),
    (BASE + "physics: {range_sensor: {max_range_m: .inf}}\n",
     "s.yaml:10: physics.range_sensor.max_range_m: Input should be a finite number, got inf"),
    (BASE + "federates:\n  - {name: ros, type: ros2, params: {period_s: .nan}}\n",
     "s.yaml:11: federates[0].params.period_s: Input should be a finite number, got nan"),
])
def test_no_nan_or_infinity_anywhere(text: str, expected: str):
    assert expected in problems(text)


@pytest.mark.parametrize(("override", "expected"), [
    ("channel={type: itsg5, generation: {t_gen_cam_min_s: abc}}", "channel.generation.t_gen_cam_min_s: Input should "
     "be a valid number, unable to parse string as a number, got 'abc' (from --set)"),
    ("leader.params.speed_mps=abc", "leader.params.speed_mps: Input should be a valid number, unable to parse string "
     "as a number, got 'abc' (from --set)"),
])
def test_the_estimate_and_placement_leave_unchecked_parameters_to_their_models(override: str, expected: str):
    # both run before the channel's and the profile's own models: a wrong type is still reported at its field
    assert problems(BASE, (override,)) == [f"s.yaml: {expected}"]


def test_infinity_stays_allowed_where_it_means_no_limit():
    text = BASE + "leader:\n  profile: waypoints\n  path: {waypoints: [[0, 0], [20, 0]], max_curvature_per_m: .inf}\n"
    assert parse_scenario(text).leader.path.max_curvature_per_m == float("inf")


# -- resources ---------------------------------------------------------------------------------------------------
def test_the_estimate_counts_steps_robots_trace_columns_and_v2x_rows():
    ideal = estimate_resources(parse_scenario(BASE))
    assert (ideal.robots, ideal.steps, ideal.trace_samples, ideal.trace_columns) == (3, 501, 501, 25)
    assert ideal.v2x_rows == 2 * 3 * 501  # a sent and a received row per robot and step
    itsg5 = estimate_resources(parse_scenario(BASE + "channel: {type: itsg5}\n"))
    assert itsg5.v2x_rows == 3 * 5 * 10 * 3  # 10 CAMs/s at T_GenCamMin, each sent and read by two
    sparse = estimate_resources(parse_scenario(BASE + "outputs: {trace_period_s: 0.1}\n"))
    assert sparse.trace_samples == 51 and sparse.memory_bytes < ideal.memory_bytes
    untraced = estimate_resources(parse_scenario(BASE + "outputs: {trace: false}\n"))
    assert (untraced.trace_samples, untraced.v2x_rows, untraced.disk_bytes) == (0, 0, 0)


@pytest.mark.slow
def test_the_schemas_largest_fleet_is_refused_without_force():
    msg = problems(BASE, ("vehicles.count=100000",))
    assert len(msg) == 1 and msg[0].startswith("s.yaml: vehicles.count: the run would need about ")
    assert "(501 trace samples x 100,000 robots x 25 columns" in msg[0]
    assert "more than the budget of 8.0 GB (--memory-budget-gb)" in msg[0] and "--force" in msg[0]
    assert msg[0].endswith("(from --set)")


def test_force_lifts_the_budget_and_the_budget_is_a_setting():
    text = BASE.replace("count: 3", "count: 400").replace("duration_s: 5", "duration_s: 20")
    estimate = estimate_resources(parse_scenario(text))
    assert 0.5e9 < estimate.memory_bytes < 8e9
    assert problems(text, budget=MemoryBudget(gb=0.5))[0].startswith("s.yaml:6: vehicles.count: the run would "
                                                                     "need about ")
    scenario = parse_scenario(text)
    check_plan(scenario, MemoryBudget(gb=0.5, force=True))  # raises nothing
    assert scenario.vehicles.count == 400


def test_the_loader_validates_and_never_plans():
    """Start positions and memory are the plan step's: the loader accepts what only a built world refuses."""
    far = BASE + "platoon: {size: 1, lateral_spacing_m: 60000.0}\n"
    assert parse_scenario(far).platoon.lateral_spacing_m == 60000.0
    assert any("from the origin" in line for line in problems(far))


# -- placement of a law without a desired gap --------------------------------------------------------------------
def test_cruise_followers_start_at_the_default_spacing():
    scenario = load_scenario(REPO / "scenarios" / "platoon.yaml", ["controller={type: cruise, period_s: 0.02}"])
    robots = expand_robots(scenario)
    v0, length = robots[0].initial.v, robots[0].dims.length_m
    gaps = [a.initial.x - b.initial.x for a, b in itertools.pairwise(robots)]
    # bumper to bumper standstill gap + time gap x start speed, plus a body length between rear axles
    assert gaps == pytest.approx([DEFAULT_STANDSTILL_GAP_M + DEFAULT_TIME_GAP_S * v0 + length] * 3)
    assert gaps[0] == pytest.approx(2.0 + 1.0 * 1.0 + 0.49)


# -- through the command line ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_cli_reports_a_zero_step_and_a_huge_fleet_as_bad_input(tmp_path: Path):
    bad = tmp_path / "s.yaml"
    bad.write_text(BASE.replace("step_s: 0.01", "step_s: 1.0e-10"))
    result = cli("validate", str(bad))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{bad}:4: step_s: must be at least 1e-06 s (1 us), got 1e-10" in result.stderr
    bad.write_text(BASE.replace("count: 3", "count: 100000"))
    result = cli("run", str(bad), "--out", str(tmp_path / "run"), "--quiet", "--memory-budget-gb", "8")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{bad}:6: vehicles.count: the run would need about " in result.stderr
    assert not (tmp_path / "run").exists()  # refused before anything was written


@pytest.mark.slow
def test_cli_force_runs_past_the_budget(tmp_path: Path):
    small = tmp_path / "s.yaml"
    small.write_text(BASE.replace("duration_s: 5", "duration_s: 0.2") + "outputs: {plots: false, report: false}\n")
    refused = cli("run", str(small), "--out", str(tmp_path / "a"), "--quiet", "--memory-budget-gb", "0.01")
    assert refused.returncode == 2 and "more than the budget of 10 MB (--memory-budget-gb)" in refused.stderr
    forced = cli("run", str(small), "--out", str(tmp_path / "b"), "--quiet", "--memory-budget-gb", "0.01", "--force")
    assert forced.returncode == 0, forced.stderr
    assert json.loads((tmp_path / "b" / "run.json").read_text())["status"] == "ok"


@pytest.mark.slow
def test_cli_runs_the_shipped_platoon_with_cruise(tmp_path: Path):
    out = tmp_path / "cruise"
    result = cli("run", "scenarios/platoon.yaml", "--set", "controller={type: cruise, period_s: 0.02}",
                 "--set", "duration_s=2", "--set", "outputs.plots=false", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "run.json").read_text())["status"] == "ok"


def test_set_controller_type_cruise_on_the_shipped_platoon():
    """Switching the law with --set drops the old law's parameters (k1 ...) and keeps the block's own keys."""
    scenario = load_scenario(REPO / "scenarios" / "platoon.yaml", ["controller.type=cruise"])
    assert scenario.controller.type == "cruise" and scenario.controller.period_s == 0.02
    assert "k1" not in scenario.controller.model_dump()
    same = load_scenario(REPO / "scenarios" / "platoon.yaml", ["controller.type=ela_cacc", "controller.k1=2"])
    assert same.controller.model_dump()["k2"] == 1.0 and same.controller.model_dump()["k1"] == 2  # same law: kept


# -- the shipped scenarios ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_shipped_scenarios_validate_and_run(path: Path, tmp_path: Path):
    scenario = load_scenario(path, ["duration_s=1.0", "outputs.plots=false", "outputs.report=false",
                                    "maneuvers=[]"])  # requests after 1 s would be errors (after the end)
    result = run_scenario(scenario, tmp_path / path.stem)
    assert result.ok, result.error
    assert result.run_info["sim_time_s"] == pytest.approx(1.0)
