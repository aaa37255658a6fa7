"""Scenario validation: one test per kind of error, each checking the message names file, line, path and fix."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from orchestrator.build.world import expand_robots
from orchestrator.scenario import ScenarioError, load_scenario, parse_scenario

REPO = Path(__file__).resolve().parents[2]

BASE = """\
version: 1
name: t
duration_s: 5
vehicles:
  count: 3
controller:
  type: ela_cacc
  time_gap_s: 1.0
"""


def problems(text: str, overrides: tuple[str, ...] = ()) -> str:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(textwrap.dedent(text), "s.yaml", overrides)
    return str(info.value)


def test_the_shipped_platoon_scenario_is_valid_and_as_specified():
    scenario = load_scenario(REPO / "scenarios" / "platoon.yaml")
    robots = expand_robots(scenario)
    assert [r.name for r in robots] == ["robot0", "robot1", "robot2", "robot3"]
    assert [r.predecessor for r in robots] == [None, 1, 2, 3]
    assert scenario.duration_s == 40 and scenario.step_s == 0.01
    assert scenario.leader.profile == "s_curve" and scenario.channel.type == "ideal"
    ctrl = scenario.controller.model_dump()
    assert (ctrl["k1"], ctrl["k2"], ctrl["standstill_m"], ctrl["time_gap_s"]) == (1.0, 1.0, 1.0, 1.0)
    params = robots[1].dims.plain()
    assert params["wheelbase_m"] == 0.32
    # followers start at the desired look-ahead distance D = r + h v behind their predecessor
    assert robots[0].initial.x - robots[1].initial.x == pytest.approx(2.0)


def test_unknown_key_suggests_the_close_name_and_lists_allowed():
    msg = problems(BASE + "duraton_s: 3\n")
    assert "s.yaml:9: duraton_s: unknown field 'duraton_s' (did you mean 'duration_s'?)" in msg
    assert "allowed:" in msg and "vehicles" in msg


def test_unknown_controller_parameter_is_reported_at_its_path_and_line():
    text = BASE.replace("  time_gap_s: 1.0\n", "  time_gap: 1.0\n")
    msg = problems(text)
    assert "s.yaml:8: controller.time_gap: unknown field 'time_gap' (did you mean 'time_gap_s'?)" in msg


def test_per_vehicle_controller_override_error_names_the_vehicle_index():
    text = """\
    version: 1
    duration_s: 5
    vehicles:
      - name: lead
      - name: a
      - name: b
        controller: {time_gap: 0.5}
    """
    msg = problems(text)
    assert "s.yaml:7: vehicles[2].controller.time_gap: unknown field 'time_gap' (did you mean 'time_gap_s'?)" in msg


def test_wrong_type_says_what_was_given():
    msg = problems(BASE.replace("count: 3", "count: three"))
    assert "s.yaml:5: vehicles.count:" in msg and "valid integer" in msg and "'three'" in msg


def test_out_of_range_value_says_the_bound():
    msg = problems(BASE.replace("time_gap_s: 1.0", "time_gap_s: -1"))
    assert "s.yaml:8: controller.time_gap_s: Input should be greater than 0, got -1" in msg


def test_missing_required_field():
    msg = problems(BASE.replace("duration_s: 5\n", ""))
    assert "duration_s: required field is missing" in msg


def test_unknown_registry_name_lists_the_allowed_ones():
    msg = problems(BASE.replace("type: ela_cacc", "type: ela_cac"))
    assert "s.yaml:7: controller.type: unknown controller 'ela_cac' (did you mean 'ela_cacc'?); allowed:" in msg
    msg = problems(BASE + "channel: {type: itsg6}\n")
    assert "unknown channel model 'itsg6' (did you mean 'itsg5'?)" in msg


def test_invalid_yaml_gives_the_line():
    msg = problems(BASE + "leader: [unclosed\n")
    assert msg.startswith("s.yaml:") and "not valid YAML" in msg


def test_set_overrides_are_applied_and_errors_marked():
    scenario = parse_scenario(BASE, "s.yaml", ["controller.time_gap_s=0.5", "vehicles.count=5", "seed=7"])
    assert scenario.controller.model_dump()["time_gap_s"] == 0.5
    assert scenario.vehicles.count == 5 and scenario.seed == 7
    msg = problems(BASE, ("controller.time_gap_s=-2",))
    assert "controller.time_gap_s: Input should be greater than 0, got -2 (from --set)" in msg
    msg = problems(BASE, ("nonsense",))
    assert "--set expects path=value" in msg


def test_every_error_is_reported_at_once():
    msg = problems(BASE.replace("count: 3", "count: 0") + "duraton_s: 3\n")
    assert len(msg.splitlines()) == 2


def test_fleet_overrides_and_spawn_times():
    text = BASE + textwrap.dedent("""\
    platoon: {size: 3}
    """).replace("vehicles:\n  count: 3\n", "")
    override = "  overrides:\n    robot2: {spawn_at_s: 2.5, controller: {k1: 2.0}}\n"
    text = text.replace("  count: 3\n", "  count: 3\n" + override)
    robots = expand_robots(parse_scenario(text))
    assert robots[2].spawn_ns == 2_500_000_000
    assert robots[2].controller.settings["k1"] == 2.0 and robots[1].controller.settings["k1"] == 1.0


def test_yaml_words_like_off_stay_strings():
    scenario = parse_scenario(BASE + "channel: {type: itsg5, dcc: {mode: off}}\n", "s.yaml", ["channel.dcc.table=A.2"])
    assert scenario.channel.model_dump()["dcc"]["mode"] == "off"
    scenario = parse_scenario(BASE, "s.yaml", ["outputs.plots=false", "channel={type: itsg5, dcc: {mode: off}}"])
    assert scenario.outputs.plots is False and scenario.channel.model_dump()["dcc"]["mode"] == "off"


def test_a_partial_initial_block_keeps_the_default_placement_of_the_other_fields():
    override = "  overrides:\n    robot2: {initial: {v: 0.5}}\n    robot1: {initial: {y: 3.0}}\n"
    robots = expand_robots(parse_scenario(BASE.replace("  count: 3\n", "  count: 3\n" + override)))
    assert robots[2].initial.v == 0.5
    assert robots[2].initial.x < robots[1].initial.x < 0.0  # still behind, not at 0
    assert robots[1].initial.y == 3.0 and robots[1].initial.x < 0.0


def test_per_robot_controller_overrides_are_validated_like_the_block():
    override = ("  overrides:\n    robot2: {controller: {period_s: -1, predict: bogus, "
                "fallback: {timeout_s: abc}}}\n")
    msg = problems(BASE.replace("  count: 3\n", "  count: 3\n" + override))
    # the bound's wording is the schema's (a positive period, or the smallest sane one)
    assert re.search(r"vehicles\.overrides\.robot2\.controller\.period_s: (Input should be greater than 0|must be "
                     r"at least \S+ s \(1 us\)), got -1", msg), msg
    assert "vehicles.overrides.robot2.controller.predict: Input should be 'none' or 'ctrv'" in msg
    assert "vehicles.overrides.robot2.controller.fallback.timeout_s:" in msg
    assert all(line.startswith("s.yaml:7:") for line in msg.splitlines())
    msg = problems(BASE, ("controller.period_s=0.015",))
    assert "controller.period_s: must be a multiple of step_s (0.01 s), got 0.015" in msg


def test_an_override_with_another_law_keeps_the_federate_settings():
    text = BASE.replace("  count: 3\n", "  count: 3\n  overrides:\n    robot2: {controller: {type: acc}}\n")
    robots = expand_robots(parse_scenario(text + "  predict: ctrv\n"))
    assert robots[2].controller.type == "acc" and robots[2].controller.settings["predict"] == "ctrv"
    assert "k1" not in robots[2].controller.settings and robots[1].controller.settings["k1"] == 1.0


@pytest.mark.parametrize(("extra", "expected"), [
    ("{name: control, type: 'tests.orchestrator.plugins:FailAt'}", "the name 'control' is taken"),
    ("{name: x, type: 'nosuch.mod:Cls'}", "cannot import federate 'nosuch.mod:Cls'"),
    ("{name: x, type: 'tests.orchestrator.plugins:FailAt', params: {bogus: 1}}", "it takes: at_s"),
    ("{name: p2, type: physics}", "params of 'physics'"),
])
def test_extra_federates_are_checked_before_the_run(extra, expected):
    assert expected in problems(BASE + f"federates:\n  - {extra}\n")


@pytest.mark.parametrize(("text", "where"), [
    (BASE.replace("name: t", "name: ../../outside"), "s.yaml:2: name"),
    (BASE.replace("count: 3", "count: 3\n  name_prefix: ../../tmp/x_"), "s.yaml:6: vehicles.name_prefix"),
    (BASE.replace("count: 3", "count: 3\n  overrides: {robot1: {name: 'a/b'}}"), "vehicles.overrides.robot1.name"),
    (BASE + "federates:\n  - {name: '..', type: 'tests.orchestrator.plugins:FailAt', params: {at_s: 1}}\n",
     "federates[0].name"),
])
def test_a_name_that_becomes_a_file_name_cannot_leave_its_folder(text, where):
    """Scenario, robot, platoon and federate names are written as file or folder names (runs/<name>, a data set's
    receivers/<robot>.jsonl, a federate's log): a separator, '.' or '..' is bad input at the field's line."""
    message = problems(text)
    assert where in message and "may not hold '/'" in message, message


def test_names_with_spaces_and_dots_stay_valid():
    scenario = parse_scenario(BASE.replace("name: t", "name: my run 2.1").replace("count: 3",
                                                                                  "count: 3\n  name_prefix: car."))
    assert scenario.name == "my run 2.1" and [r.name for r in expand_robots(scenario)] == ["car.0", "car.1", "car.2"]


def test_outage_must_end_after_it_starts():
    msg = problems(BASE + "channel: {type: ideal, outages: [{start_s: 5, end_s: 2}]}\n")
    assert "channel.outages[0]: end_s (2.0) must be after start_s (5.0)" in msg


def test_vehicle_parameters_are_checked_by_name_and_type():
    msg = problems(BASE.replace("  count: 3\n", "  count: 3\n  template: {params: {max_sped_mps: 0.1, "
                                                "tyre_model: pacejk, mu: high}}\n"))
    assert "vehicles.template.params: max_sped_mps: unknown vehicle parameter (did you mean 'max_speed_mps'?)" in msg
    assert "tyre_model: 'pacejk' is not one of fiala, fiala_unsaturated, linear, pacejka" in msg
    assert "mu: expected a number, got 'high'" in msg


def test_the_channel_takes_the_scenarios_origin():
    scenario = parse_scenario(BASE + "origin: {lat_deg: 48.1, lon_deg: 11.6}\nchannel: {type: itsg5}\n")
    block = scenario.channel.model_dump()
    assert (block["origin_lat_deg"], block["origin_lon_deg"]) == (48.1, 11.6)
    msg = problems(BASE + "channel: {type: itsg5, origin_lat_deg: 10.0}\n")
    assert "channel.origin_lat_deg: the channel uses the scenario's origin" in msg


# -- plug-ins: every registry-backed field takes a path (or an entry point) and validates its parameters ---------
PLUGINS = "tests.orchestrator.plugins"


def test_a_law_by_path_validates_its_parameters_at_their_line():
    text = BASE.replace("type: ela_cacc", "type: 'controllers.acc:Acc'").replace("time_gap_s: 1.0", "time_gap: 1")
    msg = problems(text)
    assert "s.yaml:8: controller.time_gap: unknown field 'time_gap' (did you mean 'time_gap_s'?)" in msg
    scenario = parse_scenario(BASE.replace("type: ela_cacc", "type: 'controllers.acc:Acc'"))
    assert scenario.controller.type == "controllers.acc:Acc" and scenario.controller.model_dump()["lambda_gain"] == 0.1


@pytest.mark.parametrize(("path", "expected"), [
    ("'nosuch.laws:Law'", "s.yaml:7: controller.type: cannot import controller 'nosuch.laws:Law': No module named"),
    (f"'{PLUGINS}:NotALaw'", "s.yaml:7: controller.type: controller 'tests.orchestrator.plugins:NotALaw' is not a "
                             "Controller subclass (it is a class tests.orchestrator.plugins.NotALaw)"),
    (f"'{PLUGINS}:Nothing'", "has no attribute 'Nothing'"),
])
def test_a_law_path_that_is_not_a_law_is_reported_at_its_line(path, expected):
    assert expected in problems(BASE.replace("type: ela_cacc", f"type: {path}"))


def test_a_per_robot_law_by_path_is_validated_at_the_override():
    override = "    robot2: {controller: {type: 'controllers.acc:Acc', lamda_gain: 2}}\n"
    text = BASE.replace("  count: 3\n", "  count: 3\n  overrides:\n" + override)
    msg = problems(text)
    assert "s.yaml:7: vehicles.overrides.robot2.controller.lamda_gain: unknown field 'lamda_gain' (did you mean " \
           "'lambda_gain'?)" in msg
    msg = problems(text.replace("'controllers.acc:Acc', lamda_gain: 2", "'nosuch:Law'"))
    assert "s.yaml:7: vehicles.overrides.robot2.controller.type: cannot import controller 'nosuch:Law'" in msg


def test_a_channel_by_path_validates_its_parameters():
    msg = problems(BASE + "channel: {type: 'comms_models.ideal:IdealChannel', outage: []}\n")
    assert "s.yaml:9: channel.outage: unknown field 'outage' (did you mean 'outages'?)" in msg
    msg = problems(BASE + f"channel: {{type: '{PLUGINS}:Probe'}}\n")
    assert "channel.type: channel model 'tests.orchestrator.plugins:Probe' is not a CommsModel subclass" in msg


def test_a_leader_profile_by_path_runs_its_own_parameters():
    text = BASE + f"leader:\n  profile: '{PLUGINS}:Stop'\n  params: {{speed_mps: 0.5, stop_at: 3}}\n"
    assert "s.yaml:11: leader.params.stop_at: unknown field 'stop_at' (did you mean 'stop_at_s'?)" in problems(text)
    scenario = parse_scenario(text.replace("stop_at:", "stop_at_s:"))
    assert scenario.leader.params == {"speed_mps": 0.5, "stop_at_s": 3.0}
    robots = expand_robots(scenario)
    assert robots[0].initial.v == 0.5 and robots[0].driver.params["stop_at_s"] == 3.0
    from controllers.profiles import ProfileParams, profile_inputs

    # the control federate's form: profile_inputs(name, ProfileParams(**driver params), t)
    params = ProfileParams(**scenario.leader.params)
    v, _, _ = profile_inputs(scenario.leader.profile, params, np.array([0.0, 2.9, 3.0]))
    assert v.tolist() == [0.5, 0.5, 0.0]


def test_a_builtin_profile_keeps_its_strict_parameters_and_defaults():
    msg = problems(BASE + "leader: {profile: s_curv, params: {sped_mps: 1}}\n")
    assert "leader.profile: unknown leader profile 's_curv' (did you mean 's_curve'?); allowed: braking," in msg
    msg = problems(BASE + "leader: {profile: s_curve, params: {sped_mps: 1}}\n")
    assert "s.yaml:9: leader.params.sped_mps: unknown field 'sped_mps' (did you mean 'speed_mps'?)" in msg
    scenario = parse_scenario(BASE + "leader: {profile: s_curve, params: {speed_mps: 2}}\n")
    assert scenario.leader.params["speed_mps"] == 2.0 and scenario.leader.params["yaw_rate_radps"] == 0.1


def test_a_vehicle_model_by_path_validates_its_own_parameters(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "docs" / "examples"))
    model = "'coopsim_examples.vehicle:LagUnicycle'"
    text = BASE.replace("  count: 3\n", f"  count: 3\n  template:\n    model: {model}\n    params: {{tau: 0.2, "
                                        "max_speed_mps: 2}\n")
    msg = problems(text)
    assert "vehicles.template.params: tau: unknown vehicle parameter" in msg
    msg = problems(text.replace("tau:", "tau_s:").replace("0.2", "-1"))
    assert "s.yaml:8: vehicles.template.params.tau_s: Input should be greater than 0" in msg
    scenario = parse_scenario(text.replace("tau:", "tau_s:"))
    assert scenario.vehicles.template.params == {"tau_s": 0.2, "max_speed_mps": 2}
    msg = problems(BASE.replace("  count: 3\n", "  count: 3\n  template: {model: 'nosuch:Model'}\n"))
    assert "s.yaml:6: vehicles.template.model: cannot import vehicle model 'nosuch:Model'" in msg


def test_a_federate_with_a_params_model_is_validated_at_its_lines():
    text = BASE + f"federates:\n  - name: log\n    type: '{PLUGINS}:Logged'\n    params: {{period: 0.1}}\n"
    assert "s.yaml:12: federates[0].params.period: unknown field 'period' (did you mean 'period_s'?)" in problems(text)
    assert parse_scenario(text.replace("period:", "period_s:")).federates[0].params == {"period_s": 0.1}


# -- checks across fields, each at its own field and line ----------------------------------------------------------
def test_a_bool_is_not_a_count():
    msg = problems(BASE.replace("count: 3", "count: true"))
    assert "s.yaml:5: vehicles.count: Input should be a valid integer, got True" in msg
    assert "platoon.size: Input should be a valid integer, got False" in problems(BASE + "platoon: {size: false}\n")
    assert "seed: Input should be a valid integer, got True" in problems(BASE + "seed: true\n")


def test_the_trace_period_is_checked_at_its_line():
    msg = problems(BASE + "outputs:\n  trace: true\n  trace_period_s: 0.015\n")
    assert msg == "s.yaml:11: outputs.trace_period_s: must be a multiple of step_s (0.01 s), got 0.015"
    msg = problems(BASE, ("outputs.trace_period_s=.inf",))  # refused as infinite or as off the grid: not at a line
    assert msg.startswith("s.yaml: outputs.trace_period_s: ") and msg.endswith("got inf (from --set)")


def test_federate_name_clashes_are_checked_at_the_name():
    msg = problems(BASE + "federates:\n  - {name: a, type: ros2}\n  - name: a\n    type: ros2\n")
    assert msg == "s.yaml:11: federates[1].name: the name 'a' is taken by federates[0]; federate names are unique"
    msg = problems(BASE + "federates:\n  - {name: v2x, type: ros2}\n")
    assert msg.startswith("s.yaml:10: federates[0].name: the name 'v2x' is taken by a built-in federate")


def test_robot_names_ids_and_overrides_are_checked_at_their_lines():
    fleet = BASE.replace("  count: 3\n", "  count: 3\n  overrides:\n    robot1: {id: 3}\n    robot7: {spawn_at_s: 1}\n")
    msg = problems(fleet)
    assert "s.yaml:8: vehicles.overrides.robot7: no robot named 'robot7' in the fleet (robots are robot0 .. robot2)" \
        in msg
    assert "s.yaml:7: vehicles.overrides.robot1.id: station id 3 is used twice" in msg
    listed = "vehicles:\n  - {name: lead}\n  - {name: a}\n  - name: a\n"
    msg = problems(BASE.replace("vehicles:\n  count: 3\n", listed))
    assert msg == "s.yaml:7: vehicles[2].name: robot name 'a' is used twice"


def test_a_problem_inside_a_set_value_is_marked_as_from_set():
    msg = problems(BASE, ("controller={type: ela_cacc, time_gap: 1}",))
    assert msg.startswith("s.yaml: controller.time_gap: unknown field 'time_gap'") and msg.endswith("(from --set)")
