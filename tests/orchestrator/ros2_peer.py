"""A ROS 2 node in its own process, for the tests: subscribes to /clock and some robots' odometry, prints
"ready" once its subscriptions exist, and writes every message it gets to a JSON file when the clock reaches
``end_s`` (or after ``wall_timeout_s``).

Run: python ros2_peer.py DOMAIN_ID END_S OUT_JSON ROBOT [ROBOT ...]
"""

from __future__ import annotations

import json
import sys
import time

import rclpy
from nav_msgs.msg import Odometry
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rosgraph_msgs.msg import Clock


def main(domain_id: int, end_s: float, out: str, robots: list[str], wall_timeout_s: float = 60.0) -> None:
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain_id)
    node = rclpy.create_node("peer", context=ctx)
    got: dict[str, list] = {"clock": []}

    def odometry(topic: str):
        def on(msg: Odometry) -> None:
            p, q, tw = msg.pose.pose.position, msg.pose.pose.orientation, msg.twist.twist
            got.setdefault(topic, []).append({
                "t": msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9, "frame": msg.header.frame_id,
                "child": msg.child_frame_id, "x": p.x, "y": p.y, "qz": q.z, "qw": q.w, "v": tw.linear.x,
                "yaw_rate": tw.angular.z})
        return on

    node.create_subscription(Clock, "/clock", lambda m: got["clock"].append(m.clock.sec + m.clock.nanosec * 1e-9),
                             100)
    for robot in robots:
        for kind in ("odom", "ground_truth"):
            node.create_subscription(Odometry, f"/{robot}/{kind}", odometry(f"{robot}/{kind}"), 100)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    print("ready", flush=True)
    start = time.monotonic()
    while time.monotonic() - start < wall_timeout_s and not (got["clock"] and got["clock"][-1] >= end_s - 1e-9):
        executor.spin_once(timeout_sec=0.05)
    for _ in range(20):  # what is still in flight
        executor.spin_once(timeout_sec=0.01)
    executor.shutdown()
    node.destroy_node()
    rclpy.shutdown(context=ctx)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(got, f)


if __name__ == "__main__":
    main(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4:])
