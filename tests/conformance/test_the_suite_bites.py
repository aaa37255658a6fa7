"""The conformance checks fail on broken entries: each entry in ``broken.py`` is registered like a plug-in, shows
up in ``names()`` (so the parametrised tests would run it) and its check fails with what is wrong."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from comms_models import COMMS_MODELS
from controllers import CONTROLLERS, LEADER_PROFILES
from core.registry import Registry
from federates.physics.models import VEHICLE_MODELS

from .checks import check_channel, check_law, check_profile, check_vehicle_model

CASES: list[tuple[Registry, str, Callable[[Any], None], str]] = [
    (CONTROLLERS, "NanAtStandstill", check_law, r"case 'standstill': 'accel' is not finite"),
    (CONTROLLERS, "OneValueForAllRows", check_law, r"'accel' has shape \(\), not \(1,\)"),
    (CONTROLLERS, "CoupledRows", check_law, r"'accel' of row 0 depends on the other rows"),
    (COMMS_MODELS, "FloatIds", check_channel, r"field 'receiver' is float64, declared int64"),
    (COMMS_MODELS, "Unseeded", check_channel, r"differs for the same seed"),
    (VEHICLE_MODELS, "NanYawRate", check_vehicle_model, r"field 'yaw_rate' has NaN or infinite values"),
    (LEADER_PROFILES, "Stateful", check_profile, r"not a pure function of time"),
]


@pytest.fixture
def registered() -> Iterator[Callable[[Registry, str], str]]:
    """Registers a class of ``broken.py`` under a test name; every registration is removed afterwards."""
    done: list[tuple[Registry, str]] = []

    def register(registry: Registry, cls_name: str) -> str:
        name = f"broken_{cls_name.lower()}"
        registry.register(name, f"tests.conformance.broken:{cls_name}")
        done.append((registry, name))
        return name

    yield register
    for registry, name in done:
        registry.unregister(name)


@pytest.mark.parametrize(("registry", "cls_name", "check", "expected"), CASES, ids=[c[1] for c in CASES])
def test_a_broken_entry_fails_its_contract(registered, registry, cls_name, check, expected) -> None:
    name = registered(registry, cls_name)
    assert name in registry.names()  # the parametrised suite collects it
    with pytest.raises(AssertionError, match=expected):
        check(registry.get(name))


def test_the_unbroken_parents_pass() -> None:
    """The broken entries differ from working ones only by the defect (so the failures above are the defects)."""
    check_law(CONTROLLERS.get("cruise"))
    check_channel(COMMS_MODELS.get("ideal"))
    check_vehicle_model(VEHICLE_MODELS.get("kinematic"))
    check_profile(LEADER_PROFILES.get("s_curve"))
