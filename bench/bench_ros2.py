"""The ROS 2 bridge's cost: its wall time per step with 4 and 32 robots (publishing odometry, ground truth, range,
received CAMs, markers and /clock), and the lock-step round trip per control period with a responding node.

    ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST .venv/bin/python bench/bench_ros2.py
    ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST .venv/bin/python bench/bench_ros2.py --duration 20 --robots 4 32

Per fleet size: the platoon scenario (ideal channel, CAMs at 10 Hz) with the bridge at 50 Hz in free mode and no
subscriber (what publishing costs), then in lock-step driving the last follower with
``tests/orchestrator/ros2_driver.py`` (its constant time-gap law) as the node in another process. The bridge's wall
time comes from run.json (``wall_time_by_federate_s``, the first step's discovery wait taken out); the round trip
(from the start of publishing a period to its last answer) from the bridge's run summary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bridge_args import bridge_arguments, machine  # noqa: E402  (bench/, the script's own directory)

from orchestrator.runner import run_scenario  # noqa: E402
from orchestrator.scenario import parse_scenario  # noqa: E402

DOMAIN = 91


def scenario(robots: int, duration: float, bridge: dict, driven: list[str]):
    overrides = [f"duration_s={duration}", f"vehicles.count={robots}", f"platoon.size={robots}",
                 "outputs.plots=false", "outputs.report=false",
                 f"federates={json.dumps([{'name': 'ros', 'type': 'ros2', 'params': bridge}])}",
                 "channel={type: ideal, rate_hz: 10}"]
    if driven:
        overrides.append(f"drivers={json.dumps([{'federate': 'ros', 'robots': driven}])}")
    return parse_scenario((REPO / "scenarios" / "platoon.yaml").read_text(), overrides=overrides)


def bridge_ms_per_step(info: dict, steps: int, discovery_s: float) -> float:
    return (info["wall_time_by_federate_s"]["ros"] - discovery_s) / steps * 1e3


def main() -> None:
    args, steps = bridge_arguments(__doc__)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    print(f"ROS 2 bridge, {args.duration:g} s simulated, bridge period {args.period:g} s ({steps} steps), "
          f"{machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.robots:
            free = {"period_s": args.period, "domain_id": DOMAIN}
            run_scenario(scenario(n, 1.0, free, []), Path(tmp) / f"warm{n}")  # compile kernels, load messages
            info = run_scenario(scenario(n, args.duration, free, []), Path(tmp) / f"free{n}").run_info
            free_ms = bridge_ms_per_step(info, steps, 0.0)
            total = sum(info["wall_time_by_federate_s"].values())
            print(f"{n:3d} robots, free, no subscriber: bridge {free_ms:.3f} ms/step "
                  f"({info['federates']['ros']['published'] / steps:.1f} messages/step); all federates "
                  f"{total / steps * 1e3:.3f} ms/step")
            driven = f"robot{n - 1}"
            driver = subprocess.Popen([sys.executable, str(REPO / "tests" / "orchestrator" / "ros2_driver.py"), "acc",
                                       str(DOMAIN), str(args.duration), str(Path(tmp) / "sent.json"), driven],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            try:
                assert driver.stdout is not None and driver.stdout.readline().strip() == "ready"
                lock = {"period_s": args.period, "domain_id": DOMAIN, "mode": "lockstep"}
                result = run_scenario(scenario(n, args.duration, lock, [driven]), Path(tmp) / f"lock{n}")
                driver.wait(timeout=60)
            finally:
                if driver.poll() is None:
                    driver.terminate()
                    driver.wait(timeout=10)
            if not result.ok:
                print(f"    lock-step run failed: {result.error}")
                continue
            summary = result.run_info["federates"]["ros"]["lockstep"]
            print(f"{n:3d} robots, lock-step with a responding node ({driven}): round trip p50 "
                  f"{summary['round_trip_p50_s'] * 1e3:.2f} ms, p99 {summary['round_trip_p99_s'] * 1e3:.2f} ms "
                  f"over {summary['periods']} periods (waiting after publishing: mean "
                  f"{summary['wait_s'] / summary['periods'] * 1e3:.2f} ms); run wall "
                  f"{sum(result.run_info['wall_time_by_federate_s'].values()):.2f} s")


if __name__ == "__main__":
    main()
