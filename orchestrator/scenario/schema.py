"""The scenario's JSON Schema for editors, with every registered law's and channel's own parameters.

The pydantic schema of ``Scenario`` leaves the controller and channel blocks open (their keys depend on ``type``);
here each becomes an ``anyOf`` of one closed variant per registered name, so an editor completes and checks
``time_gap_s`` under ``type: ela_cacc`` and ``dcc`` under ``type: itsg5``.
"""

from __future__ import annotations

from typing import Any

from .model import BLOCK_KEYS, ControllerBlock, Scenario


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
    laws = [_inline_defs(_variant(name, CONTROLLERS.get(name).Params.model_json_schema(), common), defs)
            for name in CONTROLLERS.names()]
    channels = []
    for name in COMMS_MODELS.names():
        params = getattr(COMMS_MODELS.get(name), "Params", None)
        params_schema = params.model_json_schema() if params is not None else {"properties": {}}
        channels.append(_inline_defs(_variant(name, params_schema, {}), defs))
    schema["properties"]["controller"] = {"anyOf": laws, "description": "the followers' control law"}
    schema["properties"]["channel"] = {"anyOf": channels, "description": "the V2X channel model"}
    return schema
