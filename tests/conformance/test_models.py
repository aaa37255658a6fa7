"""Every registered control law, channel model, vehicle model and leader profile meets its contract
(``checks.py``). Parametrised over ``names()``: built-ins and installed entry points alike, so an entry is tested
the moment it is registered."""

from __future__ import annotations

import pytest

from comms_models import COMMS_MODELS
from controllers import CONTROLLERS, LEADER_PROFILES
from federates.physics.models import VEHICLE_MODELS

from .checks import check_channel, check_law, check_profile, check_vehicle_model


@pytest.mark.parametrize("name", CONTROLLERS.names())
def test_control_law(name: str) -> None:
    check_law(CONTROLLERS.get(name))


@pytest.mark.parametrize("name", COMMS_MODELS.names())
def test_channel_model(name: str) -> None:
    check_channel(COMMS_MODELS.get(name))


@pytest.mark.parametrize("name", VEHICLE_MODELS.names())
def test_vehicle_model(name: str) -> None:
    check_vehicle_model(VEHICLE_MODELS.get(name))


@pytest.mark.parametrize("name", LEADER_PROFILES.names())
def test_leader_profile(name: str) -> None:
    check_profile(LEADER_PROFILES.get(name))
