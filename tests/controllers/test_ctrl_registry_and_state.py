"""Every registered longitudinal law behind one interface, the published defaults, and per-row state."""

from __future__ import annotations

import math

import numpy as np
import pytest

from controllers import CONTROLLERS
from controllers.acc import AccParams
from controllers.path_cacc import PathCaccParams, path_gains
from controllers.ploeg_cacc import PloegCacc, PloegCaccParams

LONGITUDINAL = ["cruise", "acc", "path_cacc", "ploeg_cacc", "cacc_fallback"]


def inputs(n: int, missing: bool) -> tuple[dict, dict, dict, dict]:
    nan = np.full(n, np.nan)
    ego = {"v": np.linspace(0.0, 30.0, n), "a": np.zeros(n)}
    pred = {"v": nan if missing else np.full(n, 20.0), "a": nan if missing else np.zeros(n)}
    leader = {"v": nan if missing else np.full(n, 20.0), "a": nan if missing else np.zeros(n)}
    sensors = {"gap_m": nan if missing else np.full(n, 12.0), "gap_rate_mps": nan if missing else np.zeros(n)}
    return ego, pred, leader, sensors


@pytest.mark.parametrize("name", LONGITUDINAL)
@pytest.mark.parametrize("missing", [False, True])
def test_registered_laws_share_one_interface(name, missing):
    cls = CONTROLLERS.get(name)
    law = cls(cls.Params())
    assert cls.steers is False and cls.gap_reference == "bumper"
    for _ in range(3):
        out = law.compute(*inputs(5, missing), 0.02)
        assert out["accel"].shape == (5,) and np.all(np.isfinite(out["accel"])), out
    assert law.desired_gap(np.full(5, 10.0)).shape == (5,)
    assert law.desired_gap(np.full(5, 10.0), np.full(5, 0.1)).shape == (5,)  # federate passes curvature


def test_defaults_are_the_references():
    acc = AccParams()
    assert (acc.time_gap_s, acc.lambda_gain, acc.standstill_m, acc.max_range_m) == (1.5, 0.1, 2.0, 250.0)
    assert (acc.cruise.kp, acc.cruise.max_accel_mps2) == (1.0, 1.5)
    ploeg = PloegCaccParams()
    assert (ploeg.time_gap_s, ploeg.kp, ploeg.kd, ploeg.standstill_m) == (0.5, 0.2, 0.7, 2.0)
    path = PathCaccParams()
    assert (path.spacing_m, path.c1, path.xi, path.omega_n) == (5.0, 0.5, 1.0, 0.2)
    a1, a2, a3, a4, a5 = path_gains(0.5, 1.0, 0.2)
    assert (a1, a2) == (0.5, 0.5)
    assert a3 == pytest.approx(-(2.0 - 0.5) * 0.2) and a4 == pytest.approx(-0.5 * 0.2)
    assert a5 == pytest.approx(-0.04)


def test_ploeg_integrates_exactly_under_zero_order_hold():
    """Constant drive c = kp e + kd e' + u_prev: u(t) = c (1 - exp(-t / h)) from u(0) = 0, for any dt."""
    h, dt = 0.5, 0.05
    law = PloegCacc(PloegCaccParams(time_gap_s=h))
    ego = {"v": np.array([10.0]), "a": np.array([0.0])}
    gap = 2.0 + h * 10.0 + 1.0  # e = 1 m, e' = 0
    sensors = {"gap_m": np.array([gap]), "gap_rate_mps": np.array([0.0])}
    pred = {"v": np.array([10.0]), "a": np.array([99.0]), "u": np.array([0.3])}  # u is used, not a
    for k in range(1, 21):
        u = law.compute(ego, pred, {}, sensors, dt)["accel"][0]
        assert u == pytest.approx((0.2 * 1.0 + 0.3) * (1.0 - math.exp(-k * dt / h)), rel=1e-12)
    big_dt = PloegCacc(PloegCaccParams(time_gap_s=h))
    u = big_dt.compute(ego, pred, {}, sensors, 10 * h)["accel"][0]  # forward Euler would overshoot here
    assert 0.0 < u < 0.5


def test_ploeg_state_follows_rows_and_starts_from_the_current_acceleration():
    law = PloegCacc(PloegCaccParams())
    n = 3
    ego = {"v": np.full(n, 10.0), "a": np.array([0.5, -0.5, 1.0])}
    pred = {"v": np.full(n, 10.0), "a": np.zeros(n)}
    sensors = {"gap_m": np.full(n, 7.0), "gap_rate_mps": np.zeros(n)}
    law.add_rows(n)
    assert np.all(np.isnan(law.state_u))
    law.compute(ego, pred, {}, sensors, 1e-9)
    np.testing.assert_allclose(law.state_u, ego["a"], atol=1e-6)  # bumpless start
    law.remove_rows(np.array([False, True, False]))
    np.testing.assert_allclose(law.state_u, [0.5, 1.0], atol=1e-6)
    law.add_rows(1)
    assert np.isnan(law.state_u[2])
    with pytest.raises(ValueError, match="remove_rows"):
        law.compute(ego | {"v": np.full(2, 10.0)}, pred, {}, sensors, 0.01)
    with pytest.raises(ValueError, match="out of range"):
        law.remove_rows([5])
