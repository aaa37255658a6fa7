"""Every registered tyre model, built-in or installed, through its contract: the dynamic model runs with it (finite
state, a turn in the direction steered), and a plug-in's lateral force opposes the slip, is odd, and reports the
cornering stiffness it was given at zero slip."""

from __future__ import annotations

import numpy as np
import pytest

from federates.physics.models.dynamic import DynamicSingleTrack
from federates.physics.models.dynamic_kernel import TYRE_PLUGIN
from federates.physics.models.tyres import TYRE_MODELS
from federates.physics.presets import preset


def check_tyre(name: str) -> None:
    cls = TYRE_MODELS.get(name)
    params = dict(preset("g35_sedan"), tyre_model=name)
    if name == "pacejka" or "pacejka_lat_front" not in params:
        params.update(pacejka_lat_front=(10.0, 1.3, 1.0, 0.0), pacejka_lat_rear=(10.0, 1.3, 1.0, 0.0))
    model = DynamicSingleTrack(0.01)
    model.add([params], {"x": np.zeros(1), "y": np.zeros(1), "yaw": np.zeros(1), "v": np.full(1, 15.0)})
    for _ in range(200):
        model.step({"speed": np.full(1, 15.0), "accel": np.zeros(1), "steer": np.full(1, 0.03),
                    "yaw_rate": np.zeros(1)})
    state = model.state
    assert all(np.isfinite(v).all() for v in state.values()), f"{name}: non-finite state"
    assert state["yaw_rate"][0] > 0.05, f"{name}: steering left does not turn left"
    if cls.code == TYRE_PLUGIN:
        c_alpha, fz, mu = 80_000.0, 4_000.0, 0.9
        fy, k = cls.lateral(1e-4, fz, c_alpha, mu)
        assert fy < 0, f"{name}: the lateral force must oppose the slip angle"
        assert cls.lateral(-1e-4, fz, c_alpha, mu)[0] == pytest.approx(-fy), f"{name}: not odd in the slip angle"
        assert k == pytest.approx(c_alpha, rel=0.05), f"{name}: stiffness at zero slip is not c_alpha"


@pytest.mark.parametrize("name", TYRE_MODELS.names())
def test_every_tyre_model_keeps_its_contract(name: str) -> None:
    check_tyre(name)


@pytest.mark.slow
def test_a_plugin_that_pushes_the_wrong_way_fails_the_check(monkeypatch) -> None:
    TYRE_MODELS.register("wrong_way", "tests.conformance.broken:WrongWayTyre")
    try:
        with pytest.raises(AssertionError, match=r"steering left does not turn left|must oppose the slip angle"):
            check_tyre("wrong_way")
    finally:
        TYRE_MODELS.unregister("wrong_way")
