"""Parameters far off the scale of the vehicles they drive: a car-sized gap on 1:10 robots, a speed excitation
larger than the speed, a pure-pursuit look-ahead of a few hundredths of a second at motorway speed. Each is a
``note:`` from ``coopsim validate`` and ``coopsim run`` (and in ``run.json``), never an error: a researcher may mean
it."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np

from controllers import CONTROLLERS
from controllers.profiles import profile_inputs
from core.robots import RobotSpec
from orchestrator.scenario.model import BLOCK_KEYS, WAYPOINTS, Scenario

GAP_LENGTHS_MAX = 8.0
"""A standstill gap beyond this many vehicle lengths is out of scale (PATH's 5 m on a 0.5 m robot is 10)."""

LOOKAHEAD_TIME_MIN_S = 0.25
"""Pure pursuit with a look-ahead shorter than this much travel oscillates and, in a chain, amplifies lateral
errors; 0.5-1 s is usual at road speeds (Coulter 1992, CMU-RI-TR-92-01; Snider 2009, CMU-RI-TR-09-08)."""


def scale_notes(scenario: Scenario, robots: list[RobotSpec]) -> list[str]:
    """Notes on gaps, leader excitations and look-ahead distances that do not fit the vehicles' size or speed."""
    return [*_gap_notes(robots), *_excitation_notes(robots), *_lookahead_notes(robots)]


def _who(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]} ({len(names)} robots)"


def _gap_notes(robots: list[RobotSpec]) -> list[str]:
    groups: dict[tuple[str, float, float], list[str]] = defaultdict(list)
    gaps: dict[str, float] = {}  # per distinct controller block: a fleet shares one or a few
    for robot in robots:
        if robot.controller is None:
            continue
        block = robot.controller.settings
        key = json.dumps(block, sort_keys=True, default=str)
        if key not in gaps:
            law_cls = CONTROLLERS.get(block["type"])
            law = law_cls(law_cls.Params(**{k: v for k, v in block.items() if k not in BLOCK_KEYS}))
            gaps[key] = float(law.desired_gap(np.zeros(1))[0])
        gap = gaps[key]
        length = robot.dims.length_m
        if np.isfinite(gap) and gap > GAP_LENGTHS_MAX * length:
            groups[(block["type"], gap, length)].append(robot.name)
    return [f"{law} {_who(names)}: a standstill gap of {gap:.3g} m is {gap / length:.0f} vehicle lengths "
            f"({length:.3g} m): a gap for another scale of vehicle? (set the law's gap parameters)"
            for (law, gap, length), names in groups.items()]


def _excitation_notes(robots: list[RobotSpec]) -> list[str]:
    notes = []
    seen: set[str] = set()
    for robot in robots:
        drive = robot.driver
        if drive is None or drive.profile == WAYPOINTS:
            continue
        params = drive.params
        amplitude, speed = params.get("amplitude_mps"), params.get("speed_mps")
        max_speed = float(robot.vehicle.params["max_speed_mps"])
        key = repr((drive.profile, sorted(params.items())))
        if key in seen:
            continue
        seen.add(key)
        if drive.profile == "sinusoid" and amplitude is not None and speed is not None and amplitude > speed:
            notes.append(f"leader {robot.name}: the {drive.profile} amplitude {amplitude:.3g} m/s exceeds its "
                         f"speed {speed:.3g} m/s, so the commanded speed would go negative and is cut at 0 (a "
                         "car-scale excitation on slower vehicles?)")
        t = np.arange(0.0, 60.0, 0.05)
        v_max = float(np.max(profile_inputs(drive.profile, params, t)[0]))
        if v_max > max_speed:
            notes.append(f"leader {robot.name}: the profile reaches {v_max:.3g} m/s, above the vehicle's maximum "
                         f"{max_speed:.3g} m/s")
    return notes


def _lookahead_notes(robots: list[RobotSpec]) -> list[str]:
    speeds = _cruise_speeds(robots)
    groups: dict[tuple[float, float], list[str]] = defaultdict(list)
    for robot in robots:
        lateral = None if robot.controller is None else robot.controller.settings.get("lateral")
        v = speeds.get(robot.platoon, 0.0)
        if not lateral or v <= 0:
            continue
        distance = max(float(lateral.get("min_lookahead_m", 0.3)),
                       float(lateral.get("lookahead_m", 1.0)) + float(lateral.get("lookahead_time_s", 0.0)) * v)
        if distance / v < LOOKAHEAD_TIME_MIN_S:
            groups[(distance, v)].append(robot.name)
    return [f"{_who(names)}: a pure-pursuit look-ahead of {d:.3g} m at {v:.3g} m/s is {d / v:.2g} s of travel, "
            f"below {LOOKAHEAD_TIME_MIN_S:g} s: expect weaving that grows along the platoon (try lateral: "
            f"{{lookahead_m: {max(1.0, 0.2 * v):.2g}, lookahead_time_s: 0.8}})" for (d, v), names in groups.items()]


def _cruise_speeds(robots: list[RobotSpec]) -> dict[int, float]:
    """Each platoon's typical leader speed: its profile's mean over the first minute, or its track's cruise."""
    speeds: dict[int, float] = {}
    for robot in robots:
        drive = robot.driver
        if drive is None or robot.platoon in speeds:
            continue
        if drive.profile == WAYPOINTS:
            path = drive.path or {}
            speeds[robot.platoon] = float(max(path.get("speeds_mps") or [path.get("speed_mps", 1.0)]))
        else:
            t = np.arange(0.0, 60.0, 0.05)
            speeds[robot.platoon] = float(np.mean(profile_inputs(drive.profile, drive.params, t)[0]))
    return speeds
