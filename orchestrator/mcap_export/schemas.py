"""JSON schemas of the messages in ``run.mcap``.

The encoding is JSON (``message_encoding: json``, ``schema encoding: jsonschema``): Foxglove and Lichtblick decode it
without a plug-in and recognise a Foxglove message by its schema *name* (``foxglove.PoseInFrame``,
``foxglove.FrameTransforms``, ``foxglove.SceneUpdate``). The Foxglove schemas below are written from the field lists
of Foxglove's published message reference (https://docs.foxglove.dev/docs/visualization/message-schemas/): a time is
``{"sec", "nsec"}``, a pose is ``position`` (Vector3) and ``orientation`` (Quaternion), colours are RGBA in 0..1.
Primitive lists that coopsim never fills (arrows, spheres, cylinders, lines, triangles, models) are declared as
arrays of objects and always written empty.

Every field has one JSON type, as in Foxglove's own schemas (a viewer's schema parser may not accept
``["number", "null"]``); a number that is NaN in the trace is left out of the message instead, which the schemas
allow (none lists ``required``).

Odometry, ranges and V2X receptions have no Foxglove schema; theirs are coopsim's own (``coopsim.*``), with the unit
of every number in its description.
"""

from __future__ import annotations

import json
from typing import Any

SCHEMA_ENCODING = "jsonschema"
MESSAGE_ENCODING = "json"

POSE_IN_FRAME = "foxglove.PoseInFrame"
FRAME_TRANSFORMS = "foxglove.FrameTransforms"
SCENE_UPDATE = "foxglove.SceneUpdate"
ODOMETRY = "coopsim.Odometry"
RANGE = "coopsim.Range"
V2X_RECEPTION = "coopsim.V2xReception"


