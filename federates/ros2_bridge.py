"""A ROS 2 bridge: simulation time on /clock and every robot's odometry as nav_msgs/Odometry, so RViz, rosbag
or a ROS 2 node can follow a coopsim run (use_sim_time: true).

Scenario entry (``type: ros2``)::

    - name: ros
      type: ros2
      params: {period_s: 0.02, domain_id: 0, wait_for_subscribers_s: 5}

Topics per robot (names from the scenario), with frames after REP-105 and REP-103 (x east, y north, z up,
yaw counter-clockwise from east):

- ``/<robot>/odom``: what the robot believes (the ``estimate`` port), frame ``<robot>/odom`` ->
  ``<robot>/base_link``;
- ``/<robot>/ground_truth``: where it is (the ``state`` port), frame ``map`` -> ``<robot>/base_link``.

In both, the twist is in the child frame: linear.x the speed, angular.z the yaw rate. ``/clock`` carries the
simulation time of every bridge step. ``wait_for_subscribers_s`` holds the first step until subscribers have
been discovered, or that long: a run is often faster than DDS discovery, and messages sent before it are lost.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from orchestrator.core.federate import Federate, FederateMeta, Input, PortData, SetupContext
from orchestrator.core.ports import ESTIMATE, STATE, fields_of
from orchestrator.core.robots import RobotSpec
from orchestrator.core.timebase import NS_PER_S, seconds_to_ns


class Ros2Bridge(Federate):
    """Publishes /clock and per-robot Odometry every ``period_s`` (see the module docstring)."""

    def __init__(self, name: str, period_s: float = 0.02, domain_id: int | None = None,
                 wait_for_subscribers_s: float = 0.0, node_name: str = "coopsim", qos_depth: int = 100) -> None:
        super().__init__(name)
        if period_s <= 0:
            raise ValueError(f"period_s must be positive, got {period_s}")
        self.period_ns = seconds_to_ns(period_s)
        self.domain_id = domain_id
        self.wait_for_subscribers_s = wait_for_subscribers_s
        self.node_name = node_name
        self.qos_depth = qos_depth
        self._context: Any = None
        self._node: Any = None
        self._clock: Any = None
        self._odom: dict[int, Any] = {}
        self._truth: dict[int, Any] = {}
        self._names: dict[int, str] = {}
        self._waited = False

    def setup(self, ctx: SetupContext) -> FederateMeta:
        try:
            import rclpy
            from rclpy.context import Context
            from rosgraph_msgs.msg import Clock
        except ImportError:
            raise RuntimeError("the ROS 2 bridge needs rclpy and the message packages: pip install "
                               "'coopsim[ros2]'") from None
        self._context = Context()
        kwargs = {} if self.domain_id is None else {"domain_id": int(self.domain_id)}
        rclpy.init(context=self._context, **kwargs)
        self._node = rclpy.create_node(self.node_name, context=self._context)
        self._clock = self._node.create_publisher(Clock, "/clock", self.qos_depth)
        read = ("x", "y", "yaw", "v", "yaw_rate")  # what an Odometry message carries, checked against the producer
        return FederateMeta(inputs=(Input("state", fields=fields_of(STATE, read)),
                                    Input("estimate", fields=fields_of(ESTIMATE, read))), period_ns=self.period_ns)

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        from nav_msgs.msg import Odometry

        for robot in robots:
            self._names[robot.id] = robot.name
            self._odom[robot.id] = self._node.create_publisher(Odometry, f"/{robot.name}/odom", self.qos_depth)
            self._truth[robot.id] = self._node.create_publisher(Odometry, f"/{robot.name}/ground_truth",
                                                                self.qos_depth)

    def despawn(self, robot_ids: Sequence[int]) -> None:
        for rid in robot_ids:
            for publishers in (self._odom, self._truth):
                pub = publishers.pop(int(rid), None)
                if pub is not None:
                    self._node.destroy_publisher(pub)
            self._names.pop(int(rid), None)

    def step(self, t_ns: int, inputs: Mapping[str, PortData]) -> Mapping[str, PortData]:
        from builtin_interfaces.msg import Time
        from rosgraph_msgs.msg import Clock

        if not self._waited:
            self._wait_for_subscribers()
        stamp = Time(sec=int(t_ns // NS_PER_S), nanosec=int(t_ns % NS_PER_S))
        self._clock.publish(Clock(clock=stamp))
        for port, publishers, frame in (("estimate", self._odom, "odom"), ("state", self._truth, "map")):
            data = inputs.get(port)
            if data is not None:
                self._publish_odometry(data, publishers, frame, stamp)
        return {}

    def _publish_odometry(self, data: PortData, publishers: Mapping[int, Any], frame: str, stamp: Any) -> None:
        from nav_msgs.msg import Odometry

        ids = np.asarray(data["id"])
        x, y, yaw = (np.asarray(data[k], float) for k in ("x", "y", "yaw"))
        v, yaw_rate = np.asarray(data["v"], float), np.asarray(data["yaw_rate"], float)
        qz, qw = np.sin(0.5 * yaw), np.cos(0.5 * yaw)  # rotation about z by yaw
        for row, rid in enumerate(ids.tolist()):
            pub = publishers.get(rid)
            if pub is None:
                continue
            name = self._names[rid]
            msg = Odometry()
            msg.header.stamp = stamp
            msg.header.frame_id = f"{name}/odom" if frame == "odom" else "map"
            msg.child_frame_id = f"{name}/base_link"
            msg.pose.pose.position.x = float(x[row])
            msg.pose.pose.position.y = float(y[row])
            msg.pose.pose.orientation.z = float(qz[row])
            msg.pose.pose.orientation.w = float(qw[row])
            msg.twist.twist.linear.x = float(v[row])
            msg.twist.twist.angular.z = float(yaw_rate[row])
            pub.publish(msg)

    def _wait_for_subscribers(self) -> None:
        """Until some subscriber is matched and the number of matches has stopped growing for 0.5 s (discovery
        is over), or ``wait_for_subscribers_s``."""
        self._waited = True
        deadline = time.monotonic() + self.wait_for_subscribers_s
        publishers = [self._clock, *self._odom.values(), *self._truth.values()]
        matched, stable_since = 0, time.monotonic()
        while time.monotonic() < deadline:
            now_matched = sum(pub.get_subscription_count() for pub in publishers)
            if now_matched != matched:
                matched, stable_since = now_matched, time.monotonic()
            elif matched > 0 and time.monotonic() - stable_since >= 0.5:
                return
            time.sleep(0.02)

    def finalize(self) -> None:
        if self._context is None:
            return
        import rclpy

        self._node.destroy_node()
        rclpy.shutdown(context=self._context)
        self._context = None
