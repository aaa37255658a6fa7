"""Port contracts: what travels between federates, field by field, with dtype and SI unit.

Frames follow REP-103: x forward/east, y left/north, yaw counter-clockwise from +x, all in the scenario's local ENU
frame. A port is either

- **robot-indexed** (``index="robot"``): one row per live robot in roster order, with an ``id`` column (int64);
- **event-indexed** (``index="event"``): a table of any number of rows, each naming the robots it concerns.

A producer declares a ``PortSpec`` per output; a consumer may declare the fields it reads (``Input.fields``). The
scheduler checks both ends at setup (``check_contract``) so a unit or dtype mismatch is an error naming both
federates before the first step, never a wrong number afterwards.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

Index = Literal["robot", "event"]
DTYPES = ("float64", "int64", "bool", "uint8", "str")
"""Field dtypes a port may declare (``str`` only on event ports: names). A ``uint8`` field with ``categories``
holds codes into that list of names (cheap to build every step; recorded as a string column)."""


@dataclass(frozen=True)
class FieldSpec:
    """One column of a port: its name, numpy dtype name and SI unit (``-`` for dimensionless, ``robot id``, ``ns``)."""

    name: str
    dtype: str = "float64"
    unit: str = "-"
    finite: bool = False  # True: NaN and infinities are a producer's error (state, commands); False: NaN means "none"
    categories: tuple[str, ...] = ()  # uint8 codes: the names they stand for

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"field '{self.name}': dtype '{self.dtype}' is not one of {', '.join(DTYPES)}")
        if self.categories and self.dtype != "uint8":
            raise ValueError(f"field '{self.name}': categories need dtype uint8 (codes), got {self.dtype}")


@dataclass(frozen=True)
class PortSpec:
    """The contract of one port. ``fields`` excludes the ``id`` column of robot-indexed ports (always int64)."""

    name: str
    fields: tuple[FieldSpec, ...] = ()
    index: Index = "robot"
    doc: str = ""
    typed: bool = True  # False: declared by name only (legacy plug-ins); recorded as found, not checked

    def __post_init__(self) -> None:
        if self.index not in ("robot", "event"):
            raise ValueError(f"port '{self.name}': index must be 'robot' or 'event', got {self.index!r}")
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"port '{self.name}': a field is declared twice in {names}")

    def field(self, name: str) -> FieldSpec | None:
        """The field called ``name`` (None when the port has none)."""
        for spec in self.fields:
            if spec.name == name:
                return spec
        return None

    @property
    def units(self) -> dict[str, str]:
        """``{field: unit}``."""
        return {f.name: f.unit for f in self.fields}

    def renamed(self, name: str) -> PortSpec:
        """The same contract on another port name (bridges re-publish under their own names)."""
        return PortSpec(name, self.fields, self.index, self.doc, self.typed)


FieldDeclaration = str | tuple[str, str] | tuple[str, str, tuple[str, ...]]
"""A unit (float64), ``(dtype, unit)`` or ``("uint8", unit, categories)``."""


def port(name: str, fields: Mapping[str, FieldDeclaration], index: Index = "robot", doc: str = "",
         finite: bool = False) -> PortSpec:
    """Shorthand: ``fields`` maps a name to its unit (float64), to ``(dtype, unit)`` or to ``("uint8", unit,
    categories)``; ``finite`` forbids NaN and infinities in every float field."""
    specs = []
    for field_name, value in fields.items():
        if isinstance(value, str):
            dtype, unit, categories = "float64", value, ()
        else:
            dtype, unit, *rest = value
            categories = tuple(rest[0]) if rest else ()
        specs.append(FieldSpec(field_name, dtype, unit, finite and dtype == "float64", categories))
    return PortSpec(name, tuple(specs), index, doc)


def untyped(name: str, units: Mapping[str, str] | None = None) -> PortSpec:
    """A port declared by name only; ``units`` (``{"field": unit}``), when given, still documents and records them."""
    fields = tuple(FieldSpec(k, "float64", v) for k, v in (units or {}).items())
    return PortSpec(name, fields, "robot", typed=False)


class ContractError(ValueError):
    """A consumer's input does not match its producer's port (field, dtype or unit), or has no producer."""


def check_contract(consumer: str, wanted: Iterable[FieldSpec], producer: str, spec: PortSpec) -> None:
    """Raise ``ContractError`` naming both federates, the port, the field and both ends' declarations when a field
    the consumer reads is missing from the producer's port or differs in dtype or unit."""
    for want in wanted:
        have = spec.field(want.name)
        where = f"input '{spec.name}.{want.name}' of federate '{consumer}'"
        if have is None:
            offered = ", ".join(f.name for f in spec.fields) or "no declared fields"
            raise ContractError(f"{where}: producer '{producer}' has no field '{want.name}' (it offers {offered})")
        if have.unit != want.unit:
            raise ContractError(f"{where} expects unit '{want.unit}', but producer '{producer}' declares "
                                f"'{have.unit}'")
        if have.dtype != want.dtype:
            raise ContractError(f"{where} expects dtype {want.dtype}, but producer '{producer}' declares "
                                f"{have.dtype}")


