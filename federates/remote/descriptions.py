"""Robots and federate descriptions <-> messages of the federate protocol: a spawned robot as its plain fields
(``core.robots.robot_fields``) and a setup reply (``FederateMeta``), each as ``Value`` trees (``codec.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.federate import FederateMeta, meta_from_dict, meta_to_dict
from core.robots import ROLE_FIELDS, RobotSpec, robot_fields, robot_from_fields

from .codec import CodecError, decode_map, encode_map, pb


def encode_robot(robot: RobotSpec | Mapping[str, Any], out: pb.Robot, where: str = "robot") -> pb.Robot:
    """Fill ``out`` with a RobotSpec (or its fields as a dict: ``core.robots.robot_fields``' form, its blocks
    as the plain ``config`` mapping)."""
    fields = robot_fields(robot) if isinstance(robot, RobotSpec) else dict(robot)
    unknown = set(fields) - {*ROLE_FIELDS, "config"}
    if unknown:
        raise CodecError(f"{where}: unknown robot fields {sorted(unknown)}")
    for name in ("id", "spawn_ns", "platoon", "position_in_platoon", "despawn_ns", "predecessor", "leader"):
        if fields.get(name) is not None:
            setattr(out, name, int(fields[name]))
    out.name = str(fields.get("name", ""))
    encode_map(fields.get("config") or {}, out.config, f"{where}.config")
    return out


def decode_robot_fields(message: pb.Robot) -> dict[str, Any]:
    """The robot of ``message`` as plain fields (``core.robots.robot_fields``' form), its blocks not resolved."""
    optional = {name: getattr(message, name) if message.HasField(name) else None
                for name in ("despawn_ns", "predecessor", "leader")}
    return {"id": message.id, "name": message.name, "spawn_ns": message.spawn_ns, "platoon": message.platoon,
            "position_in_platoon": message.position_in_platoon, **optional,
            "config": decode_map(message.config, "config")}


def decode_robot(message: pb.Robot) -> RobotSpec:
    """The RobotSpec of ``message``: its blocks resolved like the world's (``core.robots.robot_from_fields``)."""
    return robot_from_fields(decode_robot_fields(message))


# -- meta -------------------------------------------------------------------------------------------------------
def _encode_fields(rows: Sequence[Sequence[Any]], out: Any) -> None:
    for name, dtype, unit, finite, categories in rows:
        field = out.add()
        field.name, field.dtype, field.unit, field.finite = name, dtype, unit, finite
        field.categories[:] = categories


def encode_meta(meta: FederateMeta, out: pb.Meta) -> pb.Meta:
    """Fill ``out`` with what a federate declared at setup."""
    data = meta_to_dict(meta)
    out.SetInParent()
    for item in data["inputs"]:
        spec = out.inputs.add()
        spec.port, spec.delayed, spec.queued, spec.optional = (item["port"], item["delayed"], item["queued"],
                                                               item["optional"])
        _encode_fields(item["fields"], spec.fields)
    for item in data["outputs"]:
        spec = out.outputs.add()
        spec.name, spec.index, spec.typed, spec.doc = item["name"], item["index"], item["typed"], item["doc"]
        _encode_fields(item["fields"], spec.fields)
    if data["period_ns"] is not None:
        out.period_ns = int(data["period_ns"])
    out.offset_ns = int(data["offset_ns"])
    for key, unit in data["units"].items():
        entry = out.units.add()
        entry.key, entry.unit = key, unit
    return out


def meta_dict(message: pb.Meta) -> dict[str, Any]:
    """The setup reply as plain data (``core.federate.meta_to_dict``'s form)."""

    def fields(specs: Any) -> list[list[Any]]:
        return [[f.name, f.dtype, f.unit, f.finite, list(f.categories)] for f in specs]

    return {
        "inputs": [{"port": i.port, "delayed": i.delayed, "queued": i.queued, "optional": i.optional,
                    "fields": fields(i.fields)} for i in message.inputs],
        "outputs": [{"name": o.name, "index": o.index or "robot", "typed": o.typed, "doc": o.doc,
                     "fields": fields(o.fields)} for o in message.outputs],
        "period_ns": message.period_ns if message.HasField("period_ns") else None,
        "offset_ns": message.offset_ns,
        "units": {u.key: u.unit for u in message.units},
    }


def decode_meta(message: pb.Meta) -> FederateMeta:
    """The FederateMeta of a setup reply (its contracts are checked like an in-process federate's)."""
    try:
        return meta_from_dict(meta_dict(message))
    except (ValueError, TypeError) as exc:
        raise CodecError(f"setup reply: {exc}") from None


__all__ = ["decode_meta", "decode_robot", "decode_robot_fields", "encode_meta", "encode_robot", "meta_dict"]
