"""Every registered vehicle preset, built-in or installed, through its contract: a mapping of known vehicle
parameters in their physical ranges, complete enough for the dynamic single-track model and a robot's body."""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
import pytest

from core.robot_blocks import VehicleBlock
from core.vehicle_presets import PRESETS, preset
from federates.physics.models.dynamic import DynamicSingleTrack
from federates.physics.presets import parameter_problems, parameter_range_problems

BODY = ("length_m", "width_m", "rear_overhang_m", "wheelbase_m")


def check_preset(name: str) -> None:
    params = preset(name)
    problems = parameter_problems(params) + [f"{k}: {m}" for k, m in parameter_range_problems(params)]
    assert problems == [], f"preset '{name}': {problems}"
    missing = [k for k in BODY if k not in params]
    assert missing == [], f"preset '{name}' lacks body dimensions {missing}"
    model = DynamicSingleTrack(0.01)  # every parameter the dynamic model requires is there
    model.add([params], {"x": np.zeros(1), "y": np.zeros(1), "yaw": np.zeros(1), "v": np.ones(1)})
    assert VehicleBlock(preset=name).dims.plain()["length_m"] == params["length_m"]


@pytest.mark.parametrize("name", PRESETS.names())
def test_every_vehicle_preset_keeps_its_contract(name: str) -> None:
    check_preset(name)


def test_a_preset_is_read_only_and_handed_out_as_a_copy() -> None:
    name = PRESETS.builtin_names()[0]
    assert isinstance(PRESETS.get(name), MappingProxyType)
    copy = preset(name)
    copy["mass_kg"] = -1.0
    assert preset(name)["mass_kg"] > 0


def test_a_preset_out_of_range_fails_the_check() -> None:
    PRESETS.register("negative_mass", "tests.conformance.broken:NEGATIVE_MASS")
    try:
        with pytest.raises(AssertionError, match=r"mass_kg: must be a finite number"):
            check_preset("negative_mass")
    finally:
        PRESETS.unregister("negative_mass")