# -- the built-in ports (docs/extending.md has the catalogue) --------------------------------------------------
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
"""Fields of ``commands``: the controller fills all; the vehicle model uses the pair its input mode names. A row of
NaN means this producer does not drive that robot (an external command source does, see ``command_port``)."""

EXTERNAL_COMMAND_FIELDS: dict[str, str | tuple[str, str]] = {
    "robot": ("int64", "robot id"),
    "speed": "m/s",
    "accel": "m/s^2",
    "steer": "rad",
    "yaw_rate": "rad/s",
}
"""Fields of an external command source's port: one row per fresh command. NaN means "not given": a source sends
speed and steering, or speed and yaw rate (ROS 2 Twist), or acceleration and steering, and the physics federate
completes the rest from the vehicle's state, wheelbase and limits."""

COMMAND_EVENTS = ("timeout_brake", "timeout_hold", "resumed")
COMMAND_EVENT_FIELDS: dict[str, Any] = {
    "t_ns": ("int64", "ns"),
    "robot": ("int64", "robot id"),
    "event": ("uint8", "-", COMMAND_EVENTS),
}
"""Fields of ``command_events``: a robot's external source fell silent (and what the robot does then) or spoke
again."""

DIAGNOSTIC_FIELDS: dict[str, str | tuple[str, str]] = {
    "pred_age_s": "s",
    "desired_gap_m": "m",
    "pred_x": "m",
    "pred_y": "m",
    "pred_v": "m/s",
    "degraded": "-",
}
"""Fields of ``control_diag``: what each follower's law used (NaN for robots without a law); 1.0 while degraded."""

RANGE_FIELDS: dict[str, str | tuple[str, str]] = {
    "range_m": "m",
    "range_rate_mps": "m/s",
    "bearing_rad": "rad",
    "target": ("int64", "robot id"),
}
"""Fields of ``range``: the forward sensor's nearest in-path target (NaN / -1 when there is none)."""

COLLISION_FIELDS: dict[str, str | tuple[str, str]] = {
    "t_ns": ("int64", "ns"),
    "a": ("int64", "robot id"),
    "b": ("int64", "robot id"),
}
"""Fields of ``collisions``: one row per new contact between two vehicle bodies."""

DELIVERY_FIELDS: dict[str, str | tuple[str, str]] = {
    "receiver": ("int64", "robot id"),
    "sender": ("int64", "robot id"),
    "generated_ns": ("int64", "ns"),
    "received_ns": ("int64", "ns"),
    **{name: STATE_FIELDS[name] for name in ("x", "y", "yaw", "v", "a", "yaw_rate")},  # the sender's, as decoded
    "u_des": "m/s^2",
}
"""Fields of ``cam_rx``: the sender's state as the receiver decoded it (SI, local frame), one row per reception;
``u_des`` is the sender's desired acceleration where a platooning message carried it (NaN otherwise)."""

PLATOON_MESSAGE_FIELDS: dict[str, str | tuple[str, str]] = {
    "platoon_id": "-",
    "platoon_index": "-",
    "maneuver": "-",
    "maneuver_peer": "robot id",
}
"""What a platooning message says about its sender's platoon (float64, NaN = absent): its platoon's id, its position
in it (0: leader), its maneuver state (a ``MANEUVER_STATES`` code) and the robot id of its maneuver partner.
Carried in ``cam_rx`` (``CAM_RX_PLATOONING``) and published by the control federate (``platoon_state``) only when
a scenario has maneuvers, so other runs keep their traces."""

MANEUVER_STATES = ("idle", "join_request", "accept", "join_move", "gap_opening", "gap_open", "lane_change",
                   "joined", "leave_request", "left", "split_request", "splitting", "merge_request", "merging",
                   "aborted", "watch")
"""Maneuver state codes (``maneuver`` field): 0..14 travel in the platooning message; "watch" (waiting for a
partner's message) is sent as "idle"."""

MANEUVER_TYPES = ("join", "leave", "split", "merge")
MANEUVER_EVENTS = ("requested", "accepted", "gap_opening", "gap_open", "lane_change", "completed", "aborted",
                   "refused")
