"""An in-process double of rclpy and the message packages, for the ROS 2 bridge.

The bridge and its node layer (``federates.ros2.node``, ``messages``) run unchanged, imported against these
modules: a publication reaches the subscriptions of its topic in the publishing thread, and a driver node answers
each ``/clock`` with a command on every ``/<robot>/cmd_vel`` the bridge subscribed to (stamped with the clock when
the bridge takes TwistStamped). ``tests/orchestrator/test_ros2_bridge.py`` runs the bridge with ROS 2.
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable
from typing import Any

from .module_swap import swapped

SPEED_MPS, YAW_RATE_RADPS = 1.0, 0.1
"""What the driver node commands every robot, every period."""


class Message:
    """A ROS message: fields given as keywords; a field never set is a nested message, made on first use (as
    ``msg.header.stamp`` of a generated class)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        nested = Message()
        setattr(self, name, nested)
        return nested


def _message_type(name: str, lists: tuple[str, ...] = (), **constants: int) -> type[Message]:
    """A message class; ``lists``: fields that start as empty sequences (``MarkerArray.markers``)."""

    def init(self: Message, **fields: Any) -> None:
        Message.__init__(self, **{**{f: [] for f in lists}, **fields})

    return type(name, (Message,), {"__init__": init, **constants})


class Graph:
    """Publishers and subscriptions by topic, and the driver node's answers to ``/clock``."""

    def __init__(self) -> None:
        self.subscriptions: dict[str, list[Subscription]] = {}
        self.published: dict[str, int] = {}

    def route(self, topic: str, msg: Any) -> None:
        self.published[topic] = self.published.get(topic, 0) + 1
        for sub in list(self.subscriptions.get(topic, ())):
            sub.callback(msg)
        if topic == "/clock":
            self._drive(msg.clock)

    def _drive(self, stamp: Any) -> None:
        for topic, subs in list(self.subscriptions.items()):
            if not topic.endswith("/cmd_vel"):
                continue
            for sub in subs:
                msg = sub.msg_type()
                twist = msg.twist if hasattr(type(msg), "STAMPED") else msg
                if twist is not msg:
                    msg.header.stamp = stamp
                twist.linear.x, twist.angular.z = SPEED_MPS, YAW_RATE_RADPS
                sub.callback(msg)


class Publisher:
    def __init__(self, graph: Graph, topic: str) -> None:
        self.graph, self.topic = graph, topic

    def publish(self, msg: Any) -> None:
        self.graph.route(self.topic, msg)

    def get_subscription_count(self) -> int:
        return len(self.graph.subscriptions.get(self.topic, ())) + (self.topic == "/clock")  # the driver node


class Subscription:
    def __init__(self, graph: Graph, msg_type: Any, topic: str, callback: Callable[[Any], None]) -> None:
        self.graph, self.msg_type, self.topic, self.callback = graph, msg_type, topic, callback
        graph.subscriptions.setdefault(topic, []).append(self)

    def get_publisher_count(self) -> int:
        return 1 if self.topic.endswith("/cmd_vel") else 0  # the driver node


class Node:
    """The calls ``RosNode`` makes on an rclpy node."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph

    def create_publisher(self, msg_type: Any, topic: str, qos: Any) -> Publisher:
        return Publisher(self.graph, topic)

    def create_subscription(self, msg_type: Any, topic: str, callback: Callable[[Any], None], qos: Any) -> Any:
        return Subscription(self.graph, msg_type, topic, callback)

    def destroy_publisher(self, pub: Publisher) -> None:
        return None

    def destroy_subscription(self, sub: Subscription) -> None:
        self.graph.subscriptions.get(sub.topic, []).remove(sub)

    def destroy_node(self) -> None:
        return None


class Context:
    def __init__(self) -> None:
        self.up = False

    def ok(self) -> bool:
        return self.up


class Executor:
    """Nothing to run: callbacks are called as messages are published."""

    def __init__(self, context: Context | None = None) -> None:
        self.context = context

    def add_node(self, node: Node) -> None:
        return None

    def spin_once(self, timeout_sec: float = 0.0) -> None:
        time.sleep(timeout_sec)

    def shutdown(self, timeout_sec: float = 0.0) -> None:
        return None


def _module(name: str, **attributes: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    return module


def fake_ros(graph: Graph) -> dict[str, types.ModuleType]:
    """rclpy (its context, executors and qos modules) and the message packages the bridge imports."""

    def init(context: Context, domain_id: int | None = None) -> None:
        context.up = True

    def shutdown(context: Context) -> None:
        context.up = False

    qos = _module("rclpy.qos", QoSProfile=lambda **kw: types.SimpleNamespace(**kw),
                  ReliabilityPolicy=types.SimpleNamespace(BEST_EFFORT=2, RELIABLE=1),
                  qos_profile_sensor_data=types.SimpleNamespace(depth=5, reliability=2))
    modules = {
        "rclpy": _module("rclpy", init=init, shutdown=shutdown, create_node=lambda name, context: Node(graph)),
        "rclpy.context": _module("rclpy.context", Context=Context),
        "rclpy.executors": _module("rclpy.executors", SingleThreadedExecutor=Executor),
        "rclpy.qos": qos,
    }
    messages = {
        "builtin_interfaces": {"Time": _message_type("Time")},
        "nav_msgs": {"Odometry": _message_type("Odometry")},
        "rosgraph_msgs": {"Clock": _message_type("Clock")},
        "sensor_msgs": {"Range": _message_type("Range", INFRARED=1)},
        "std_msgs": {"MultiArrayDimension": _message_type("MultiArrayDimension"),
                     "UInt8MultiArray": _message_type("UInt8MultiArray")},
        "visualization_msgs": {"Marker": _message_type("Marker", CUBE=1, TEXT_VIEW_FACING=9, ADD=0, DELETE=2),
                               "MarkerArray": _message_type("MarkerArray", lists=("markers",))},
        "geometry_msgs": {"Twist": _message_type("Twist"), "TwistStamped": _message_type("TwistStamped", STAMPED=1)},
    }
    for package, types_ in messages.items():
        msg = _module(f"{package}.msg", **types_)
        modules[package], modules[f"{package}.msg"] = _module(package, msg=msg), msg
    return modules


def ros2_bridge(name: str) -> Any:
    """A ROS 2 bridge (free mode, every topic) on the in-process graph, driven by the driver node."""
    from federates.ros2.federate import Ros2Bridge

    graph = Graph()
    modules = fake_ros(graph)
    bound = ("federates.ros2.node", "federates.ros2.messages")

    class DoubledRos2Bridge(Ros2Bridge):
        def setup(self, ctx: Any) -> Any:
            with swapped(modules, bound):
                return super().setup(ctx)

        def spawn(self, robots: Any) -> None:
            with swapped(modules, bound):
                super().spawn(robots)

    bridge = DoubledRos2Bridge(name, period_s=0.01)
    bridge.graph = graph  # type: ignore[attr-defined]
    return bridge
