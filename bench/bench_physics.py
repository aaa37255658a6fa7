"""Per-step cost of the physics stack for N robots: dynamic single track + tyres + actuators, wheel odometry with
dead reckoning, IMU and pose fusion.

``.venv/bin/python bench/bench_physics.py --robots 1000 --steps 2000 --preset mit_racecar_1to10 --tyre pacejka``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from federates.physics.models.dynamic import DynamicSingleTrack
from federates.physics.presets import preset
from federates.physics.sensors import DeadReckoning, Imu, PoseFusion


def run(robots: int, steps: int, preset_name: str, tyre: str, speed_mps: float, dt: float = 0.01,
        seed: int = 0) -> dict[str, float]:
    """Microseconds per step: ``model_us`` (model only) and ``total_us`` (model + odometry + IMU + fusion)."""
    rng = np.random.default_rng(seed)
    p = dict(preset(preset_name), tyre_model=tyre)
    model = DynamicSingleTrack(dt)
    x0 = np.arange(robots) * 5.0
    zeros = np.zeros(robots)
    model.add([p] * robots, {"x": x0, "y": zeros, "yaw": zeros, "v": np.full(robots, speed_mps)})
    odo = DeadReckoning(rng, noise_rel=0.01, heading_source="imu")
    odo.add(np.full(robots, p["track_m"]), x0, zeros, zeros)
    imu = Imu(rng)
    imu.add(robots)
    fusion = PoseFusion()
    fusion.add(x0, zeros, zeros)
    steer = 0.5 * p["max_steer_rad"] * np.sin(np.arange(robots))
    cmd = {"speed": np.full(robots, speed_mps), "accel": zeros, "steer": steer, "yaw_rate": zeros}

    def full_step() -> None:
        model.step(cmd)
        w = model.wheel_odometry()
        gyro = imu.measure(model.state["yaw_rate"])
        odo.step(w["dist_rl"], w["dist_rr"], dt, gyro["yaw_rate"])
        fusion.predict(odo.ds, odo.dth)

    for _ in range(10):  # compile and settle
        full_step()
    t0 = time.perf_counter()
    for _ in range(steps):
        model.step(cmd)
    model_us = (time.perf_counter() - t0) / steps * 1e6
    t0 = time.perf_counter()
    for _ in range(steps):
        full_step()
    total_us = (time.perf_counter() - t0) / steps * 1e6
    return {"robots": robots, "model_us": model_us, "total_us": total_us,
            "substeps_mean": float(model.diagnostics["substeps"].mean()), "real_time_factor": dt * 1e6 / total_us}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; prints one line of results."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--robots", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--preset", default="mit_racecar_1to10")
    ap.add_argument("--tyre", default="pacejka")
    ap.add_argument("--speed", type=float, default=2.0, help="cruise speed [m/s]")
    ap.add_argument("--dt", type=float, default=0.01, help="step [s]")
    a = ap.parse_args(argv)
    r = run(a.robots, a.steps, a.preset, a.tyre, a.speed, a.dt)
    print(f"{a.preset} {a.tyre} N={r['robots']} dt={a.dt}s: model {r['model_us']:.0f} us/step, "
          f"model+odometry+IMU+fusion {r['total_us']:.0f} us/step ({r['real_time_factor']:.0f}x real time), "
          f"{r['substeps_mean']:.1f} sub-steps")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
