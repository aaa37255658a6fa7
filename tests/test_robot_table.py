"""The robot table: every robot is resolved once by the world into typed, frozen blocks, the federates get exactly
those blocks, and no module reads a robot's configuration as a string-keyed dict again."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from core.robot_blocks import ControllerSpec, Dims, DriveSpec, InitialState, VehicleBlock
from core.robots import RobotSpec, robot_config, robot_fields, robot_from_fields
from core.vehicle_presets import preset
from orchestrator.build.world import build_world
from orchestrator.scenario.loader import parse_scenario

from .tools.imports import PACKAGES, REPO

SCAN = (*PACKAGES, "tests", "bench")
"""Where the rule below holds: the project's packages, its tests and its benchmarks."""

FLEET = """
name: typed-fleet
duration_s: 1.0
step_s: 0.01
vehicles:
  count: 4
  template: {preset: passenger_car, model: dynamic}
  overrides:
    robot2: {vehicle: {preset: passenger_car, params: {length_m: 5.5}}, initial: {v: 2.0}}
leader: {profile: constant, params: {speed_mps: 1.0}}
controller: {type: ela_cacc, time_gap_s: 0.5}
outputs: {plots: false, report: false, trace: false}
"""


def _config_reads(tree: ast.AST) -> list[int]:
    """Lines that read a ``config`` off something that is not ``self`` as a mapping (``x.config[...]``,
    ``x.config.get(...)``, ``... in x.config``) or name a robot's ``config`` attribute as a string
    (``getattr(x, "config")``, ``spec_column(robots, "config")``, ``attrgetter("config")``)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript | ast.Attribute) and _is_config(node.value):
            if isinstance(node, ast.Subscript) or node.attr in ("get", "keys", "items", "values"):
                lines.append(node.lineno)
        elif isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            lines += [node.lineno for right in node.comparators if _is_config(right)]
        elif (isinstance(node, ast.Call) and _named(node.func) in ("getattr", "spec_column", "attrgetter")
              and any(isinstance(a, ast.Constant) and a.value == "config" for a in node.args)):
            lines.append(node.lineno)
    return lines


def _is_config(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "config"
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")))


def _named(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def test_no_module_reads_a_robot_config_as_a_dict() -> None:
    found = []
    for folder in SCAN:
        for path in sorted((REPO / folder).rglob("*.py")):
            if "node_modules" in path.parts or path.name == Path(__file__).name:
                continue
            found += [f"{path.relative_to(REPO)}:{line}" for line in _config_reads(ast.parse(path.read_text()))]
    assert not found, f"a robot's configuration read by string keys (use the typed blocks): {found}"


@pytest.mark.parametrize("source, bad", [
    ("robot.config['dims']", True), ("spec.config.get('driver')", True), ("'controller' in r.config", True),
    ("spec_column(robots, 'config')", True), ("getattr(robot, 'config')", True), ("self.config.estimate", False),
    ("fed.config.range_sensor.fov_rad", False), ("robot.dims.length_m", False),
])
def test_the_config_rule_sees_dict_reads(source: str, bad: bool) -> None:
    assert bool(_config_reads(ast.parse(source))) is bad


def test_robot_spec_has_no_config_field_and_its_blocks_are_frozen() -> None:
    names = {f.name for f in dataclasses.fields(RobotSpec)}
    assert "config" not in names
    assert {"vehicle", "dims", "initial", "controller", "driver", "command_source", "posed_by"} <= names
    spec = RobotSpec(1, "a")
    for block in (spec, spec.vehicle, spec.dims, spec.initial):
        with pytest.raises(dataclasses.FrozenInstanceError):
            block.name = "b"  # type: ignore[misc]


def test_a_vehicle_block_merges_its_preset_once_and_gives_its_body() -> None:
    vehicle = VehicleBlock("g35_sedan", "dynamic", {"length_m": 5.0, "input_mode": "accel_steer"})
    assert vehicle.params == {**preset("g35_sedan"), "length_m": 5.0, "input_mode": "accel_steer"}
    assert vehicle.dims == Dims(5.0, preset("g35_sedan")["width_m"], preset("g35_sedan")["rear_overhang_m"],
                                preset("g35_sedan")["wheelbase_m"])
    assert vehicle.input_mode == "accel_steer"
    assert RobotSpec(1, "a", vehicle=vehicle).dims is vehicle.dims  # a body left out is the vehicle's


def _spawned(text: str) -> tuple[list[RobotSpec], dict[str, list[RobotSpec]]]:
    """The world's robots and what each built-in federate was handed at the first spawn."""
    world = build_world(parse_scenario(text))
    handed: dict[str, list[RobotSpec]] = {}
    for name in ("physics", "control", "v2x"):
        fed = world.federates[name]
        original = fed.spawn

        def spawn(robots, _name=name, _original=original):  # type: ignore[no-untyped-def]
            handed.setdefault(_name, []).extend(robots)
            return _original(robots)

        fed.spawn = spawn
    world.scheduler.setup()
    world.scheduler._apply_pending(0)
    return world.robots, handed


def test_federates_get_the_worlds_typed_blocks_shared_per_template() -> None:
    robots, handed = _spawned(FLEET)
    for name, got in handed.items():
        assert all(a is b for a, b in zip(got, robots, strict=True)), name  # the world's specs themselves
    by_name = {r.name: r for r in robots}
    leader, plain, own = by_name["robot0"], by_name["robot1"], by_name["robot2"]
    assert isinstance(leader.driver, DriveSpec) and leader.controller is None and leader.command_source is None
    assert leader.driver.profile == "constant" and leader.driver.params["speed_mps"] == 1.0
    assert isinstance(plain.controller, ControllerSpec) and plain.driver is None
    assert plain.controller.type == "ela_cacc" and plain.controller.settings["time_gap_s"] == 0.5
    assert plain.controller is by_name["robot3"].controller  # one block per template
    assert plain.vehicle is leader.vehicle and plain.dims is leader.vehicle.dims
    assert plain.vehicle.model == "dynamic" and plain.vehicle.params == preset("passenger_car")
    assert own.vehicle is not plain.vehicle and own.dims.length_m == 5.5 and own.vehicle.model == "dynamic"
    assert isinstance(own.initial, InitialState) and own.initial.v == 2.0
    assert own.initial.x < plain.initial.x < leader.initial.x  # placed behind one another


def test_a_robot_crosses_the_wire_as_the_plain_config_and_comes_back_the_same() -> None:
    from federates.remote.codec import pb
    from federates.remote.descriptions import decode_robot, encode_robot

    robots, _ = _spawned(FLEET)
    for robot in robots:
        config = robot_config(robot)
        assert set(config) == {"vehicle", "initial", "dims", "driver" if robot.predecessor is None else "controller"}
        assert config["vehicle"] == {"preset": robot.vehicle.preset, "model": robot.vehicle.model,
                                     "params": dict(robot.vehicle.overrides)}
        back = decode_robot(encode_robot(robot, pb.Robot()))
        assert back == robot and back.vehicle.params == robot.vehicle.params and back.dims == robot.dims
        assert robot_from_fields(robot_fields(robot)) == robot
