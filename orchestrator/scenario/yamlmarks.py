"""YAML loading that remembers the line of every key and list item, so errors can point at the source."""

from __future__ import annotations

import re
from typing import Any

import yaml

Loc = tuple[object, ...]


class ScenarioLoader(yaml.SafeLoader):
    """Safe YAML with YAML 1.2 booleans: only true/false are booleans, so ``mode: off`` or ``answer: no`` stay
    strings (YAML 1.1 would silently turn them into False)."""


ScenarioLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
ScenarioLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def load_value(text: str) -> Any:
    """One YAML value (as ``--set`` gives it) with the scenario's rules."""
    return yaml.load(text, Loader=ScenarioLoader)  # a SafeLoader subclass: safe


def load_with_lines(text: str) -> tuple[Any, dict[Loc, int]]:
    """Parse YAML (safe subset) and return the data plus a map from path tuples to 1-based line numbers."""
    node = yaml.compose(text, Loader=ScenarioLoader)
    if node is None:
        return None, {}
    lines: dict[Loc, int] = {(): node.start_mark.line + 1}
    _walk(node, (), lines)
    data = yaml.load(text, Loader=ScenarioLoader)  # a SafeLoader subclass: safe
    return data, lines


def _walk(node: yaml.Node, loc: Loc, lines: dict[Loc, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            child = (*loc, key)
            lines[child] = key_node.start_mark.line + 1
            _walk(value_node, child, lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = (*loc, index)
            lines[child] = item.start_mark.line + 1
            _walk(item, child, lines)


def line_of(lines: dict[Loc, int], loc: Loc) -> int | None:
    """Line of the longest prefix of ``loc`` that exists in the source (a missing field points at its parent)."""
    for cut in range(len(loc), -1, -1):
        line = lines.get(tuple(loc[:cut]))
        if line is not None:
            return line
    return None
