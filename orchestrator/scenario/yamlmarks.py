"""Safe YAML for scenarios: the line of every key and list item, and bounded work on hostile input.

A scenario file may come from anywhere, so reading one must end quickly with data or a ``YamlInputError`` that
says where and why. On top of PyYAML's safe subset this loader

- decodes bytes strictly as UTF-8 (a BOM is accepted) and refuses control characters, naming the byte offset;
- bounds nesting depth and alias expansion (a few hundred bytes of nested aliases would otherwise expand to
  gigabytes, and an alias inside its own anchor to an endless structure), naming the line of the offending node;
- accepts only the core tags (str, int, float, bool, null, seq, map) and plain scalar mapping keys;
- rejects duplicate keys, naming both lines, and scalars that do not convert (``!!float abc``);
- builds independent Python objects even where aliases repeat a block, so that changing one copy (``--set``)
  never changes another.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

Loc = tuple[object, ...]

MAX_DEPTH = 64
"""Deepest nesting of mappings and lists, aliases expanded (a scenario needs fewer than 10 levels)."""
MAX_ALIASES = 10_000
"""Most alias references in one document."""
MAX_ALIAS_NODES = 100_000
"""Most nodes that alias references may add to a document when expanded."""

_CORE = "tag:yaml.org,2002:"
_SCALAR_TAGS = {f"{_CORE}{name}" for name in ("str", "int", "float", "bool", "null")}
_ALLOWED_TAGS = {yaml.ScalarNode: _SCALAR_TAGS, yaml.SequenceNode: {f"{_CORE}seq"}, yaml.MappingNode: {f"{_CORE}map"}}
_KIND = {yaml.ScalarNode: "a scalar", yaml.SequenceNode: "a list", yaml.MappingNode: "a mapping"}
# the characters YAML allows in a stream (YAML 1.2, 5.1); anything else marks a binary or corrupted file
_NON_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_BOMS = {b"\xff\xfe\x00\x00": "UTF-32", b"\x00\x00\xfe\xff": "UTF-32", b"\xff\xfe": "UTF-16", b"\xfe\xff": "UTF-16"}


class YamlInputError(yaml.YAMLError):
    """YAML the scenario loader refuses. ``problem`` says why, ``line`` (1-based) and ``loc`` (the field path, as
    far as it is known) say where; ``syntax`` is true for text that is not YAML at all."""

    def __init__(self, problem: str, line: int | None = None, loc: Loc = (), syntax: bool = False) -> None:
        self.problem = problem
        self.line = line
        self.loc = loc
        self.syntax = syntax
        super().__init__(problem)

    def __str__(self) -> str:
        return f"line {self.line}: {self.problem}" if self.line else self.problem


class ScenarioLoader(yaml.SafeLoader):
    """Safe YAML with YAML 1.2 booleans: only true/false are booleans, so ``mode: off`` or ``answer: no`` stay
    strings (YAML 1.1 would silently turn them into False). Dates, ``=`` and ``<<`` stay plain strings too (they
    are not core-schema types). Composition counts nesting and alias expansion and stops past the limits."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._path: list[object] = []
        self._open_anchors: set[str] = set()
        self._aliases = 0
        self._alias_nodes = 0
        self._measure: dict[yaml.Node, tuple[int, int]] = {}  # node -> (size, depth) with aliases expanded

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        """PyYAML's composition, with the depth, alias and recursion limits applied before each node."""
        part = index.value if isinstance(index, yaml.ScalarNode) else index
        self._path.append("?" if parent is not None and index is None else part)  # '?': a key being composed
        try:
            if self.check_event(yaml.AliasEvent):
                return self._alias()
            event = self.peek_event()
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise self._error(f"nesting deeper than {MAX_DEPTH} levels", event.start_mark)
            if event.anchor is not None:
                self._open_anchors.add(event.anchor)
            node = super().compose_node(parent, index)
            self._open_anchors.discard(event.anchor)
            self._depth -= 1
            self._measure[node] = self._size_and_depth(node)
            return node
        finally:
            self._path.pop()

    def _alias(self) -> yaml.Node:
        event = self.peek_event()
        target = self.anchors.get(event.anchor)
        if target is not None:
            if event.anchor in self._open_anchors:
                raise self._error(f"alias '*{event.anchor}' refers to a block that contains it (a structure "
                                  "without end)", event.start_mark)
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise self._error(f"more than {MAX_ALIASES} alias references", event.start_mark)
            size, depth = self._measure[target]
            self._alias_nodes += size
            if self._alias_nodes > MAX_ALIAS_NODES:
                raise self._error(f"alias '*{event.anchor}' expands the document past {MAX_ALIAS_NODES} nodes "
                                  "(nested aliases multiply)", event.start_mark)
            if self._depth + depth > MAX_DEPTH:
                raise self._error(f"alias '*{event.anchor}' nests deeper than {MAX_DEPTH} levels", event.start_mark)
        return super().compose_node(None, None)  # PyYAML reports an undefined alias

    def _size_and_depth(self, node: yaml.Node) -> tuple[int, int]:
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            return 1, 0
        measures = [self._measure[child] for child in children]
        return 1 + sum(m[0] for m in measures), 1 + max((m[1] for m in measures), default=0)

    def _error(self, problem: str, mark: yaml.Mark) -> YamlInputError:
        loc = tuple(p for p in self._path[1:] if p is not None)
        return YamlInputError(problem, mark.line + 1, loc)


ScenarioLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers
            if tag not in (f"{_CORE}bool", f"{_CORE}timestamp", f"{_CORE}merge", f"{_CORE}value")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