MANEUVER_REASONS = ("none", "timeout", "partner_aborted", "busy", "not_applicable")
MANEUVER_EVENT_FIELDS: dict[str, Any] = {
    "t_ns": ("int64", "ns"),
    "request": ("int64", "-"),
    "robot": ("int64", "robot id"),
    "peer": ("int64", "robot id"),
    "maneuver": ("uint8", "-", MANEUVER_TYPES),
    "event": ("uint8", "-", MANEUVER_EVENTS),
    "state": ("uint8", "-", MANEUVER_STATES),
    "reason": ("uint8", "-", MANEUVER_REASONS),
}
"""Fields of ``maneuver_events``: one row per step of a maneuver (``request``: its index in the scenario's
``maneuvers`` list; ``state``: the robot's state when it happened, e.g. the one that timed out)."""

PLATOON_STATE_FIELDS: dict[str, str | tuple[str, str]] = {
    **PLATOON_MESSAGE_FIELDS,
    "predecessor": "robot id",
    "leader": "robot id",
}
"""Fields of ``platoon_state``: what each robot's platooning message says, and whose messages it uses as its
predecessor and leader (NaN: none); the channel's interest follows it."""

V2X_EVENTS = ("tx", "rx")
V2X_OUTCOMES = ("sent", "received", "below_sensitivity", "collision", "half_duplex", "dcc_dropped", "jammed")
"""Outcomes of the ``v2x`` log: "sent" and "dcc_dropped" on tx rows, the others on rx rows ("jammed": lost to a
jammer's power, which the frame would have survived without it)."""
V2X_MESSAGES = ("cam", "pm")
"""Messages of the ``v2x`` log: Cooperative Awareness Messages and platooning messages."""

V2X_LOG_FIELDS: dict[str, Any] = {
    "t_ns": ("int64", "ns"),
    "event": ("uint8", "-", V2X_EVENTS),
    "sender": ("int64", "robot id"),
    "receiver": ("int64", "robot id"),
    "generated_ns": ("int64", "ns"),
    "latency_s": "s",
    "rx_power_dbm": "dBm",
    "outcome": ("uint8", "-", V2X_OUTCOMES),
    "message": ("uint8", "-", V2X_MESSAGES),
}
"""Fields of ``v2x``: every transmission ("tx" rows, receiver -1) and reception ("rx") with its outcome, and which
message it was (a CAM, or a platooning message where the channel sends those)."""

CHANNEL_LOAD_FIELDS: dict[str, str | tuple[str, str]] = {
    "t_ns": ("int64", "ns"),
    "robot": ("int64", "robot id"),
    "cbr": "-",
    "dcc_t_off_s": "s",
}
"""Fields of ``channel_load``: each station's channel busy ratio over each DCC measurement window (end time), and
the DCC state that window leaves: the shortest interval DCC then allows between two of the station's CAMs
(T_off; 0 with DCC off, NaN from a model without DCC)."""

CAM_TRIGGERS = ("none", "dynamics", "timer", "first")
"""Why a station generated a CAM (EN 302 637-2, 6.1.3): its heading, position or speed changed enough
(condition 1), T_GenCam elapsed (condition 2; also every CAM of the fixed-rate mode), or the service started."""

CAM_TRIGGER_FIELDS: dict[str, Any] = {
    "t_ns": ("int64", "ns"),
    "robot": ("int64", "robot id"),
    "cause": ("uint8", "-", CAM_TRIGGERS),
}
"""Fields of ``cam_triggers``: each CAM a station generated, with the rule that triggered it."""

STATE = port("state", STATE_FIELDS, doc="ground truth of every robot (rear-axle reference point)", finite=True)
ESTIMATE = port("estimate", STATE_FIELDS, doc="what each robot believes about itself", finite=True)
COMMANDS = port("commands", COMMAND_FIELDS, doc="what each robot's driver or controller asks of its vehicle (NaN rows: "
                "robots an external source drives)")
CONTROL_DIAG = port("control_diag", DIAGNOSTIC_FIELDS, doc="what each follower's law used, for the trace")
RANGE = port("range", RANGE_FIELDS, doc="forward range sensor")
COLLISIONS = port("collisions", COLLISION_FIELDS, index="event", doc="new contacts between vehicle bodies")
CAM_RX = port("cam_rx", DELIVERY_FIELDS, index="event", doc="received CAMs, decoded to SI in the local frame (in a "
              "scenario with maneuvers also the sender's platoon_id, platoon_index, maneuver and maneuver_peer)")
CAM_RX_PLATOONING = port("cam_rx", {**DELIVERY_FIELDS, **PLATOON_MESSAGE_FIELDS}, index="event",
                         doc="received messages with their platoon fields (scenarios with maneuvers)")
