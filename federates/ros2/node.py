"""The bridge's ROS 2 node: its own rclpy context (own domain id), an executor on a thread of its own that runs the
cmd_vel callbacks, the QoS profiles and the discovery waits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

CLOCK_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
"""/clock: what rclpy's time source subscribes with (use_sim_time), as rclcpp's ClockQoS."""
SENSOR_QOS = qos_profile_sensor_data
"""Sensor data (range): best effort, keep last 5."""

SETTLE_S = 0.5
"""Discovery is taken as over when the matched counts have not changed for this long."""


def reliable(depth: int) -> QoSProfile:
    """Reliable, volatile, keep last ``depth``: odometry, CAMs, markers, commands."""
    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)


class RosNode:
    """One node in its own context; ``close`` ends the executor thread and the context."""

    def __init__(self, name: str, domain_id: int | None) -> None:
        self.context = Context()
        kwargs = {} if domain_id is None else {"domain_id": int(domain_id)}
        rclpy.init(context=self.context, **kwargs)
        self.node = rclpy.create_node(name, context=self.context)
        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name=f"ros2-{name}", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            try:
                self._executor.spin_once(timeout_sec=0.05)
            except Exception:  # the context went down under the executor: the bridge is closing
                if not self.context.ok():
                    return
                raise

    def publisher(self, msg_type: Any, topic: str, qos: QoSProfile) -> Any:
        return self.node.create_publisher(msg_type, topic, qos)

    def subscription(self, msg_type: Any, topic: str, callback: Callable[[Any], None], qos: QoSProfile) -> Any:
        return self.node.create_subscription(msg_type, topic, callback, qos)

    def destroy(self, entity: Any) -> None:
        """A publisher or subscription that is no longer needed."""
        if hasattr(entity, "get_subscription_count"):
            self.node.destroy_publisher(entity)
        else:
            self.node.destroy_subscription(entity)

    def wait_discovery(self, publishers: Sequence[Any], subscriptions: Sequence[Any], timeout_s: float,
                       need_publishers: bool) -> list[Any]:
        """Wait until discovery is over: some match exists (with ``need_publishers``: every subscription has a
        publisher) and the matched counts have been stable for ``SETTLE_S``; at most ``timeout_s``. Returns the
        subscriptions still without a publisher."""
        deadline = time.monotonic() + timeout_s
        last, stable_since = -1, time.monotonic()
        while True:
            lonely = [s for s in subscriptions if s.get_publisher_count() == 0]
            counts = sum(p.get_subscription_count() for p in publishers) + sum(
                s.get_publisher_count() for s in subscriptions)
            now = time.monotonic()
            if counts != last:
                last, stable_since = counts, now
            ready = (not lonely) if need_publishers else counts > 0
            if ready and now - stable_since >= SETTLE_S:
                return lonely
            if now >= deadline:
                return lonely
            time.sleep(0.02)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._executor.shutdown(timeout_sec=1)
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)
