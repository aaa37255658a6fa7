"""Spawning a fleet does per-configuration work once per distinct block, and every robot still gets its own values:
robots built from one template share their blocks, robots with overrides get theirs, and the federates' rows carry
each robot's parameters whatever the mix."""

from __future__ import annotations

import numpy as np

from core.robots import RobotSpec, shared_rows
from core.spawn_columns import vehicle_params
from orchestrator.build.world import build_world, expand_robots
from orchestrator.scenario.loader import parse_scenario

FLEET = """
name: mixed-fleet
duration_s: 1.0
step_s: 0.01
vehicles:
  count: 6
  template: {preset: auna_rc_1to10}
  overrides:
    robot3: {vehicle: {params: {length_m: 0.61, max_speed_mps: 3.3}}}
    robot4: {controller: {type: ploeg_cacc, time_gap_s: 0.7}}
platoon: {size: 3}
leader: {profile: constant, params: {speed_mps: 1.0}}
controller: {type: ela_cacc, time_gap_s: 0.5}
outputs: {plots: false, report: false, trace: false}
"""


def test_shared_rows_groups_by_identity_in_first_seen_order():
    a, b = {"k": 1}, {"k": 1}  # equal but distinct: two blocks
    distinct, index = shared_rows([a, b, a, None, b, None])
    assert distinct[0] is a and distinct[1] is b and distinct[2] is None
    assert index.tolist() == [0, 1, 0, 2, 1, 2]
    distinct, index = shared_rows([])
    assert distinct == [] and len(index) == 0


def test_robots_of_one_template_share_their_blocks_and_overrides_get_their_own():
    robots = expand_robots(parse_scenario(FLEET))
    by_name = {r.name: r for r in robots}
    plain = [by_name[n] for n in ("robot1", "robot2", "robot5")]
    assert all(r.vehicle is plain[0].vehicle for r in plain)
    assert all(r.dims is plain[0].dims for r in plain)
    assert plain[0].controller is plain[1].controller
    assert by_name["robot3"].vehicle is not plain[0].vehicle
    assert by_name["robot3"].dims.length_m == 0.61
    assert by_name["robot4"].controller.type == "ploeg_cacc"
    assert by_name["robot1"].controller.type == "ela_cacc"
    # the two platoons' leaders drive the same profile: one shared driver block
    assert by_name["robot0"].driver is by_name["robot3"].driver


def test_robot_params_read_like_per_robot_dicts():
    robots = expand_robots(parse_scenario(FLEET))
    params = vehicle_params(robots)
    expected = [r.vehicle.params for r in robots]
    assert len(params) == len(robots) and list(params) == expected
    assert len(params.distinct) == 2  # the template and robot3's override
    np.testing.assert_array_equal(params.column("max_speed_mps"), [p["max_speed_mps"] for p in expected])
    np.testing.assert_array_equal(params.column("no_such_parameter", 7.5), np.full(len(robots), 7.5))
    taken = params.take([3, 0])
    assert taken[0]["max_speed_mps"] == 3.3 and taken[1]["max_speed_mps"] == expected[0]["max_speed_mps"]


def test_federate_rows_carry_each_robots_own_parameters_after_a_batch_spawn():
    world = build_world(parse_scenario(FLEET))
    world.scheduler.setup()
    world.scheduler._apply_pending(0)  # the batch queued for t = 0
    physics = world.federates["physics"]
    control = world.federates["control"]
    names = [r.name for r in world.robots]
    length = physics._bodies.length
    assert length[names.index("robot3")] == 0.61
    assert np.all(np.delete(length, names.index("robot3")) == world.robots[0].dims.length_m)
    max_speed = control._max_speed
    assert max_speed[names.index("robot3")] == 3.3
    assert max_speed[names.index("robot1")] == world.robots[1].vehicle.params["max_speed_mps"]
    # two controller groups among the followers: ela_cacc (robot1, robot2, robot5) and robot4's ploeg_cacc
    members = sorted(sorted(g.ids.tolist()) for g in control._groups.by_key.values())
    ids = {r.name: r.id for r in world.robots}
    assert members == sorted([[ids["robot4"]], sorted(ids[n] for n in ("robot1", "robot2", "robot5"))])


def test_a_robot_given_twice_in_one_batch_is_refused_by_name():
    world = build_world(parse_scenario(FLEET))
    spec = RobotSpec(id=99, name="twin")
    try:
        world.scheduler.roster.add([spec, spec])
    except ValueError as exc:
        assert "twin" in str(exc) and "already alive" in str(exc)
    else:
        raise AssertionError("a duplicate robot in one batch was accepted")
