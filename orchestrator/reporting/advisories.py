"""What linear theory predicts about a scenario before it runs: notes for the CLI, run.json and the report.

Today one check: lateral string stability of the extended look-ahead CACC (controllers.ela_cacc_stability, S3),
evaluated at the lowest cruising speed of the leader's drive, where it is hardest to meet.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from controllers.ela_cacc_stability import lateral_peak_gain, max_stable_lateral_gain, min_lateral_stable_speed
from controllers.profiles import profile_inputs
from core.robots import RobotSpec
from orchestrator.scenario.model import WAYPOINTS, Scenario


def leader_cruise_speeds(scenario: Scenario, min_speed_mps: float, hold_s: float = 1.0) -> np.ndarray:
    """The speeds above ``min_speed_mps`` the leaders cruise at: held (zero acceleration) for at least ``hold_s``
    on a profile sampled at 10 Hz, so that the ramps of a speed change or a stop do not count; for a track, its
    cruise and per-waypoint speeds. Empty when the leader never cruises."""
    if scenario.leader.profile == WAYPOINTS and scenario.leader.path is not None:
        path = scenario.leader.path
        speeds = np.asarray(path.speeds_mps if path.speeds_mps else [path.speed_mps], dtype=float)
        return speeds[speeds > min_speed_mps]
    dt = 0.1
    t = np.arange(0.0, scenario.duration_s + 1e-9, dt)
    v, _, a = profile_inputs(scenario.leader.profile, scenario.leader.params, t)
    held = (np.abs(a) < 1e-9) & (v > min_speed_mps)
    # runs of held samples: keep those lasting hold_s or more
    edges = np.flatnonzero(np.diff(np.concatenate([[0], held.astype(np.int8), [0]])))
    keep = np.zeros_like(held)
    for start, stop in zip(edges[::2], edges[1::2], strict=True):
        if (stop - start) * dt >= hold_s:
            keep[start:stop] = True
    return v[keep]


def lateral_stability_notes(scenario: Scenario, robots: list[RobotSpec]) -> list[str]:
    """One note per distinct extended look-ahead parameter set whose chain is laterally string unstable at the
    leader's lowest cruising speed (k2 (r + h v) > 2 v, with k2 the larger gain: the errors are world-frame, so
    the lateral gain is k1 where the platoon heads along y): lateral errors will grow from follower to follower."""
    groups: dict[tuple[float, float, float, float], list[str]] = defaultdict(list)
    for robot in robots:
        block = {} if robot.controller is None else robot.controller.settings
        if block.get("type") != "ela_cacc" or not block.get("extended", True):
            continue  # the classic look-ahead (s = 0) has |Gamma_lat| = 1 / |1 + j tau w| < 1 at every speed
        # the gains act on world-frame errors: the lateral one is k2 heading along x, k1 heading along y
        key = (max(float(block["k1"]), float(block["k2"])), float(block["standstill_m"]), float(block["time_gap_s"]),
               float(block["min_speed_mps"]))
        groups[key].append(robot.name)
    notes = []
    for (k2, r, h, v_min), names in groups.items():
        speeds = leader_cruise_speeds(scenario, v_min)
        if len(speeds) == 0:
            continue
        v = float(np.min(speeds))
        peak = lateral_peak_gain(k2, r, h, v)
        if peak <= 1.0:
            continue
        who = names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]} ({len(names)} robots)"
        from_speed = min_lateral_stable_speed(k2, r, h)
        notes.append(
            f"ela_cacc {who}: laterally string unstable at the leader's lowest cruising speed {v:.3g} m/s: "
            f"k (r + h v) = {k2 * (r + h * v):.3g} > 2 v = {2 * v:.3g} for the gain k = {k2:.3g}, so lateral errors "
            f"can grow by up to {peak:.3g}x per follower. Stable with k1, k2 <= {max_stable_lateral_gain(r, h, v):.3g} "
            "at this speed"
            + (f", or from {from_speed:.3g} m/s." if np.isfinite(from_speed) else " (no speed helps: k2 h >= 2).")
        )
    return notes
