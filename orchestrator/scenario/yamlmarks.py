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

import contextlib
import re
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from .errors import clip

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
    are not core-schema types). ``load_with_lines`` uses its implicit resolvers on the parser's events."""


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
    Raises ``YamlInputError`` for anything it refuses, YAML syntax errors included. The work is linear in the
    text: libyaml's parser (PyYAML's own where libyaml is missing) gives the events, and one pass over them builds
    the values without an intermediate node graph."""
    text = text.removeprefix("\ufeff")
    bad = _NON_PRINTABLE.search(text)
    if bad is not None:
        offset = len(text[: bad.start()].encode("utf-8"))
        line = text.count("\n", 0, bad.start()) + 1
        raise YamlInputError(f"control character U+{ord(bad.group()):04X} at byte offset {offset}: not a text file",
                             line)
    parser = _Parser(text)
    try:
        return _Builder(parser.get_event).document()
    except YamlInputError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = ", ".join(part for part in (exc.context, exc.problem) if part) or "not valid YAML"
        raise YamlInputError(problem, mark.line + 1 if mark is not None else None, syntax=True) from None
    except yaml.YAMLError as exc:  # a reader error: no mark, the text is checked above
        raise YamlInputError(str(exc), syntax=True) from None
    finally:
        parser.dispose()


if yaml.__with_libyaml__:
    from yaml._yaml import CParser as _Parser
else:  # pragma: no cover - PyYAML built without libyaml: the same events, about five times slower
    class _Parser(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):  # type: ignore[no-redef]
        def __init__(self, stream: str) -> None:
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)

        def dispose(self) -> None:
            pass


_STR = f"{_CORE}str"
_SEQ = f"{_CORE}seq"
_MAP = f"{_CORE}map"


_FLOAT = f"{_CORE}float"
_INT = f"{_CORE}int"
_NULL = f"{_CORE}null"
_SCALAR_EVENT = yaml.ScalarEvent
_IMPLICIT = ScenarioLoader.yaml_implicit_resolvers


def _plain_tag(value: str) -> str:
    """The type of an untagged plain scalar (``ScenarioLoader``'s implicit resolvers, keyed by first character)."""
    for tag, pattern in _IMPLICIT.get(value[:1], ()):
        if pattern.match(value):
            return tag
    return _STR


class _Anchor:
    """A finished anchored block: its value (copied for each alias), its size and depth with aliases expanded,
    where its lines sit in the builder's line list, and its text when it is a scalar (an alias used as a key)."""

    __slots__ = ("depth", "first", "last", "line", "loc_len", "size", "text", "value")

    def __init__(self, value: Any, size: int, depth: int, loc_len: int, first: int, last: int, text: str | None,
                 line: int) -> None:
        self.value, self.size, self.depth, self.loc_len = value, size, depth, loc_len
        self.first, self.last, self.text, self.line = first, last, text, line


class _Builder:
    """One pass over a document's parser events: Python values, the line of every key and list item, and the
    limits (depth, aliases, tags, keys, duplicates) checked as each event arrives."""

    def __init__(self, next_event: Any) -> None:
        self.next = next_event
        self.lines: list[tuple[Loc, int]] = []  # append-only, so an anchor's lines are a slice of it
        self.anchors: dict[str, _Anchor] = {}
        self.open: set[str] = set()
        self.depth = 0
        self.deepest = 0  # deepest level reached (aliases expanded), for the depth of anchored blocks
        self.nodes = 0  # nodes built (aliases expanded), for the size of anchored blocks
        self.aliases = 0
        self.alias_nodes = 0
        self.scalars = SafeConstructor()

    def document(self) -> tuple[Any, dict[Loc, int]]:
        self.next()  # stream start
        event = self.next()
        if isinstance(event, yaml.StreamEndEvent):
            return None, {}
        start = event.start_mark
        event = self.next()
        root_line = event.start_mark.line + 1
        value = self.value(event, ())
        self.next()  # document end
        event = self.next()
        if not isinstance(event, yaml.StreamEndEvent):
            raise yaml.composer.ComposerError("expected a single document in the stream", start,
                                              "but found another document", event.start_mark)
        lines: dict[Loc, int] = {(): root_line}
        lines.update(self.lines)
        return value, lines

    def value(self, event: Any, loc: Loc) -> Any:
        """The value that starts with ``event`` (its remaining events are read)."""
        if event.__class__ is _SCALAR_EVENT and event.anchor is None and self.depth < MAX_DEPTH:
            self.nodes += 1  # the common case, kept to one call: most events of a large file are plain scalars
            return self.scalar(event, loc)
        if isinstance(event, yaml.AliasEvent):
            return self.alias(event, loc)
        anchor = event.anchor
        if anchor is None:
            return self.node(event, loc)
        if anchor in self.anchors or anchor in self.open:
            first = self.anchors[anchor].line if anchor in self.anchors else None
            raise yaml.composer.ComposerError(f"found duplicate anchor {anchor!r}; first occurrence", None,
                                              f"second occurrence (first on line {first})" if first else
                                              "second occurrence", event.start_mark)
        self.open.add(anchor)
        nodes, first, deepest = self.nodes, len(self.lines), self.deepest
        self.deepest = self.depth
        value = self.node(event, loc)
        depth = self.deepest - self.depth
        self.deepest = max(deepest, self.deepest)
        self.open.discard(anchor)
        text = event.value if isinstance(event, yaml.ScalarEvent) else None
        self.anchors[anchor] = _Anchor(value, self.nodes - nodes, depth, len(loc), first, len(self.lines), text,
                                       event.start_mark.line + 1)
        return value

    def node(self, event: Any, loc: Loc) -> Any:
        self.nodes += 1
        if self.depth >= MAX_DEPTH:  # a scalar counts as a level, as the value of the deepest mapping key
            raise YamlInputError(f"nesting deeper than {MAX_DEPTH} levels", event.start_mark.line + 1, loc)
        if isinstance(event, yaml.ScalarEvent):
            return self.scalar(event, loc)
        self.depth += 1
        self.deepest = max(self.deepest, self.depth)
        if isinstance(event, yaml.SequenceStartEvent):
            self.tag(event, _SEQ, yaml.SequenceNode, loc)
            value: Any = self.sequence(loc)
        else:
            self.tag(event, _MAP, yaml.MappingNode, loc)
            value = self.mapping(loc)
        self.depth -= 1
        return value

    def tag(self, event: Any, default: str, kind: type, loc: Loc) -> str:
        tag = event.tag
        if tag is None or tag == "!":
            tag = _plain_tag(event.value) if kind is yaml.ScalarNode and event.implicit[0] else default
        if tag not in _ALLOWED_TAGS[kind]:
            raise YamlInputError(f"tag '{_short(tag)}' is not allowed on {_KIND[kind]} (allowed: "
                                 f"{', '.join(sorted(_short(t) for t in _ALLOWED_TAGS[kind]))})",
                                 event.start_mark.line + 1, loc)
        return tag

    def sequence(self, loc: Loc) -> list[Any]:
        items: list[Any] = []
        index = 0
        event = self.next()
        while not isinstance(event, yaml.SequenceEndEvent):
            item = (*loc, index)
            self.lines.append((item, event.start_mark.line + 1))
            items.append(self.value(event, item))
            index += 1
            event = self.next()
        return items

    def mapping(self, loc: Loc) -> dict[str, Any]:
        mapping: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        event = self.next()
        while not isinstance(event, yaml.MappingEndEvent):
            line = event.start_mark.line + 1
            key = self.key(event, loc)
            if key in first_line:
                where = f"twice on line {line}" if first_line[key] == line else f"at lines {first_line[key]} and {line}"
                raise YamlInputError(f"duplicate key '{clip(key)}' {where} (a mapping names each key once)", line,
                                     (*loc, key))
            first_line[key] = line
            child = (*loc, key)
            self.lines.append((child, line))
            mapping[key] = self.value(self.next(), child)
            event = self.next()
        return mapping

    def key(self, event: Any, loc: Loc) -> str:
        """A mapping key as text: keys name fields, robots or parameters, so ``1:`` is the key '1'."""
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent):
            anchor = self.anchors.get(event.anchor)
            if anchor is not None and anchor.text is None:
                what = "a list" if isinstance(anchor.value, list) else "a mapping"
                raise YamlInputError(f"a mapping key must be a plain name, got {what} (a complex '?' key)", line, loc)
            value = self.alias(event, loc)
            return value if isinstance(value, str) else anchor.text  # type: ignore[union-attr]
        if not isinstance(event, yaml.ScalarEvent):
            what = "a list" if isinstance(event, yaml.SequenceStartEvent) else "a mapping"
            raise YamlInputError(f"a mapping key must be a plain name, got {what} (a complex '?' key)", line, loc)
        tag = event.tag
        if tag is not None and tag != "!" and tag not in _SCALAR_TAGS:
            raise YamlInputError(f"tag '{_short(tag)}' is not allowed on a key", line, loc)
        if event.value == "<<" and not event.style:
            raise YamlInputError("merge keys ('<<') are not supported: write the fields out (an alias may repeat a "
                                 "whole block)", line, loc)
        value = self.value(event, loc)
        return value if isinstance(value, str) else event.value

    def scalar(self, event: Any, loc: Loc) -> Any:
        text = event.value
        if event.tag is None:  # untagged: the implicit types, most often a plain string, number or null
            if not event.implicit[0]:
                return text
            tag = _plain_tag(text)
            if tag == _STR:
                return text
            if tag == _FLOAT and "_" not in text:
                with contextlib.suppress(ValueError):  # '.inf', '.nan' and '1:30.5' need YAML's own reading
                    return float(text)
            elif tag == _INT and text.isdigit() and (text[0] != "0" or text == "0") and len(text) < 4000:
                return int(text)  # plain decimal ('010' is octal, '0x..' hexadecimal: YAML's own reading)
            elif tag == _NULL:
                return None
        else:
            tag = self.tag(event, _STR, yaml.ScalarNode, loc)
            if tag == _STR:
                return text
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            return self.scalars.construct_object(node, deep=True)
        except (ArithmeticError, LookupError, ValueError, TypeError, yaml.YAMLError):
            # e.g. '!!float abc', '!!bool maybe', or an integer with more digits than Python converts
            raise YamlInputError(f"'{clip(text, 40)}' is not a valid {_short(tag).removeprefix('!!')}",
                                 event.start_mark.line + 1, loc) from None

    def alias(self, event: Any, loc: Loc) -> Any:
        """A fresh copy of the anchored value, with its lines repeated under ``loc``."""
        name = event.anchor
        line = event.start_mark.line + 1
        if name in self.open:
            raise YamlInputError(f"alias '*{name}' refers to a block that contains it (a structure without end)",
                                 line, loc)
        anchor = self.anchors.get(name)
        if anchor is None:
            raise yaml.composer.ComposerError(None, None, f"found undefined alias {name!r}", event.start_mark)
        self.aliases += 1
        if self.aliases > MAX_ALIASES:
            raise YamlInputError(f"more than {MAX_ALIASES} alias references", line, loc)
        self.alias_nodes += anchor.size
        if self.alias_nodes > MAX_ALIAS_NODES:
            raise YamlInputError(f"alias '*{name}' expands the document past {MAX_ALIAS_NODES} nodes (nested "
                                 "aliases multiply)", line, loc)
        if self.depth + anchor.depth > MAX_DEPTH:
            raise YamlInputError(f"alias '*{name}' nests deeper than {MAX_DEPTH} levels", line, loc)
        self.nodes += anchor.size
        self.deepest = max(self.deepest, self.depth + anchor.depth)
        cut = anchor.loc_len
        self.lines.extend([((*loc, *inner[cut:]), at) for inner, at in self.lines[anchor.first:anchor.last]])
        return _copied(anchor.value)


def _copied(value: Any) -> Any:
    """A fresh copy of built YAML data (lists, mappings and immutable scalars): ``copy.deepcopy`` without its memo,
    several times faster."""
    if isinstance(value, list):
        return [_copied(item) for item in value]
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    return value


def _short(tag: str) -> str:
    return "!!" + tag.removeprefix(_CORE) if tag.startswith(_CORE) else tag


def line_of(lines: dict[Loc, int], loc: Loc) -> int | None:
    """Line of the longest prefix of ``loc`` that exists in the source (a missing field points at its parent)."""
    for cut in range(len(loc), -1, -1):
        line = lines.get(tuple(loc[:cut]))
        if line is not None:
            return line
    return None
