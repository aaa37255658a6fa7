"""A ROS 2 node in its own process that drives robots over cmd_vel, for the tests. Prints "ready" once its
publishers and subscriptions exist; writes the commands it sent to a JSON file when it ends (the run's /clock
reached ``end_s``, or ``wall_timeout_s``).

Run: python ros2_driver.py LAW DOMAIN_ID END_S OUT_JSON ROBOT [ROBOT ...]

Laws:

- ``acc``: lock-step; a constant time-gap law on the robot's own range and odometry: the speed that makes the
  bumper gap ``R + H v``, ``v_cmd = (range - R) / H`` (no target in range: hold ``V_FREE``), straight ahead.
  Each answer is stamped with the period it answers, and sent only once that period's odometry and range are in.
- ``profile``: free mode; on every /clock tick a plain Twist with speed ``1.0`` m/s before ``STEP_AT_S`` and ``1.5``
  after, straight ahead.
- ``silent_from=S``: lock-step like ``acc`` until simulation time S, then no answer ever again.
"""

from __future__ import annotations

import json
import math
import sys
import time

import rclpy
from geometry_msgs.msg import Twist, TwistStamped
from nav_msgs.msg import Odometry
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Range

R_M = 0.8  # standstill bumper gap [m]
H_S = 1.0  # time gap [s]
V_FREE = 1.0  # speed without a target [m/s]
STEP_AT_S = 2.0
PROFILE = (1.0, 1.5)  # [m/s] before and after STEP_AT_S


def _ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def main(law: str, domain_id: int, end_s: float, out: str, robots: list[str], wall_timeout_s: float = 60.0) -> None:
    silent_from_ns = None
    if law.startswith("silent_from="):
        silent_from_ns = round(float(law.split("=", 1)[1]) * 1e9)
        law = "acc"
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain_id)
    node = rclpy.create_node("driver", context=ctx)
    reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
    sent: list[dict] = []
    clock_ns = [-1]
    odom: dict[str, dict[int, float]] = {r: {} for r in robots}  # robot -> stamp -> speed
    ranges: dict[str, dict[int, float]] = {r: {} for r in robots}
    answered: set[int] = set()
    pubs = {r: node.create_publisher(TwistStamped if law == "acc" else Twist, f"/{r}/cmd_vel", reliable)
            for r in robots}

    def answer_lockstep() -> None:
        # the period is the newest odometry stamp (reliable), not /clock (best effort: a lost tick must not hang us)
        t = max(odom[robots[0]], default=-1)
        if t < 0 or t in answered or (silent_from_ns is not None and t >= silent_from_ns):
            return
        if not all(t in odom[r] and t in ranges[r] for r in robots):
            return  # this period's inputs are not all in yet
        answered.add(t)
        for r in robots:
            gap = ranges[r][t]
            speed = V_FREE if math.isinf(gap) else max(0.0, (gap - R_M) / H_S)
            msg = TwistStamped()
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(t, 1_000_000_000)
            msg.header.frame_id = f"{r}/base_link"
            msg.twist.linear.x = speed
            pubs[r].publish(msg)
            sent.append({"robot": r, "t_ns": t, "speed": speed, "yaw_rate": 0.0})
        for table in (odom, ranges):  # keep the maps small
            for r in robots:
                for old in [k for k in table[r] if k < t]:
                    del table[r][old]

    def on_clock(msg: Clock) -> None:
        clock_ns[0] = _ns(msg.clock)
        if law == "acc":
            answer_lockstep()
        else:
            speed = PROFILE[0] if clock_ns[0] < STEP_AT_S * 1e9 else PROFILE[1]
            for r in robots:
                twist = Twist()
                twist.linear.x = speed
                pubs[r].publish(twist)
                sent.append({"robot": r, "t_ns": clock_ns[0], "speed": speed, "yaw_rate": 0.0})

    def on_odom(robot: str):
        def on(msg: Odometry) -> None:
            odom[robot][_ns(msg.header.stamp)] = msg.twist.twist.linear.x
            if law == "acc":
                answer_lockstep()
        return on

    def on_range(robot: str):
        def on(msg: Range) -> None:
            ranges[robot][_ns(msg.header.stamp)] = msg.range
            if law == "acc":
                answer_lockstep()
        return on

    node.create_subscription(Clock, "/clock", on_clock, QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))
    for r in robots:
        node.create_subscription(Odometry, f"/{r}/odom", on_odom(r), reliable)
        node.create_subscription(Range, f"/{r}/range", on_range(r), qos_profile_sensor_data)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    print("ready", flush=True)
    start = time.monotonic()
    while time.monotonic() - start < wall_timeout_s and clock_ns[0] < end_s * 1e9 - 1:
        executor.spin_once(timeout_sec=0.05)
    for _ in range(10):
        executor.spin_once(timeout_sec=0.01)
    executor.shutdown()
    node.destroy_node()
    rclpy.shutdown(context=ctx)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(sent, f)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5:])