PLATOON_STATE = port("platoon_state", PLATOON_STATE_FIELDS, doc="each robot's platoon, position, maneuver state and "
                     "partner, and whom it listens to (scenarios with maneuvers)")
MANEUVER_EVENT_PORT = port("maneuver_events", MANEUVER_EVENT_FIELDS, index="event",
                           doc="every step of every platoon maneuver (scenarios with maneuvers)")
V2X_LOG = port("v2x", V2X_LOG_FIELDS, index="event", doc="every V2X transmission and reception with its outcome")
CHANNEL_LOAD = port("channel_load", CHANNEL_LOAD_FIELDS, index="event", doc="channel busy ratio and DCC state per "
                    "station")
CAM_TRIGGER_PORT = port("cam_triggers", CAM_TRIGGER_FIELDS, index="event", doc="each CAM generated, with the "
                        "generation rule that triggered it")
COMMAND_EVENT_PORT = port("command_events", COMMAND_EVENT_FIELDS, index="event",
                          doc="external command sources falling silent and speaking again")

COMMAND_PORT_PREFIX = "commands_"


def command_port(source: str) -> PortSpec:
    """The port on which federate ``source`` commands the robots the scenario gives it: ``commands_<source>``, an
    event table of ``EXTERNAL_COMMAND_FIELDS`` (one row per fresh command; the newest row of a robot wins)."""
    return port(f"{COMMAND_PORT_PREFIX}{source}", EXTERNAL_COMMAND_FIELDS, index="event",
                doc=f"commands from '{source}' to the robots it drives")

BUILTIN_PORTS: tuple[PortSpec, ...] = (STATE, ESTIMATE, COMMANDS, CONTROL_DIAG, RANGE, COLLISIONS, CAM_RX, V2X_LOG,
                                       CHANNEL_LOAD, CAM_TRIGGER_PORT, COMMAND_EVENT_PORT, PLATOON_STATE,
                                       MANEUVER_EVENT_PORT)


def fields_of(spec: PortSpec, names: Iterable[str] | None = None) -> tuple[FieldSpec, ...]:
    """The fields of ``spec`` a consumer reads (all of them when ``names`` is None), for ``Input.fields``."""
    if names is None:
        return spec.fields
    wanted = []
    for name in names:
        found = spec.field(name)
        if found is None:
            raise ValueError(f"port '{spec.name}' has no field '{name}'")
        wanted.append(found)
    return tuple(wanted)


def units(port_name: str, fields: Mapping[str, str]) -> dict[str, str]:
    """``{"port.field": unit}`` (the flat form remote and bridge federates exchange)."""
    return {f"{port_name}.{name}": unit for name, unit in fields.items()}


def conforms(spec: PortSpec, data: Mapping[str, object]) -> str | None:
    """None when ``data`` carries every declared field with the declared dtype kind, as 1-d columns of one length
    (the live robots' for a robot-indexed port) and finite where declared so; else what is wrong. Used at the port
    boundary by the scheduler and by the conformance tests."""
    kinds = {"float64": "f", "int64": "iu", "bool": "b", "uint8": "u", "str": "OUS"}
    rows: int | None = None
    if spec.index == "robot":
        if "id" not in data:
            return f"robot-indexed port '{spec.name}' has no 'id' column"
        if np.ndim(data["id"]) != 1:
            return f"port '{spec.name}' field 'id' has shape {np.shape(data['id'])}, expected 1-d (one row per robot)"
        rows = np.shape(data["id"])[0]
    for field_spec in spec.fields:
        if field_spec.name not in data:
            return f"port '{spec.name}' lacks field '{field_spec.name}'"
        value = np.asarray(data[field_spec.name])
        if value.dtype.kind not in kinds[field_spec.dtype]:
            return f"port '{spec.name}' field '{field_spec.name}' is {value.dtype}, declared {field_spec.dtype}"
        if value.ndim != 1 or (rows is not None and len(value) != rows):
            expected = f"({rows},)" if rows is not None else "1-d"
            return f"port '{spec.name}' field '{field_spec.name}' has shape {value.shape}, expected {expected}"
        if rows is None:
            rows = len(value)  # event tables: every column as long as the first
        if field_spec.categories and len(value) and int(value.max()) >= len(field_spec.categories):
            return f"port '{spec.name}' field '{field_spec.name}' has a code beyond its {len(field_spec.categories)} " \
                   "categories"
        if field_spec.finite and not np.isfinite(value).all():
            return f"port '{spec.name}' field '{field_spec.name}' has NaN or infinite values, which it must not"
    return None