def _obj(title: str | None, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object"}
    if title:
        out["title"] = title
    out["description"] = description
    out["properties"] = properties
    return out


def _num(description: str) -> dict[str, Any]:
    return {"type": "number", "description": description}


def _time(description: str) -> dict[str, Any]:
    return {"type": "object", "title": "time", "description": description,
            "properties": {"sec": {"type": "integer", "minimum": 0},
                           "nsec": {"type": "integer", "minimum": 0, "maximum": 999_999_999}}}


def _duration(description: str) -> dict[str, Any]:
    return {"type": "object", "title": "duration", "description": description,
            "properties": {"sec": {"type": "integer"},
                           "nsec": {"type": "integer", "minimum": 0, "maximum": 999_999_999}}}


def _vector3(description: str, unit: str = "m") -> dict[str, Any]:
    return _obj("foxglove.Vector3", description, {k: _num(f"{k} [{unit}]") for k in "xyz"})


def _quaternion(description: str) -> dict[str, Any]:
    return _obj("foxglove.Quaternion", description, {k: _num(f"{k} component") for k in "xyzw"})


def _pose(description: str) -> dict[str, Any]:
    return _obj("foxglove.Pose", description, {"position": _vector3("position [m]"),
                                               "orientation": _quaternion("orientation")})


def _color(description: str) -> dict[str, Any]:
    return _obj("foxglove.Color", description, {k: _num(f"{k} in 0..1") for k in "rgba"})


def _array(items: dict[str, Any], description: str) -> dict[str, Any]:
    return {"type": "array", "items": items, "description": description}


def _pose_in_frame() -> dict[str, Any]:
    return _obj(POSE_IN_FRAME, "A timestamped pose for an object or reference frame in 3D space", {
        "timestamp": _time("Timestamp of pose (simulation time)"),
        "frame_id": {"type": "string", "description": "Frame of reference for pose position and orientation"},
        "pose": _pose("Pose in 3D space: the robot's rear-axle reference point, ground truth"),
    })


def _frame_transform() -> dict[str, Any]:
    return _obj("foxglove.FrameTransform", "A transform between two reference frames in 3D space", {
        "timestamp": _time("Timestamp of transform"),
        "parent_frame_id": {"type": "string", "description": "Name of the parent frame"},
        "child_frame_id": {"type": "string", "description": "Name of the child frame"},
        "translation": _vector3("Translation component of the transform"),
        "rotation": _quaternion("Rotation component of the transform"),
    })


def _frame_transforms() -> dict[str, Any]:
    return _obj(FRAME_TRANSFORMS, "An array of FrameTransform messages",
                {"transforms": _array(_frame_transform(), "Array of transforms")})


def _cube() -> dict[str, Any]:
    return _obj("foxglove.CubePrimitive", "A primitive representing a cube or rectangular prism", {
        "pose": _pose("Position of the center of the cube and orientation of the cube"),
        "size": _vector3("Size of the cube along each axis"),
        "color": _color("Color of the cube"),
    })


def _text() -> dict[str, Any]:
    return _obj("foxglove.TextPrimitive", "A primitive representing a text label", {
        "pose": _pose("Position of the center of the text box and orientation of the text"),
        "billboard": {"type": "boolean", "description": "Whether the text should respect pose.orientation (false) or "
                      "always face the camera (true)"},
        "font_size": _num("Font size (height of one line of text)"),
        "scale_invariant": {"type": "boolean", "description": "Whether font_size is in pixels (true) or meters"},
        "color": _color("Color of the text"),
        "text": {"type": "string", "description": "Text"},
    })


def _scene_update() -> dict[str, Any]:
    # a viewer derives message paths from the schema and walks every object's "properties": give it an empty one
    unused = {"type": "object", "description": "not used by coopsim (always an empty list)", "properties": {}}
    entity = _obj("foxglove.SceneEntity", "A visual element in a 3D scene", {
        "timestamp": _time("Timestamp of the entity"),
        "frame_id": {"type": "string", "description": "Frame of reference"},
        "id": {"type": "string", "description": "Identifier for the entity (the robot's name)"},
        "lifetime": _duration("Zero: visible until replaced or deleted"),
        "frame_locked": {"type": "boolean", "description": "Whether the entity follows its frame as it moves"},
        "metadata": _array(_obj("foxglove.KeyValuePair", "A key with its associated value", {
            "key": {"type": "string"}, "value": {"type": "string"}}), "Additional metadata (robot id, platoon)"),
        "arrows": _array(unused, "Arrow primitives"),
        "cubes": _array(_cube(), "Cube primitives: the robot's body"),
        "spheres": _array(unused, "Sphere primitives"),
        "cylinders": _array(unused, "Cylinder primitives"),
        "lines": _array(unused, "Line primitives"),
        "triangles": _array(unused, "Triangle list primitives"),
        "texts": _array(_text(), "Text primitives: the robot's name"),
        "models": _array(unused, "Model primitives"),
    })
    deletion = _obj("foxglove.SceneEntityDeletion", "Command to remove previously published entities", {
        "timestamp": _time("Only matching entities earlier than this timestamp are deleted"),
        "type": {"type": "integer", "description": "0: MATCHING_ID (delete the entity with this id), 1: ALL"},
        "id": {"type": "string", "description": "Identifier which must match if type is MATCHING_ID"},
    })
    return _obj(SCENE_UPDATE, "An update to the entities displayed in a 3D scene", {
        "deletions": _array(deletion, "Scene entities to delete"),
        "entities": _array(entity, "Scene entities to add or replace"),
    })


def _odometry() -> dict[str, Any]:
    return _obj(ODOMETRY, "The robot's own estimate of its motion, laid out like nav_msgs/Odometry (SI units)", {
        "timestamp": _time("Simulation time of the sample"),
        "frame_id": {"type": "string", "description": "Frame of the pose: <robot>/odom"},
        "child_frame_id": {"type": "string", "description": "Frame of the twist: <robot>/base_link"},
        "pose": _pose("Estimated pose (est_x, est_y, est_yaw of the trace)"),
        "twist": _obj(None, "Velocity in the child frame", {
            "linear": _vector3("x: estimated forward speed est_v", "m/s"),
            "angular": _vector3("z: yaw rate of the state (the trace holds no estimated yaw rate)", "rad/s"),
        }),
    })


def _range() -> dict[str, Any]:
    return _obj(RANGE, "The forward range sensor's nearest in-path target (trace/range.parquet)", {
        "timestamp": _time("Simulation time of the sample"),
        "frame_id": {"type": "string", "description": "<robot>/base_link"},
        "range_m": _num("[m] distance to the target; absent: no target"),
        "range_rate_mps": _num("[m/s] rate of change of the range; absent: no target"),
        "bearing_rad": _num("[rad] bearing of the target, counter-clockwise; absent: no target"),
        "target_id": {"type": "integer", "description": "robot id of the target; -1: none"},
        "target": {"type": "string", "description": "name of the target robot; empty: none"},
    })


def _v2x_reception() -> dict[str, Any]:
    decoded = _obj(None, "The sender's state as the receiver decoded it (SI, map frame); absent when the run did "
                   "not record trace/cam_rx.parquet", {
                       "x": _num("[m]"), "y": _num("[m]"), "yaw": _num("[rad]"), "v": _num("[m/s]"),
                       "a": _num("[m/s^2]"), "yaw_rate": _num("[rad/s]"),
                       "u_des": _num("[m/s^2] desired acceleration, where a platooning message carried it "
                                     "(absent otherwise)"),
                       "platoon_id": _num("[-] the sender's platoon (runs with maneuvers)"),
                       "platoon_index": _num("[-] the sender's position in it, 0: leader (runs with maneuvers)"),
                       "maneuver": _num("[-] the sender's maneuver state code (runs with maneuvers)"),
                       "maneuver_peer": _num("robot id of the sender's maneuver partner (runs with maneuvers)"),
                   })
    return _obj(V2X_RECEPTION, "One V2X message received by one robot. The traces hold no CAM bytes: the frames "
                "an ITS-G5 run sent are in the run directory's v2x.pcap", {
                    "timestamp": _time("Simulation time at which the receiver got the message"),
                    "sender": {"type": "string", "description": "name of the sending robot"},
                    "sender_id": {"type": "integer", "description": "robot id of the sender"},
                    "receiver": {"type": "string", "description": "name of the receiving robot"},
                    "receiver_id": {"type": "integer", "description": "robot id of the receiver"},
                    "generated": _time("Generation time of the message at the sender"),
                    "received": _time("Reception time at the receiver"),
                    "latency_s": _num("[s] received - generated"),
                    "decoded": decoded,
                })


SCHEMAS: dict[str, dict[str, Any]] = {
    POSE_IN_FRAME: _pose_in_frame(),
    FRAME_TRANSFORMS: _frame_transforms(),
    SCENE_UPDATE: _scene_update(),
    ODOMETRY: _odometry(),
    RANGE: _range(),
    V2X_RECEPTION: _v2x_reception(),
}
"""Schema name -> JSON schema."""


def schema_bytes(name: str) -> bytes:
    """The schema as stored in the MCAP file (compact, key order as written: the same bytes every time)."""
    return json.dumps(SCHEMAS[name], separators=(",", ":")).encode()
