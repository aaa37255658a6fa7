"""YAML loading that remembers the line of every key and list item, so errors can point at the source."""

from __future__ import annotations

from typing import Any

import yaml

Loc = tuple[object, ...]


def load_with_lines(text: str) -> tuple[Any, dict[Loc, int]]:
    """Parse YAML (safe subset) and return the data plus a map from path tuples to 1-based line numbers."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if node is None:
        return None, {}
    lines: dict[Loc, int] = {(): node.start_mark.line + 1}
    _walk(node, (), lines)
    data = yaml.safe_load(text)
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
