"""A ROS 2 node in its own process, for the tests: subscribes to /clock, the markers and some robots' odometry,
ground truth, range and received CAMs (each with the QoS a ROS user would pick for it), prints "ready" once its
subscriptions exist, and writes every message it gets to a JSON file when the run's ground truth reaches ``end_s``
(or after ``wall_timeout_s``).

Run: python ros2_peer.py DOMAIN_ID END_S OUT_JSON ROBOT [ROBOT ...]
"""

from __future__ import annotations

import json
import math
import sys
import time

import rclpy
from nav_msgs.msg import Odometry
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Range
from std_msgs.msg import UInt8MultiArray
from visualization_msgs.msg import MarkerArray


def _t(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def _finite(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)  # JSON has no infinities


def main(domain_id: int, end_s: float, out: str, robots: list[str], wall_timeout_s: float = 60.0) -> None:
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain_id)
    node = rclpy.create_node("peer", context=ctx)
    got: dict[str, list] = {"clock": [], "markers": []}
    reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)

    def odometry(topic: str):
        def on(msg: Odometry) -> None:
            p, q, tw = msg.pose.pose.position, msg.pose.pose.orientation, msg.twist.twist
            got.setdefault(topic, []).append({
                "t": _t(msg.header.stamp), "frame": msg.header.frame_id,
                "child": msg.child_frame_id, "x": p.x, "y": p.y, "qz": q.z, "qw": q.w, "v": tw.linear.x,
                "yaw_rate": tw.angular.z})
        return on

    def range_(topic: str):
        def on(msg: Range) -> None:
            got.setdefault(topic, []).append({
                "t": _t(msg.header.stamp), "frame": msg.header.frame_id, "range": _finite(msg.range),
                "min": msg.min_range, "max": msg.max_range, "fov": msg.field_of_view, "kind": msg.radiation_type})
        return on

    def cam(topic: str):
        def on(msg: UInt8MultiArray) -> None:
            dim = msg.layout.dim[0]
            got.setdefault(topic, []).append({"data": bytes(msg.data).hex(), "offset": msg.layout.data_offset,
                                              "label": dim.label, "size": dim.size, "stride": dim.stride})
        return on

    def markers(msg: MarkerArray) -> None:
        got["markers"].append([{"ns": m.ns, "id": m.id, "type": m.type, "action": m.action, "frame": m.header.frame_id,
                                "t": _t(m.header.stamp), "x": m.pose.position.x, "y": m.pose.position.y,
                                "qz": m.pose.orientation.z, "qw": m.pose.orientation.w, "sx": m.scale.x,
                                "sy": m.scale.y, "sz": m.scale.z, "text": m.text} for m in msg.markers])

    # /clock as rclpy's time source takes it (best effort, depth 1 there; deeper here so none is dropped)
    node.create_subscription(Clock, "/clock", lambda m: got["clock"].append(_t(m.clock)),
                             QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT))
    node.create_subscription(MarkerArray, "/coopsim/markers", markers, reliable)
    for robot in robots:
        for kind in ("odom", "ground_truth"):
            node.create_subscription(Odometry, f"/{robot}/{kind}", odometry(f"{robot}/{kind}"), reliable)
        node.create_subscription(Range, f"/{robot}/range", range_(f"{robot}/range"), qos_profile_sensor_data)
        node.create_subscription(UInt8MultiArray, f"/{robot}/cam", cam(f"{robot}/cam"), reliable)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    print("ready", flush=True)
    start = time.monotonic()
    last = f"{robots[0]}/ground_truth"

    def done() -> bool:
        return bool(got.get(last)) and got[last][-1]["t"] >= end_s - 1e-9

    while time.monotonic() - start < wall_timeout_s and not done():
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
