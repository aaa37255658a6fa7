"""The ports the built-in federates exchange, their fields and SI units (REP-103: x forward/east, y left/north,
yaw counter-clockwise from +x, all in the scenario's local ENU frame).

Robot-indexed ports (``state``, ``estimate``, ``commands``, ``range``) hold one row per live robot in roster order,
with an ``id`` column. Event ports (``cam_rx``) hold one row per event.
"""

from __future__ import annotations

STATE_FIELDS: dict[str, str] = {
    "x": "m",
    "y": "m",
    "yaw": "rad",
    "v": "m/s",
    "a": "m/s^2",
    "yaw_rate": "rad/s",
    "steer": "rad",
}
"""Fields of ``state`` (ground truth, rear-axle reference point) and ``estimate`` (what the robot believes)."""

COMMAND_FIELDS: dict[str, str] = {
    "speed": "m/s",
    "accel": "m/s^2",
    "steer": "rad",
    "yaw_rate": "rad/s",
}
"""Fields of ``commands``: the controller fills all; the vehicle model uses the pair its input mode names."""

DELIVERY_FIELDS: dict[str, str] = {
    "receiver": "robot id",
    "sender": "robot id",
    "generated_ns": "ns",
    "received_ns": "ns",
    "x": "m",
    "y": "m",
    "yaw": "rad",
    "v": "m/s",
    "a": "m/s^2",
    "yaw_rate": "rad/s",
}
"""Fields of ``cam_rx``: the sender's state as the receiver decoded it (SI, local frame), one row per reception."""


def units(port: str, fields: dict[str, str]) -> dict[str, str]:
    """``{"port.field": unit}`` for a federate's meta."""
    return {f"{port}.{name}": unit for name, unit in fields.items()}
