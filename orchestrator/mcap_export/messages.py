"""One message of ``run.mcap`` (a plain dict, JSON-ready) from the values of one trace row.

Frames follow REP-105 per robot: ``map`` -> ``<robot>/odom`` -> ``<robot>/base_link``. ``base_link`` sits at the
rear-axle reference point of the trace (x forward, y left, z up, REP-103); ``odom -> base_link`` is the robot's own
estimate (``est_x``, ``est_y``, ``est_yaw``) and ``map -> odom`` is what corrects it to the ground truth, so
``base_link`` ends up at the true pose in ``map``, as a localisation stack would place it.

JSON has no NaN, and each schema field has one type (``number``), so a field whose value is NaN (no range target, no
``u_des``) is left out of the message rather than written as ``null``: plots show a gap there.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

NS_PER_S = 1_000_000_000
MAP_FRAME = "map"

PLATOON_RGB = ((0.122, 0.467, 0.706), (1.0, 0.498, 0.055), (0.173, 0.627, 0.173), (0.839, 0.153, 0.157),
               (0.580, 0.404, 0.741), (0.549, 0.337, 0.294), (0.890, 0.467, 0.761), (0.498, 0.498, 0.498),
               (0.737, 0.741, 0.133), (0.090, 0.745, 0.812))
"""Box colours by platoon index (cycled): the ten colours of matplotlib's ``tab10`` cycle, as the plots use."""
LABEL_RGBA = {"r": 1.0, "g": 1.0, "b": 1.0, "a": 1.0}
LABEL_FONT_PX = 14.0
MAX_BOX_HEIGHT_M = 1.5


def odom_frame(robot: str) -> str:
    """The robot's odometry frame."""
    return f"{robot}/odom"


def base_frame(robot: str) -> str:
    """The robot's body frame (rear-axle reference point)."""
    return f"{robot}/base_link"


@functools.lru_cache(maxsize=1024)
def stamp(t_ns: int) -> dict[str, int]:
    """A Foxglove time from integer nanoseconds (sec, nsec; never a float). Cached: every message of an instant
    shares it, and messages are only ever serialised, never changed."""
    sec, nsec = divmod(int(t_ns), NS_PER_S)
    return {"sec": sec, "nsec": nsec}


def finite(pairs: Iterable[tuple[str, float]]) -> dict[str, float]:
    """The (name, value) pairs whose value is finite, as a dict in the given order (the others are left out)."""
    return {name: value for name, value in pairs if math.isfinite(value)}


def vec3(x: float, y: float, z: float = 0.0) -> dict[str, float]:
    """A Vector3 (a NaN component is left out)."""
    return finite((("x", x), ("y", y), ("z", z)))


def yaw_quaternion(yaw: float) -> dict[str, float]:
    """The rotation by ``yaw`` [rad] about z (counter-clockwise, REP-103)."""
    return finite((("x", 0.0), ("y", 0.0), ("z", math.sin(0.5 * yaw)), ("w", math.cos(0.5 * yaw))))


def pose(x: float, y: float, yaw: float, z: float = 0.0) -> dict[str, Any]:
    """A planar pose as a Foxglove Pose."""
    return {"position": vec3(x, y, z), "orientation": yaw_quaternion(yaw)}


def pose_in_frame(t_ns: int, x: float, y: float, yaw: float) -> dict[str, Any]:
    """``foxglove.PoseInFrame`` of the true pose in ``map``."""
    return {"timestamp": stamp(t_ns), "frame_id": MAP_FRAME, "pose": pose(x, y, yaw)}


def map_to_odom(truth: Sequence[float], estimate: Sequence[float]) -> tuple[float, float, float]:
    """(x, y, yaw) of ``map -> odom`` such that composing it with ``odom -> base_link`` = ``estimate`` gives
    ``truth``: T_mo = T_mb * inverse(T_ob) in SE(2)."""
    x, y, yaw = truth
    ex, ey, eyaw = estimate
    dyaw = yaw - eyaw
    c, s = math.cos(dyaw), math.sin(dyaw)
    return x - (c * ex - s * ey), y - (s * ex + c * ey), dyaw


def _transform(t_ns: int, parent: str, child: str, x: float, y: float, yaw: float) -> dict[str, Any]:
    return {"timestamp": stamp(t_ns), "parent_frame_id": parent, "child_frame_id": child,
            "translation": vec3(x, y), "rotation": yaw_quaternion(yaw)}


