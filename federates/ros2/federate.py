"""A ROS 2 bridge in both directions: the run on ROS 2 topics (/clock, odometry, range, received CAMs, markers for
RViz), and robots driven by a ROS 2 node over ``/<robot>/cmd_vel``.

Scenario entry (``type: ros2``)::

    federates:
      - name: ros
        type: ros2
        params: {period_s: 0.05, mode: lockstep, domain_id: 7}
    drivers:
      - {federate: ros, robots: [robot1]}

Every ``period_s`` of simulation time the bridge publishes, for every robot, ``/<robot>/odom`` (the ``estimate``),
``/<robot>/ground_truth`` (``state``), ``/<robot>/range`` (sensor_msgs/Range) and ``/<robot>/cam`` (each CAM the
robot received, UPER bytes), one MarkerArray with every robot, and ``/clock`` last. The robots the scenario gives
to this bridge are driven by ``/<robot>/cmd_vel`` (linear.x speed, angular.z yaw rate): in ``mode: free`` the
newest command since the last period, in ``mode: lockstep`` the TwistStamped stamped with the period's time, which
the bridge waits for (reruns are bit-identical). ``docs/bridges.md`` (ROS 2) has topics, units, frames, QoS, the
CAM byte layout and a walk-through; ``federates/ros2/`` holds the parts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.federate import Federate, FederateMeta, Input, PortData, SetupContext
from core.params import parse_params
from core.ports import CAM_RX, ESTIMATE, RANGE, STATE, command_port, fields_of
from core.robots import RobotSpec
from core.timebase import seconds_to_ns

from .inbox import CommandInbox
from .params import NAME_TOKEN, Ros2Params

_CAM_FIELDS = ("receiver", "sender", "generated_ns", "received_ns", "x", "y", "yaw", "v", "a", "yaw_rate")


class Ros2Bridge(Federate):
    """Publishes the run on ROS 2 topics and takes cmd_vel for the robots it drives (see the module docstring)."""

    Params = Ros2Params

    def __init__(self, name: str, period_s: float = 0.02, mode: str = "free", stamped: bool | None = None,
                 lockstep_timeout_s: float = 10.0, domain_id: int | None = None, wait_for_subscribers_s: float = 0.0,
                 node_name: str = "coopsim", qos_depth: int = 100,
                 topics: Sequence[str] = ("odom", "ground_truth", "range", "cam", "markers"),
                 markers_topic: str = "/coopsim/markers", markers_period_s: float = 0.1,
                 marker_height_m: float = 0.0, range_min_m: float = 0.0,
                 range_max_m: float = 50.0, range_fov_rad: float = 1.0, origin_lat_deg: float = 51.4934,
                 origin_lon_deg: float = 7.4136, start_utc_s: float = 1_704_067_200.0, station_type: int = 5) -> None:
        super().__init__(name)
        given = {k: v for k, v in locals().items() if k not in ("self", "name", "__class__")}
        self.params: Ros2Params = parse_params(Ros2Params, given, "ros2 bridge")
        self.period_ns = seconds_to_ns(self.params.period_s)
        self.lockstep = self.params.mode == "lockstep"
        self.inbox = CommandInbox(self.lockstep)
        self._port = command_port(name).name
        self._ros: Any = None
        self._msgs: Any = None
        self._cam: Any = None
        self._clock: Any = None
        self._markers: Any = None  # publisher of the MarkerArray
        self._marker_set: Any = None  # messages.Markers
        self._markers_period_ns = seconds_to_ns(self.params.markers_period_s)
        self._next_markers_ns = 0
        self._pubs: dict[str, dict[int, Any]] = {kind: {} for kind in self.params.topics if kind != "markers"}
        self._out: dict[str, dict[int, Any]] = {"odom": {}, "ground_truth": {}, "range": {}}  # messages, reused
        self._cmd_subs: dict[int, Any] = {}
        self._names: dict[int, str] = {}
        self._dims: dict[int, dict[str, float]] = {}
        self._driven: dict[int, str] = {}  # robot id -> cmd_vel topic, in spawn order
        self._deleted: list[Any] = []  # DELETE markers of robots gone since the last array
        self._discover = True  # before the first step, and after a spawn in lock-step
        self.ignored = 0
        """Free mode: commands of robots that were gone when a step took them."""
        self.published = 0
        """Messages published (all topics)."""

    # -- set-up ------------------------------------------------------------------------------------------------------
    def setup(self, ctx: SetupContext) -> FederateMeta:
        try:
            from . import messages
            from .node import CLOCK_QOS, RosNode, reliable
        except ImportError:
            raise RuntimeError("the ROS 2 bridge needs rclpy and the message packages: pip install "
                               "'coopsim[ros2]'") from None
        from rosgraph_msgs.msg import Clock
        from visualization_msgs.msg import MarkerArray

        self._msgs = messages
        self._ros = RosNode(self.params.node_name, self.params.domain_id)
        self._clock = self._ros.publisher(Clock, "/clock", CLOCK_QOS)
        if "markers" in self.params.topics:
            self._markers = self._ros.publisher(MarkerArray, self.params.markers_topic, reliable(self.params.qos_depth))
            self._marker_set = messages.Markers(self.params.marker_height_m)
        if "cam" in self.params.topics:
            from .cam import CamBytes

            p = self.params
            self._cam = CamBytes(p.origin_lat_deg, p.origin_lon_deg, p.start_utc_s, p.station_type)
        read = ("x", "y", "yaw", "v", "yaw_rate")  # what an Odometry message carries, checked against the producer
        inputs = [Input("state", fields=fields_of(STATE, read)), Input("estimate", fields=fields_of(ESTIMATE, read))]
        if "range" in self.params.topics:
            inputs.append(Input("range", fields=fields_of(RANGE, ("range_m", "target")), optional=True))
        if "cam" in self.params.topics:
            inputs.append(Input("cam_rx", queued=True, fields=fields_of(CAM_RX, _CAM_FIELDS), optional=True))
        return FederateMeta(inputs=tuple(inputs), outputs=(command_port(self.name),), period_ns=self.period_ns)

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        from geometry_msgs.msg import Twist, TwistStamped
        from nav_msgs.msg import Odometry
        from sensor_msgs.msg import Range
        from std_msgs.msg import UInt8MultiArray

        from .node import SENSOR_QOS, reliable

        depth = self.params.qos_depth
        kinds = {"odom": (Odometry, reliable(depth)), "ground_truth": (Odometry, reliable(depth)),
                 "range": (Range, SENSOR_QOS), "cam": (UInt8MultiArray, reliable(depth))}
        for robot in robots:
            if not NAME_TOKEN.match(robot.name):
                raise ValueError(f"robot '{robot.name}': not a valid ROS name token, so no topic /{robot.name}/... "
                                 "can exist; rename it (letters, digits, '_', not starting with a digit)")
            self._names[robot.id] = robot.name
            self._dims[robot.id] = robot.dims.plain()
            for kind, pubs in self._pubs.items():
                msg_type, qos = kinds[kind]
                pubs[robot.id] = self._ros.publisher(msg_type, f"/{robot.name}/{kind}", qos)
            m, p = self._msgs, self.params
            self._out["odom"][robot.id] = m.new_odometry(f"{robot.name}/odom", f"{robot.name}/base_link")
            self._out["ground_truth"][robot.id] = m.new_odometry("map", f"{robot.name}/base_link")
            self._out["range"][robot.id] = m.new_range(f"{robot.name}/range_sensor", p.range_fov_rad, p.range_min_m,
                                                       p.range_max_m)
            driven = robot.driven_by(self.name)
            sized = {"length_m", "width_m", "rear_overhang_m"} <= self._dims[robot.id].keys()
            if self._marker_set is not None and sized:
                self._marker_set.add(robot.id, robot.name, self._dims[robot.id], driven)
            if driven:
                topic = f"/{robot.name}/cmd_vel"
                self._driven[robot.id] = topic
                stamped = self.params.cmd_stamped
                self._cmd_subs[robot.id] = self._ros.subscription(
                    TwistStamped if stamped else Twist, topic, self._on_command(robot.id, stamped), reliable(depth))
                self._discover = self._discover or self.lockstep

    def despawn(self, robot_ids: Sequence[int]) -> None:
        for rid in map(int, robot_ids):
            for pubs in self._pubs.values():
                pub = pubs.pop(rid, None)
                if pub is not None:
                    self._ros.destroy(pub)
            sub = self._cmd_subs.pop(rid, None)
            if sub is not None:
                self._ros.destroy(sub)
            self._driven.pop(rid, None)
            self._names.pop(rid, None)
            self._dims.pop(rid, None)
            for msgs in self._out.values():
                msgs.pop(rid, None)
            if self._marker_set is not None:
                self._deleted += self._marker_set.remove(rid)

    def _on_command(self, robot: int, stamped: bool) -> Any:
        def on(msg: Any) -> None:  # runs in the node's executor thread
            twist = msg.twist if stamped else msg
            stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec if stamped else None
            self.inbox.offer(robot, stamp if self.lockstep else None, twist.linear.x, twist.angular.z)
        return on

    # -- stepping ----------------------------------------------------------------------------------------------------
    def step(self, t_ns: int, inputs: Mapping[str, PortData]) -> Mapping[str, PortData]:
        if self._discover:
            self._wait_discovery()
        if self.lockstep:
            self.inbox.open_period(t_ns)  # before publishing: a fast answer must find the period open
        self._publish(t_ns, inputs)
        if self.lockstep:
            commands = self.inbox.wait_period(self._driven, self.params.lockstep_timeout_s, self._driven)
        else:
            commands = self.inbox.take_free()
            gone = [r for r in commands if r not in self._driven]
            self.ignored += len(gone)
        rows = [r for r in self._driven if r in commands]  # spawn order: the same table on every rerun
        speed = np.array([commands[r].speed for r in rows], np.float64)
        yaw_rate = np.array([commands[r].yaw_rate for r in rows], np.float64)
        nan = np.full(len(rows), np.nan)
        return {self._port: {"robot": np.asarray(rows, np.int64), "speed": speed, "accel": nan,
                             "steer": nan.copy(), "yaw_rate": yaw_rate}}

    def _wait_discovery(self) -> None:
        first = not hasattr(self, "_discovered")
        self._discover, self._discovered = False, True
        publishers = [self._clock, *(p for pubs in self._pubs.values() for p in pubs.values())]
        if self._markers is not None:
            publishers.append(self._markers)
        subscriptions = list(self._cmd_subs.values())
        if self.lockstep and subscriptions:
            lonely = self._ros.wait_discovery(publishers, subscriptions, self.params.discovery_timeout_s, True)
            if lonely:
                topics = sorted(self._driven[r] for r, s in self._cmd_subs.items() if s in lonely)
                raise RuntimeError(f"lock-step: no publisher on {', '.join(topics)} within discovery_timeout_s = "
                                   f"{self.params.discovery_timeout_s:g} s (is the node running, in ROS_DOMAIN_ID "
                                   f"{self.params.domain_id if self.params.domain_id is not None else 'default'}?)")
        elif first and self.params.wait_for_subscribers_s > 0:
            self._ros.wait_discovery(publishers, subscriptions, self.params.wait_for_subscribers_s, False)

    def _publish(self, t_ns: int, inputs: Mapping[str, PortData]) -> None:
        m = self._msgs
        stamp = m.stamp_of(t_ns)
        n = 0
        if "range" in self._pubs and inputs.get("range") is not None:
            n += self._publish_range(stamp, inputs["range"])
        if "cam" in self._pubs and inputs.get("cam_rx"):
            n += self._publish_cams(inputs["cam_rx"])
        for kind, port in (("odom", "estimate"), ("ground_truth", "state")):
            data = inputs.get(port)
            if kind in self._pubs and data is not None:
                n += self._publish_odometry(stamp, data, self._pubs[kind], self._out[kind])
        if self._markers is not None and inputs.get("state") is not None and t_ns >= self._next_markers_ns:
            self._markers.publish(self._marker_set.array(stamp, inputs["state"], self._deleted))
            self._deleted = []
            self._next_markers_ns = (t_ns // self._markers_period_ns + 1) * self._markers_period_ns
            n += 1
        self._clock.publish(m.clock(t_ns))  # last: everything about t has been sent
        self.published += n + 1

    def _publish_odometry(self, stamp: Any, data: PortData, pubs: Mapping[int, Any], msgs: Mapping[int, Any]) -> int:
        ids = np.asarray(data["id"]).tolist()
        x, y, yaw, v, w = (np.asarray(data[k], np.float64).tolist() for k in ("x", "y", "yaw", "v", "yaw_rate"))
        fill, n = self._msgs.fill_odometry, 0
        for row, rid in enumerate(ids):
            pub = pubs.get(rid)
            if pub is not None:
                pub.publish(fill(msgs[rid], stamp, x[row], y[row], yaw[row], v[row], w[row]))
                n += 1
        return n

    def _publish_range(self, stamp: Any, data: PortData) -> int:
        p, pubs = self.params, self._pubs["range"]
        ids = np.asarray(data["id"]).tolist()
        rng = np.asarray(data["range_m"], np.float64).tolist()
        target = np.asarray(data["target"], np.int64).tolist()
        n = 0
        for row, rid in enumerate(ids):
            pub = pubs.get(rid)
            if pub is not None:
                msg = self._out["range"][rid]
                msg.header.stamp = stamp
                msg.range = self._msgs.range_value(rng[row], target[row], p.range_min_m, p.range_max_m)
                pub.publish(msg)
                n += 1
        return n

    def _publish_cams(self, tables: Sequence[PortData]) -> int:
        from .cam import PREFIX

        pubs, n = self._pubs["cam"], 0
        for table in tables:
            receivers = np.asarray(table["receiver"], np.int64)
            keep = np.flatnonzero(np.isin(receivers, list(pubs)))
            if len(keep) == 0:
                continue
            rows = {k: np.asarray(table[k])[keep] for k in _CAM_FIELDS}
            for i, frame in enumerate(self._cam.encode(rows)):
                if frame is not None:
                    sender = int(rows["sender"][i])
                    name = self._names.get(sender, str(sender))
                    pubs[int(rows["receiver"][i])].publish(self._msgs.cam_msg(frame, name, PREFIX.size))
                    n += 1
        return n

    # -- end ---------------------------------------------------------------------------------------------------------
    def run_summary(self) -> dict[str, Any]:
        """Counts for ``run.json``: commands taken, dropped by reason, lock-step waits and round trips."""
        inbox = self.inbox
        out: dict[str, Any] = {"mode": self.params.mode, "commands": inbox.received,
                               "malformed": dict(sorted(inbox.malformed.items())), "ignored": self.ignored,
                               "published": self.published}
        if self.lockstep:
            trips = np.asarray(inbox.round_trips_s)
            out["lockstep"] = {"periods": len(trips), "waits": inbox.waits, "wait_s": round(inbox.wait_s, 6),
                               "round_trip_p50_s": float(np.percentile(trips, 50)) if len(trips) else None,
                               "round_trip_p99_s": float(np.percentile(trips, 99)) if len(trips) else None}
        else:
            out["superseded"] = inbox.superseded
        if self._cam is not None and self._cam.skipped:
            out["cam_skipped"] = self._cam.skipped
        return out

    def finalize(self) -> None:
        if self._ros is not None:
            self._ros.close()
            self._ros = None

