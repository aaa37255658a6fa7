"""A tyre model from outside the repository drives the dynamic model's compiled step: the saturating brush model
as a plug-in matches the built-in Fiala model bit for bit, a softer one changes the motion, and bad ones are
reported at validation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from federates.physics.models.dynamic import DynamicSingleTrack
from federates.physics.presets import preset
from orchestrator.scenario import ScenarioError, load_scenario

REPO = Path(__file__).resolve().parents[2]


def _drive(tyre: str, steps: int = 400) -> dict[str, np.ndarray]:
    """Two cars in a steady steer at 20 m/s for 4 s (10 ms steps); their state afterwards."""
    model = DynamicSingleTrack(0.01, "speed_steer")
    params = dict(preset("g35_sedan"), tyre_model=tyre)
    model.add([params, params], {"x": np.zeros(2), "y": np.array([0.0, 10.0]), "yaw": np.zeros(2),
                                 "v": np.full(2, 20.0)})
    commands = {"speed": np.full(2, 20.0), "accel": np.zeros(2), "steer": np.array([0.02, 0.06]),
                "yaw_rate": np.zeros(2)}
    for _ in range(steps):
        model.step(commands)
    return {k: v.copy() for k, v in model.state.items()}


@pytest.mark.slow
def test_a_plugin_equal_to_the_builtin_gives_the_same_motion_bit_for_bit():
    builtin, plugin = _drive("fiala"), _drive("tests.physics.tyre_plugins:Brush")
    for name in builtin:
        assert np.array_equal(builtin[name], plugin[name]), name
    assert builtin["yaw_rate"][1] > builtin["yaw_rate"][0] > 0.05  # it really turned


@pytest.mark.slow
def test_a_different_plugin_changes_the_motion():
    stiff, soft = _drive("tests.physics.tyre_plugins:Brush"), _drive("tests.physics.tyre_plugins:Soft")
    # half the cornering stiffness: more understeer at the same steering angle, so less yaw rate
    assert soft["yaw_rate"][0] < 0.95 * stiff["yaw_rate"][0]


def test_two_plugins_in_one_model_are_refused():
    model = DynamicSingleTrack(0.01)
    brush = dict(preset("g35_sedan"), tyre_model="tests.physics.tyre_plugins:Brush")
    soft = dict(preset("g35_sedan"), tyre_model="tests.physics.tyre_plugins:Soft")
    with pytest.raises(ValueError, match="one tyre plug-in at most"):
        model.add([brush, soft], {k: np.zeros(2) for k in ("x", "y", "yaw", "v")})


def test_scenarios_validate_plugin_tyres_like_builtins(tmp_path):
    scenario = REPO / "scenarios" / "platoon_dynamic.yaml"
    ok = load_scenario(scenario, ["vehicles.template.params.tyre_model=tests.physics.tyre_plugins:Brush"])
    assert ok.vehicles.template.params["tyre_model"] == "tests.physics.tyre_plugins:Brush"
    for name, message in (("tests.physics.tyre_plugins:NoForce", "sets no 'lateral'"),
                          ("tests.physics.tyre_plugins:Nowhere", "cannot import tyre model"),
                          ("os:system", "is not a TyreModel subclass"),
                          ("brushh", "'brushh' is not one of fiala, fiala_unsaturated, linear, pacejka")):
        with pytest.raises(ScenarioError, match=message):
            load_scenario(scenario, [f"vehicles.template.params.tyre_model={name}"])