ScenarioLoader.add_implicit_resolver(
    f"{_CORE}bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def decode_text(data: bytes) -> str:
    """Scenario bytes as text: strict UTF-8, with or without a BOM. Raises ``YamlInputError`` naming the byte
    offset (and line) of the first byte that is not UTF-8."""
    for bom, name in _BOMS.items():
        if data.startswith(bom):
            raise YamlInputError(f"the file is {name} (it starts with a {name} byte order mark); save it as UTF-8",
                                 1)
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    try:
        return data[start:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = start + exc.start
        line = data[:offset].count(b"\n") + 1
        raise YamlInputError(f"not UTF-8 text: byte 0x{data[offset]:02x} at byte offset {offset} ({exc.reason}); "
                             "a scenario is a UTF-8 YAML file", line) from None


def load_value(text: str) -> Any:
    """One YAML value (as ``--set`` gives it) with the scenario's rules."""
    return load_with_lines(text)[0]


def load_with_lines(text: str) -> tuple[Any, dict[Loc, int]]:
    """Parse YAML (safe subset, bounded) and return the data plus a map from path tuples to 1-based line numbers.
    Raises ``YamlInputError`` for anything it refuses, YAML syntax errors included."""
    text = text.removeprefix("\ufeff")
    bad = _NON_PRINTABLE.search(text)
    if bad is not None:
        offset = len(text[: bad.start()].encode("utf-8"))
        line = text.count("\n", 0, bad.start()) + 1
        raise YamlInputError(f"control character U+{ord(bad.group()):04X} at byte offset {offset}: not a text file",
                             line)
    loader = ScenarioLoader(text)
    try:
        node = loader.get_single_node()
    except YamlInputError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = ", ".join(part for part in (exc.context, exc.problem) if part) or "not valid YAML"
        raise YamlInputError(problem, mark.line + 1 if mark is not None else None, syntax=True) from None
    except yaml.YAMLError as exc:  # a reader error: no mark, the text is checked above
        raise YamlInputError(str(exc), syntax=True) from None
    finally:
        loader.dispose()
    if node is None:
        return None, {}
    lines: dict[Loc, int] = {(): node.start_mark.line + 1}
    return _build(node, (), lines, SafeConstructor()), lines


def _build(node: yaml.Node, loc: Loc, lines: dict[Loc, int], scalars: SafeConstructor) -> Any:
    """The Python value of ``node`` (a fresh object per alias occurrence), recording each child's line."""
    kind = type(node)
    if node.tag not in _ALLOWED_TAGS[kind]:
        raise YamlInputError(f"tag '{_short(node.tag)}' is not allowed on {_KIND[kind]} (allowed: "
                             f"{', '.join(sorted(_short(t) for t in _ALLOWED_TAGS[kind]))})",
                             node.start_mark.line + 1, loc)
    if isinstance(node, yaml.ScalarNode):
        return _scalar(node, loc, scalars)
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            lines[(*loc, index)] = item.start_mark.line + 1
            items.append(_build(item, (*loc, index), lines, scalars))
        return items
    mapping: dict[str, Any] = {}
    first_line: dict[str, int] = {}
    for key_node, value_node in node.value:
        line = key_node.start_mark.line + 1
        key = _key(key_node, loc, scalars)
        if key in first_line:
            where = f"twice on line {line}" if first_line[key] == line else f"at lines {first_line[key]} and {line}"
            raise YamlInputError(f"duplicate key '{key}' {where} (a mapping names each key once)", line, (*loc, key))
        first_line[key] = line
        lines[(*loc, key)] = line
        mapping[key] = _build(value_node, (*loc, key), lines, scalars)
    return mapping


def _key(node: yaml.Node, loc: Loc, scalars: SafeConstructor) -> str:
    """A mapping key as text: keys name fields, robots or parameters, so ``1:`` is the key '1'."""
    line = node.start_mark.line + 1
    if not isinstance(node, yaml.ScalarNode):
        raise YamlInputError(f"a mapping key must be a plain name, got {_KIND[type(node)]} (a complex '?' key)",
                             line, loc)
    if node.tag not in _SCALAR_TAGS:
        raise YamlInputError(f"tag '{_short(node.tag)}' is not allowed on a key", line, loc)
    if node.value == "<<" and node.style is None:
        raise YamlInputError("merge keys ('<<') are not supported: write the fields out (an alias may repeat a "
                             "whole block)", line, loc)
    value = _scalar(node, loc, scalars)
    return value if isinstance(value, str) else node.value


def _scalar(node: yaml.ScalarNode, loc: Loc, scalars: SafeConstructor) -> Any:
    try:
        return scalars.construct_object(node, deep=True)
    except (ArithmeticError, LookupError, ValueError, TypeError, yaml.YAMLError):
        # e.g. '!!float abc', '!!bool maybe', or an integer with more digits than Python converts
        shown = node.value if len(node.value) <= 40 else node.value[:40] + "..."
        raise YamlInputError(f"'{shown}' is not a valid {_short(node.tag).removeprefix('!!')}",
                             node.start_mark.line + 1, loc) from None


def _short(tag: str) -> str:
    return "!!" + tag.removeprefix(_CORE) if tag.startswith(_CORE) else tag


def line_of(lines: dict[Loc, int], loc: Loc) -> int | None:
    """Line of the longest prefix of ``loc`` that exists in the source (a missing field points at its parent)."""
    for cut in range(len(loc), -1, -1):
        line = lines.get(tuple(loc[:cut]))
        if line is not None:
            return line
    return None
