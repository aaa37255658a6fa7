"""Compile the kernels at install time: ``python -m orchestrator.warm`` runs a short platoon with each built-in
vehicle model over each built-in channel, then short runs of what the shipped scenarios use besides (Pacejka tyres
with odometry, a waypoint leader with prediction, ACC, Ploeg's and the PATH CACC with lateral control, platoon
messages, maneuvers, the range sensor) and the collision check of bodies that touch, outputs off, so numba's
on-disk cache holds every kernel a run uses and the first ``coopsim run`` after installing does not spend seconds
compiling (``make demo`` and the Docker image call it). The scenarios are written here, not read from
``scenarios/``: the image warms its cache before it copies the scenarios, so that editing one does not compile
everything again. The ITS-G5 link loops are compiled serial and parallel in one kernel; the probe of how fast the
threads wake (``comms_models.itsg5.threads``) is compiled here too."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

MODELS = ("kinematic", "dynamic", "unicycle")
CHANNELS = ("ideal", "itsg5", "cv2x")

# the AuNa platoon of scenarios/platoon.yaml, half a second long
PLATOON = """
version: 1
name: warm
seed: 42
duration_s: 0.5
step_s: 0.01
origin: {lat_deg: 51.4934, lon_deg: 7.4136}
vehicles: {count: 4, template: {preset: auna_rc_1to10, model: kinematic}}
platoon: {size: 4}
leader: {profile: s_curve, params: {speed_mps: 1.0, yaw_rate_radps: 0.1}}
controller: {type: ela_cacc, period_s: 0.02, k1: 1.0, k2: 1.0, standstill_m: 1.0, time_gap_s: 1.0}
channel: {type: ideal}
outputs: {trace: true, plots: false, report: false}
"""

# a closed track, two platoons with their own laws and a joiner (scenarios/two_platoons.yaml, shortened)
TRACK = """
version: 1
name: warm_track
seed: 11
duration_s: 1.0
step_s: 0.01
leader:
  profile: waypoints
  path: {closed: true, speed_mps: 1.0, lookahead_m: 0.8,
         waypoints: [[0, 0], [20, 0], [24, 4], [24, 16], [20, 20], [0, 20], [-4, 16], [-4, 4]]}
controller: {type: ela_cacc, period_s: 0.02, k1: 1.0, k2: 1.0, standstill_m: 1.0, time_gap_s: 1.0, predict: ctrv}
platoons:
  - {name: inner, count: 3, template: {preset: auna_rc_1to10, model: kinematic}, start_along_m: 12.0,
     lane_offset_m: 0.8, controller: {type: acc, time_gap_s: 1.0, standstill_m: 1.0, lateral: {lookahead_m: 0.8}}}
  - {name: outer, count: 3, template: {preset: auna_rc_1to10, model: kinematic}, start_along_m: 60.0}
  - {name: joiner, members: [{name: joiner, vehicle: {preset: auna_rc_1to10, model: kinematic}}],
     start_along_m: 8.0, lane_offset_m: 1.6}
maneuvers: [{at_s: 0.1, type: join, robot: joiner, platoon: inner, position: 2}]
channel: {type: itsg5, platooning_message: {rate_hz: 10}}
outputs: {trace: true, plots: false, report: false}
"""

# cars on a motorway: Ploeg's CACC with lateral control, the range sensor, every maneuver
# (scenarios/highway_maneuvers.yaml and highway_sumo.yaml, shortened)
HIGHWAY = """
version: 1
name: warm_highway
seed: 3
duration_s: 1.5
step_s: 0.01
leader: {profile: constant, params: {speed_mps: 25.0}}
controller: {type: ploeg_cacc, period_s: 0.01, time_gap_s: 0.6, standstill_m: 2.0,
             lateral: {lookahead_m: 2.0, lookahead_time_s: 0.5}}
platoons:
  - {name: p1, count: 5, template: {preset: passenger_car}}
  - {name: tail_joiner, members: [{name: j_tail, vehicle: {preset: passenger_car}}], lane_offset_m: 3.5,
     start: {x: -120.0, y: 0.0}}
channel: {type: ideal, platooning_message: true}
physics: {range_sensor: {keep_factor: 1.5}}
maneuvers:
  - {at_s: 0.1, type: join, robot: j_tail, platoon: p1}
  - {at_s: 0.3, type: leave, robot: p1_3, lane_offset_m: -3.5}
  - {at_s: 0.6, type: split, platoon: p1, position: 2, name: rear}
  - {at_s: 1.0, type: merge, platoon: rear, into: p1}
outputs: {trace: true, plots: false, report: false}
"""

# what the shipped scenarios use beyond the platoon of each model over each channel: (text, overrides)
FEATURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (PLATOON, ("vehicles.template.model=dynamic", "vehicles.template.params={tyre_model: pacejka}",
               "physics.estimate=odometry")),
    (PLATOON, ("leader={profile: waypoints, path: {closed: true, speed_mps: 1.0, lookahead_m: 0.8, "
               "waypoints: [[5, 0], [10, 0], [12, 2], [12, 8], [10, 10], [0, 10], [-2, 8], [-2, 2], [0, 0]]}}",
               "controller.predict=ctrv", "channel.type=itsg5")),
    (PLATOON, ("controller={type: path_cacc, period_s: 0.02}",)),
    (PLATOON, ("controller={type: ploeg_cacc, period_s: 0.02}", "vehicles.template={preset: passenger_car, "
               "model: kinematic}", "leader={profile: constant, params: {speed_mps: 25.0}}", "channel.type=itsg5")),
    (TRACK, ()),
    (HIGHWAY, ()),
)


def warm(quiet: bool = False) -> float:
    """Run every (vehicle model, channel) once for half a second, then each of FEATURES; returns the wall time it
    took."""
    import numpy as np

    from comms_models.itsg5.threads import threads_wake_fast
    from federates.physics.collisions import colliding_pairs

    from .runner import run_scenario
    from .scenario import parse_scenario

    started = time.perf_counter()
    runs = [(PLATOON, (f"channel.type={channel}", f"vehicles.template.model={model}"))
            for model in MODELS for channel in CHANNELS]
    scenarios = [(parse_scenario(text, "<warm-up>", overrides), overrides) for text, overrides in [*runs, *FEATURES]]
    with tempfile.TemporaryDirectory() as tmp:
        for i, (scenario, overrides) in enumerate(scenarios):
            result = run_scenario(scenario, Path(tmp) / str(i))
            if not result.ok:
                raise RuntimeError(f"warm-up run {i} ({', '.join(overrides)}) failed: {result.error}")
    # two bodies that touch: the narrow phase, which a run reaches only when robots come close (a split, a merge)
    colliding_pairs(np.array([0.0, 0.5]), np.zeros(2), np.zeros(2), 1.0, 0.5, 0.1)
    threads_wake_fast()  # a 4-robot run never asks: the parallel loops pay from PARALLEL_MIN_LINKS links per frame
    took = time.perf_counter() - started
    if not quiet:
        print(f"compiled the kernels of {len(MODELS)} vehicle models x {len(CHANNELS)} channels and "
              f"{len(FEATURES)} scenario features in {took:.1f} s")
    return took


if __name__ == "__main__":
    warm(quiet="--quiet" in sys.argv[1:])
