"""ROS 2 messages from port rows: Odometry, Range, MarkerArray, the CAM frames and /clock (imports the message
packages: load this module only once rclpy is known to be there).

Frames after REP-103 and REP-105: x east, y north, z up in ``map``; a robot's pose at its rear-axle reference point;
twists in the child frame (linear.x the speed, angular.z the yaw rate, counter-clockwise positive).
"""

from __future__ import annotations

import array
import math
from collections.abc import Mapping

import numpy as np
from builtin_interfaces.msg import Time
from nav_msgs.msg import Odometry
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Range
from std_msgs.msg import MultiArrayDimension, UInt8MultiArray
from visualization_msgs.msg import Marker, MarkerArray

from core.timebase import NS_PER_S

DRIVEN_RGBA = (1.0, 0.55, 0.0, 0.9)  # robots this bridge drives: orange
OTHER_RGBA = (0.2, 0.45, 0.9, 0.9)  # the rest: blue


def stamp_of(t_ns: int) -> Time:
    """builtin_interfaces/Time of a simulation time in ns."""
    return Time(sec=int(t_ns // NS_PER_S), nanosec=int(t_ns % NS_PER_S))


def clock(t_ns: int) -> Clock:
    """rosgraph_msgs/Clock at ``t_ns``."""
    return Clock(clock=stamp_of(t_ns))


def new_odometry(frame: str, child: str) -> Odometry:
    """A nav_msgs/Odometry with its frames set, to be filled by ``fill_odometry`` every period (building a message
    costs more than publishing it)."""
    msg = Odometry()
    msg.header.frame_id = frame
    msg.child_frame_id = child
    return msg


def fill_odometry(msg: Odometry, stamp: Time, x: float, y: float, yaw: float, v: float, yaw_rate: float) -> Odometry:
    """Pose in the header's frame, twist in the child frame (speed on x, yaw rate about z)."""
    msg.header.stamp = stamp
    pose = msg.pose.pose
    pose.position.x = x
    pose.position.y = y
    pose.orientation.z = math.sin(0.5 * yaw)  # rotation about z by yaw
    pose.orientation.w = math.cos(0.5 * yaw)
    msg.twist.twist.linear.x = v
    msg.twist.twist.angular.z = yaw_rate
    return msg


def range_value(range_m: float, target: int, min_m: float, max_m: float) -> float:
    """REP-117: +inf when nothing is in range (no target, NaN or beyond max), -inf when closer than min."""
    if target < 0 or not math.isfinite(range_m) or range_m > max_m:
        return math.inf
    if range_m < min_m:
        return -math.inf
    return range_m


def new_range(frame: str, fov_rad: float, min_m: float, max_m: float) -> Range:
    """sensor_msgs/Range of the forward sensor (infrared: a narrow beam along the body's x axis); set ``header.stamp``
    and ``range`` every period."""
    msg = Range()
    msg.header.frame_id = frame
    msg.radiation_type = Range.INFRARED
    msg.field_of_view = float(fov_rad)
    msg.min_range = float(min_m)
    msg.max_range = float(max_m)
    return msg


def cam_msg(frame: bytes, sender_name: str, offset: int) -> UInt8MultiArray:
    """std_msgs/UInt8MultiArray of one CAM frame (``federates.ros2.cam`` has the layout)."""
    msg = UInt8MultiArray()
    size = len(frame) - offset
    msg.layout.dim = [MultiArrayDimension(label=sender_name, size=size, stride=size)]
    msg.layout.data_offset = offset
    msg.data = array.array("B", frame)
    return msg


class Markers:
    """The MarkerArray of every robot: a box at its body (sized from its dims) and its name above it, in ``map``;
    each robot's two markers are built once and moved every period."""

    def __init__(self, height_m: float) -> None:
        self.height_m = height_m
        self._own: dict[int, tuple[Marker, Marker, float]] = {}  # robot -> box, text, rear axle -> body centre [m]

    def add(self, rid: int, name: str, dims: Mapping[str, float], driven: bool) -> None:
        """A robot's markers (its dims: length_m, width_m, rear_overhang_m)."""
        length, width = float(dims["length_m"]), float(dims["width_m"])
        height = self.height_m if self.height_m > 0 else min(width, 1.5)
        box = _marker("robots", rid, Marker.CUBE, DRIVEN_RGBA if driven else OTHER_RGBA)
        box.scale.x, box.scale.y, box.scale.z = length, width, height
        box.pose.position.z = 0.5 * height
        text = _marker("names", rid, Marker.TEXT_VIEW_FACING, (1.0, 1.0, 1.0, 1.0))
        text.pose.position.z = 1.6 * height
        text.pose.orientation.w = 1.0
        text.scale.z = max(0.1, 0.6 * width)  # text height [m]
        text.text = name
        self._own[rid] = (box, text, 0.5 * length - float(dims["rear_overhang_m"]))

    def remove(self, rid: int) -> list[Marker]:
        """DELETE markers of a robot that is gone (to send with the next array)."""
        if self._own.pop(rid, None) is None:
            return []
        out = []
        for ns in ("robots", "names"):
            marker = _marker(ns, rid, Marker.CUBE, (0.0, 0.0, 0.0, 0.0))
            marker.action = Marker.DELETE
            out.append(marker)
        return out

    def array(self, stamp: Time, state: Mapping[str, np.ndarray], extra: list[Marker]) -> MarkerArray:
        """The array at ``stamp`` from the ``state`` rows (rear-axle poses), with ``extra`` (DELETEs) appended."""
        out = MarkerArray()
        ids = np.asarray(state["id"]).tolist()
        x, y, yaw = (np.asarray(state[k], np.float64).tolist() for k in ("x", "y", "yaw"))
        for row, rid in enumerate(ids):
            own = self._own.get(rid)
            if own is None:
                continue
            box, text, ahead = own
            c, s = math.cos(yaw[row]), math.sin(yaw[row])
            box.header.stamp = text.header.stamp = stamp
            box.pose.position.x = text.pose.position.x = x[row] + ahead * c
            box.pose.position.y = text.pose.position.y = y[row] + ahead * s
            box.pose.orientation.z, box.pose.orientation.w = math.sin(0.5 * yaw[row]), math.cos(0.5 * yaw[row])
            out.markers.extend((box, text))
        for marker in extra:
            marker.header.stamp = stamp
        out.markers.extend(extra)
        return out


def _marker(ns: str, rid: int, kind: int, rgba: tuple[float, float, float, float]) -> Marker:
    marker = Marker()
    marker.header.frame_id = "map"
    marker.ns = ns
    marker.id = int(rid) % 2**31  # Marker.id is int32
    marker.type = kind
    marker.action = Marker.ADD
    marker.color.r, marker.color.g, marker.color.b, marker.color.a = rgba
    return marker
