"""The steering law's end of the control step reads the predecessor's received sample in place (its rows in the
held arrays) instead of gathered copies: every output must equal, bit for bit, that of the gathered path."""

from __future__ import annotations

import numpy as np

from controllers.columns import LazyColumns
from controllers.pipeline import ControlPipeline

_FIELDS = ("x", "y", "yaw", "v", "a", "yaw_rate", "u_des")


def _held(m: int) -> dict[str, np.ndarray]:
    """Samples of ``m`` robots: one never received (NaN), one standing, one slower than the stop threshold, one
    with a NaN speed, the others moving and turning, some on a zero heading."""
    rng = np.random.default_rng(3)
    held = {name: rng.normal(size=m) for name in _FIELDS}
    held["x"] += 3.0
    held["v"] = 1.0 + rng.random(m)
    held["yaw"][::3] = 0.0
    held["yaw_rate"][::4] = 0.0
    held["x"][1] = held["y"][1] = held["v"][1] = np.nan  # nothing received yet
    held["v"][2] = 0.0
    held["v"][3] = 0.05
    held["v"][4] = np.nan
    return held


def _pipeline(n: int) -> ControlPipeline:
    pipeline = ControlPipeline.from_block({"type": "ela_cacc", "k1": 0.8, "k2": 1.3, "time_gap_s": 0.6}, 0.02)
    pipeline._ensure_rows(n)
    pipeline._state["yaw_rate"][:] = np.linspace(-0.3, 0.3, n)  # the yaw rates commanded last
    return pipeline


def test_the_steering_pass_on_rows_in_place_equals_the_gathered_path() -> None:
    m = 12
    held = _held(m)
    rows = np.array([4, 1, 9, 2, 3, 11, 0, 7, 5], np.int64)  # not in order, not all robots
    n = len(rows)
    rng = np.random.default_rng(5)
    ego = {"x": rng.normal(size=n), "y": rng.normal(size=n), "yaw": np.where(np.arange(n) % 2, 0.0, 0.2),
           "v": 0.5 + rng.random(n), "a": np.zeros(n), "yaw_rate": np.zeros(n)}
    in_place = LazyColumns(_FIELDS, lambda name: held[name][rows], (lambda name: held[name], rows))
    gathered = {name: held[name][rows] for name in _FIELDS}
    ages = np.where(np.isnan(gathered["x"]), np.inf, 0.05)
    first, second = _pipeline(n), _pipeline(n)
    for _ in range(3):  # the held yaw rates feed the next step
        got = first.step(0.0, dict(ego), in_place.copy(), {}, ages, ages, {})
        want = second.step(0.0, dict(ego), dict(gathered), {}, ages, ages, {})
        for g, w in zip((got.accel, got.yaw_rate, got.stop, got.degraded, got.desired_gap_m),
                        (want.accel, want.yaw_rate, want.stop, want.degraded, want.desired_gap_m), strict=True):
            np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(first._state["yaw_rate"], second._state["yaw_rate"])
    # the crafted rows reach every branch: no pose, stopped, moving on a curve
    assert got.accel[1] == 0.0 and got.stop[3] and got.stop[4] and not got.stop[0]
    assert not got.stop.all() and np.any(got.desired_gap_m != 1.0 + 0.6 * ego["v"])
