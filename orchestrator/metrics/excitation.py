"""The frequency response along a platoon, measured from a sinusoid leader: |Gamma(jw)| at the leader's frequency.

String stability in the frequency domain asks whether |Gamma(jw)| = |V_i(jw)| / |V_{i-1}(jw)| <= 1 (Ploeg et al.,
IEEE TCST 22(2), 2014; Naus et al., IEEE TVT 59(9), 2010). A leader whose speed is a sinusoid at w excites every
follower at w once the transient has died out, so the ratio of the speed amplitudes at w of a follower and its
predecessor is |Gamma(jw)| at that one frequency: a sweep over the leader's frequency draws the curve.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from core.robot_blocks import DriveSpec

from .follower import FollowerView
from .registry import follower_metric

MIN_PERIODS = 2
"""Whole periods of excitation the estimate needs in its window (the later half of the excited time)."""


def sinusoid_of(drive: DriveSpec | None) -> tuple[float, float] | None:
    """(frequency [Hz], start [s]) of a sinusoid leader drive; None for any other profile."""
    if drive is None or drive.profile != "sinusoid":
        return None
    from controllers.profiles import ShapeParams  # the profile's own defaults, one definition

    params = ShapeParams(**drive.params)
    return params.frequency_hz, params.start_s


def amplitude_at(t_s: np.ndarray, y: np.ndarray, w: float) -> float:
    """Amplitude of the component of ``y`` at ``w`` rad/s: least squares on sin, cos and an offset."""
    basis = np.column_stack([np.sin(w * t_s), np.cos(w * t_s), np.ones(len(t_s))])
    coef = np.linalg.lstsq(basis, y, rcond=None)[0]
    return float(np.hypot(coef[0], coef[1]))


@follower_metric("gamma")
def gamma(f: FollowerView) -> dict[str, Any]:
    """|Gamma(jw)| of speed at a sinusoid leader's frequency: the follower's speed amplitude over its
    predecessor's, on the whole periods of the later half of the excitation (steady state). None for other
    leader profiles or fewer than two such periods."""
    leader = next((r for r in f.run.robots if r.id == f.robot.leader), None)
    excitation = sinusoid_of(leader.driver if leader is not None else None)
    if excitation is None:
        return {"gamma_speed": None, "gamma_frequency_hz": None}
    frequency, start = excitation
    t_s = f.me.t_ns[f.im] / 1e9
    period = 1.0 / frequency
    periods = np.floor((t_s[-1] - start) / 2 / period) if len(t_s) else 0.0
    if periods < MIN_PERIODS:
        return {"gamma_speed": None, "gamma_frequency_hz": frequency}
    window = t_s >= t_s[-1] - periods * period
    w = 2 * np.pi * frequency
    mine = amplitude_at(t_s[window], f.me.cols["v"][f.im][window], w)
    ahead = amplitude_at(t_s[window], f.pred.cols["v"][f.ip][window], w)
    return {"gamma_speed": mine / ahead if ahead > 0 else None, "gamma_frequency_hz": frequency}
