"""The scenario's JSON Schema for editors, with every registered law's and channel's own parameters.

The pydantic schema of ``Scenario`` leaves the controller and channel blocks open (their keys depend on ``type``);
here each becomes an ``anyOf`` of one closed variant per registered name (built-ins and installed entry points), so
an editor completes and checks ``time_gap_s`` under ``type: ela_cacc`` and ``dcc`` under ``type: itsg5``; the leader
block likewise has one variant per profile. An entry point that fails to import is left out (``validate`` names
it); a ``package.module:Class`` path is not known in advance, so it is not in the schema.
"""

from __future__ import annotations

from typing import Any

from core.registry import Registry, UnknownNameError

from .model import BLOCK_KEYS, WAYPOINTS, ControllerBlock, Driver, Scenario, profile_params_model


def _loadable(registry: Registry) -> list[tuple[str, Any]]:
    """(name, class) of every selectable entry that imports."""
    out = []
    for name in registry.names():
        try:
            out.append((name, registry.get(name)))
        except UnknownNameError:
            continue
    return out


def _variant(type_name: str, params_schema: dict[str, Any], common: dict[str, Any]) -> dict[str, Any]:
    properties = {**common, **params_schema.get("properties", {}), "type": {"const": type_name}}
    variant = {"type": "object", "properties": properties, "required": ["type"], "additionalProperties": False,
               "title": type_name}
    if "$defs" in params_schema:
        variant["$defs"] = params_schema["$defs"]
    return variant


def _inline_defs(variant: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Move a variant's ``$defs`` to the document root (references stay ``#/$defs/...``)."""
    defs.update(variant.pop("$defs", {}))
    return variant


def scenario_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a version-1 scenario."""
    from comms_models import COMMS_MODELS
    from controllers import CONTROLLERS

    schema = Scenario.model_json_schema()
    defs = schema.setdefault("$defs", {})
    block = ControllerBlock.model_json_schema()
    defs.update(block.pop("$defs", {}))
    common = {k: v for k, v in block["properties"].items() if k in BLOCK_KEYS and k != "type"}
    laws = [_inline_defs(_variant(name, cls.Params.model_json_schema(), common), defs)
            for name, cls in _loadable(CONTROLLERS)]
    channels = []
    for name, cls in _loadable(COMMS_MODELS):
        params = getattr(cls, "Params", None)
        params_schema = params.model_json_schema() if params is not None else {"properties": {}}
        channels.append(_inline_defs(_variant(name, params_schema, {}), defs))
    schema["properties"]["controller"] = {"anyOf": laws, "description": "the followers' control law"}
    schema["properties"]["channel"] = {"anyOf": channels, "description": "the V2X channel model"}
    schema["properties"]["leader"] = {"anyOf": _leader_variants(defs), "description": Driver.__doc__}
    return schema


def _leader_variants(defs: dict[str, Any]) -> list[dict[str, Any]]:
    """One closed variant per leader profile (``params`` from its Params model), and 'waypoints' with its path."""
    from controllers import LEADER_PROFILES

    driver = Driver.model_json_schema()
    defs.update(driver.pop("$defs", {}))
    variants = []
    for name in [*(n for n, _ in _loadable(LEADER_PROFILES)), WAYPOINTS]:
        params = profile_params_model(name).model_json_schema()
        defs.update(params.pop("$defs", {}))
        properties = {"profile": {"const": name}, "params": params}
        if name == WAYPOINTS:
            properties["path"] = driver["properties"]["path"]
        variants.append({"type": "object", "properties": properties, "additionalProperties": False, "title": name,
                         "required": ["profile", "path"] if name == WAYPOINTS else []})
    return variants
