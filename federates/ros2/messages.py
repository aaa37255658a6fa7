"""ROS 2 messages from port rows: Odometry, Range, MarkerArray, the CAM frames and /clock (imports the message
packages: load this module only once rclpy is known to be there).

Frames after REP-103 and REP-105: x east, y north, z up in ``map``; a robot's pose at its rear-axle reference point;
twists in the child frame (linear.x the speed, angular.z the yaw rate, counter-clockwise positive).
"""

from __future__ import annotations

import array
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from nav_msgs.msg import Odometry
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Range
from std_msgs.msg import MultiArrayDimension, UInt8MultiArray
from visualization_msgs.msg import Marker, MarkerArray

from orchestrator.core.timebase import NS_PER_S

DRIVEN_RGBA = (1.0, 0.55, 0.0, 0.9)  # robots this bridge drives: orange
OTHER_RGBA = (0.2, 0.45, 0.9, 0.9)  # the rest: blue


def stamp_of(t_ns: int) -> Time:
    """builtin_interfaces/Time of a simulation time in ns."""
    return Time(sec=int(t_ns // NS_PER_S), nanosec=int(t_ns % NS_PER_S))


def clock(t_ns: int) -> Clock:
    """rosgraph_msgs/Clock at ``t_ns``."""
    return Clock(clock=stamp_of(t_ns))


def odometry(stamp: Time, frame: str, child: str, x: float, y: float, yaw: float, v: float,
             yaw_rate: float) -> Odometry:
    """nav_msgs/Odometry: pose in ``frame``, twist in ``child`` (speed on x, yaw rate about z)."""
    msg = Odometry()
    msg.header.stamp = stamp
    msg.header.frame_id = frame
    msg.child_frame_id = child
    msg.pose.pose.position.x = x
    msg.pose.pose.position.y = y
    msg.pose.pose.orientation.z = math.sin(0.5 * yaw)  # rotation about z by yaw
    msg.pose.pose.orientation.w = math.cos(0.5 * yaw)
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


def range_msg(stamp: Time, frame: str, value: float, fov_rad: float, min_m: float, max_m: float) -> Range:
    """sensor_msgs/Range of the forward sensor (infrared: a narrow beam along the body's x axis)."""
    msg = Range()
    msg.header.stamp = stamp
    msg.header.frame_id = frame
    msg.radiation_type = Range.INFRARED
    msg.field_of_view = float(fov_rad)
    msg.min_range = float(min_m)
    msg.max_range = float(max_m)
    msg.range = float(value)
    return msg


def cam_msg(frame: bytes, sender_name: str, offset: int) -> UInt8MultiArray:
    """std_msgs/UInt8MultiArray of one CAM frame (``federates.ros2.cam`` has the layout)."""
    msg = UInt8MultiArray()
    size = len(frame) - offset
    msg.layout.dim = [MultiArrayDimension(label=sender_name, size=size, stride=size)]
    msg.layout.data_offset = offset
    msg.data = array.array("B", frame)
    return msg


def markers(stamp: Time, state: Mapping[str, np.ndarray], names: Mapping[int, str],
            dims: Mapping[int, Mapping[str, float]], driven: Mapping[int, Any], gone: list[int],
            height_m: float) -> MarkerArray:
    """A box per robot at its body (sized from its dims) and its name above it, in ``map``; DELETEs of the robots
    in ``gone``."""
    out = MarkerArray()
    ids = np.asarray(state["id"]).tolist()
    x, y, yaw = (np.asarray(state[k], np.float64).tolist() for k in ("x", "y", "yaw"))
    for row, rid in enumerate(ids):
        name = names.get(rid)
        if name is None:
            continue
        d = dims[rid]
        length, width = float(d["length_m"]), float(d["width_m"])
        height = height_m if height_m > 0 else min(width, 1.5)
        ahead = 0.5 * length - float(d["rear_overhang_m"])  # rear axle -> body centre, along the heading
        c, s = math.cos(yaw[row]), math.sin(yaw[row])
        box = _marker(stamp, "robots", rid, Marker.CUBE, DRIVEN_RGBA if rid in driven else OTHER_RGBA)
        box.pose.position.x, box.pose.position.y = x[row] + ahead * c, y[row] + ahead * s
        box.pose.position.z = 0.5 * height
        box.pose.orientation.z, box.pose.orientation.w = math.sin(0.5 * yaw[row]), math.cos(0.5 * yaw[row])
        box.scale.x, box.scale.y, box.scale.z = length, width, height
        text = _marker(stamp, "names", rid, Marker.TEXT_VIEW_FACING, (1.0, 1.0, 1.0, 1.0))
        text.pose.position.x, text.pose.position.y = box.pose.position.x, box.pose.position.y
        text.pose.position.z = 1.6 * height
        text.pose.orientation.w = 1.0
        text.scale.z = max(0.1, 0.6 * width)  # text height [m]
        text.text = name
        out.markers.extend((box, text))
    for rid in gone:
        for ns in ("robots", "names"):
            marker = _marker(stamp, ns, rid, Marker.CUBE, (0.0, 0.0, 0.0, 0.0))
            marker.action = Marker.DELETE
            out.markers.append(marker)
    return out


def _marker(stamp: Time, ns: str, rid: int, kind: int, rgba: tuple[float, float, float, float]) -> Marker:
    marker = Marker()
    marker.header.stamp = stamp
    marker.header.frame_id = "map"
    marker.ns = ns
    marker.id = int(rid) % 2**31  # Marker.id is int32
    marker.type = kind
    marker.action = Marker.ADD
    marker.color.r, marker.color.g, marker.color.b, marker.color.a = rgba
    return marker