def transforms(t_ns: int, robots: Sequence[tuple[str, Sequence[float], Sequence[float]]]) -> dict[str, Any]:
    """``foxglove.FrameTransforms`` of one instant: for each (name, truth, estimate) ``map -> <robot>/odom`` and
    ``<robot>/odom -> <robot>/base_link``. A robot without a finite estimate gets ``odom = map`` and its true pose
    as ``odom -> base_link``, so its body is still drawn where it is."""
    out = []
    for name, truth, estimate in robots:
        if all(math.isfinite(v) for v in estimate):
            mo, ob = map_to_odom(truth, estimate), estimate
        else:
            mo, ob = (0.0, 0.0, 0.0), truth
        out.append(_transform(t_ns, MAP_FRAME, odom_frame(name), *mo))
        out.append(_transform(t_ns, odom_frame(name), base_frame(name), *ob))
    return {"transforms": out}


def odometry(t_ns: int, robot: str, est_x: float, est_y: float, est_yaw: float, est_v: float,
             yaw_rate: float) -> dict[str, Any]:
    """``coopsim.Odometry``: the estimated pose in ``<robot>/odom``, the twist in ``<robot>/base_link``."""
    return {"timestamp": stamp(t_ns), "frame_id": odom_frame(robot), "child_frame_id": base_frame(robot),
            "pose": pose(est_x, est_y, est_yaw),
            "twist": {"linear": vec3(est_v, 0.0), "angular": vec3(0.0, 0.0, yaw_rate)}}


def range_reading(t_ns: int, robot: str, range_m: float, range_rate_mps: float, bearing_rad: float, target_id: int,
                  names: Mapping[int, str]) -> dict[str, Any]:
    """``coopsim.Range`` of one sample (no target: no range, rate or bearing; id -1, empty name)."""
    return {"timestamp": stamp(t_ns), "frame_id": base_frame(robot),
            **finite((("range_m", range_m), ("range_rate_mps", range_rate_mps), ("bearing_rad", bearing_rad))),
            "target_id": int(target_id), "target": names.get(int(target_id), "")}


DECODED_FIELDS = ("x", "y", "yaw", "v", "a", "yaw_rate", "u_des", "platoon_id", "platoon_index", "maneuver",
                  "maneuver_peer")
"""Fields of ``cam_rx`` copied into a reception's ``decoded`` (the platoon fields only exist in runs with maneuvers;
a field a run does not have, or that is NaN, is left out)."""


def reception(t_ns: int, sender: int, receiver: int, generated_ns: int, received_ns: int,
              decoded: Mapping[str, float] | None, names: Mapping[int, str]) -> dict[str, Any]:
    """``coopsim.V2xReception`` of one received message (``decoded``: None without ``cam_rx``, and the message
    then has no ``decoded``)."""
    out = {"timestamp": stamp(t_ns), "sender": names.get(int(sender), str(sender)), "sender_id": int(sender),
            "receiver": names.get(int(receiver), str(receiver)), "receiver_id": int(receiver),
            "generated": stamp(generated_ns), "received": stamp(received_ns),
            "latency_s": (int(received_ns) - int(generated_ns)) / NS_PER_S}
    if decoded is not None:
        out["decoded"] = finite((k, float(decoded[k])) for k in DECODED_FIELDS)
    return out


def scene_entity(t_ns: int, robot: str, robot_id: int, platoon: int, dims: Mapping[str, float]) -> dict[str, Any]:
    """A robot's ``foxglove.SceneEntity``: its body box (length x width, centred ``length/2 - rear_overhang``
    ahead of the rear axle) in its platoon's colour and its name above it, locked to ``<robot>/base_link``."""
    length, width = float(dims["length_m"]), float(dims["width_m"])
    height = min(width, MAX_BOX_HEIGHT_M)  # the scenario gives no height: a box as tall as wide, as the ROS markers
    ahead = 0.5 * length - float(dims["rear_overhang_m"])
    r, g, b = PLATOON_RGB[platoon % len(PLATOON_RGB)]
    cube = {"pose": pose(ahead, 0.0, 0.0, 0.5 * height), "size": vec3(length, width, height),
            "color": {"r": r, "g": g, "b": b, "a": 0.9}}
    text = {"pose": pose(ahead, 0.0, 0.0, 1.6 * height), "billboard": True, "font_size": LABEL_FONT_PX,
            "scale_invariant": True, "color": dict(LABEL_RGBA), "text": robot}
    return {"timestamp": stamp(t_ns), "frame_id": base_frame(robot), "id": robot, "lifetime": {"sec": 0, "nsec": 0},
            "frame_locked": True,
            "metadata": [{"key": "robot_id", "value": str(robot_id)}, {"key": "platoon", "value": str(platoon)}],
            "arrows": [], "cubes": [cube], "spheres": [], "cylinders": [], "lines": [], "triangles": [],
            "texts": [text], "models": []}


def scene_update(t_ns: int, entities: list[dict[str, Any]], gone: Sequence[str]) -> dict[str, Any]:
    """``foxglove.SceneUpdate``: every live robot's entity, and a deletion (MATCHING_ID) for each robot gone."""
    return {"deletions": [{"timestamp": stamp(t_ns), "type": 0, "id": name} for name in gone], "entities": entities}
