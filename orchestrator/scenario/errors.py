"""Scenario errors that name the file, line, field path and what is allowed.

A scenario may be hostile or just huge, so an error never echoes more than a short prefix of any value it quotes
(``clip``, ``shown``) and lists at most ``MAX_LISTED`` problems."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

MAX_LISTED = 100
"""Most problems an error lists (a 100,000-robot list with one mistake per robot would print megabytes)."""
MAX_MESSAGE = 1000
"""Longest problem message, in characters, once long words are clipped (allowed names are listed in full)."""
MAX_PATH = 300
"""Longest field path, in characters."""
_LONG_WORD = re.compile(r"\S{121,}")


def clip(text: str, keep: int = 60) -> str:
    """``text`` as an error message quotes it: whole when short, else its first ``keep`` characters and its
    length, e.g. ``aaaa... (100,000 characters)``."""
    if len(text) <= keep:
        return text
    return f"{text[:keep]}... ({len(text):,} characters)"


def shown(value: Any, keep: int = 60) -> str:
    """``repr(value)`` as an error message quotes it, in time and size bounded by ``keep`` whatever the value: a
    long string as its prefix and length, a large list or mapping as its first items and its length."""
    if isinstance(value, str):
        return repr(value) if len(value) <= keep else f"{value[:keep]!r}... ({len(value):,} characters)"
    if isinstance(value, dict | list | tuple):
        if isinstance(value, dict):
            inner = [f"{shown(k, 20)}: {shown(v, 20)}" for k, v in list(value.items())[:4]]
            opening, closing, what = "{", "}", "entries"
        else:
            inner = [shown(v, 20) for v in value[:4]]
            opening, closing = ("[", "]") if isinstance(value, list) else ("(", ")")
            what = "items"
        if len(value) > len(inner):
            return f"{opening}{', '.join([*inner, '...'])}{closing} ({len(value):,} {what})"
        return f"{opening}{', '.join(inner)}{closing}"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"an integer of {len(str(abs(value))):,} digits"
    return clip(repr(value), keep)


def _bounded(message: str, limit: int) -> str:
    """``message`` with every very long word clipped and then, still too long, cut with its length."""
    message = _LONG_WORD.sub(lambda m: clip(m.group(), 60), message)
    return message if len(message) <= limit else clip(message, limit)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a scenario."""

    path: str
    message: str
    line: int | None = None


UNLISTED = Problem("", "")
"""A problem past the first ``MAX_LISTED`` of a long list: it is counted, not shown (nor worth describing)."""


class ScenarioError(ValueError):
    """A scenario that cannot be run; ``str()`` lists every problem (at most ``MAX_LISTED``), one per line,
    ``file:line: path: message``."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        lines = []
        listed = [p for p in self.problems if p is not UNLISTED][:MAX_LISTED]
        for p in listed:
            where = f"{self.source}:{p.line}" if p.line else self.source
            lines.append(f"{where}: {_bounded(p.path, MAX_PATH) or '<scenario>'}: {_bounded(p.message, MAX_MESSAGE)}")
        more = len(self.problems) - len(listed)
        if more:
            lines[-1] += f" (and {more:,} more problem{'s' if more > 1 else ''} after this one, not listed)"
        return "\n".join(lines)


def format_path(loc: tuple[object, ...]) -> str:
    """('vehicles', 2, 'controller', 'time_gap') -> 'vehicles[2].controller.time_gap'; a very long name in it is
    clipped (``clip``)."""
    out = []
    for part in loc:
        if isinstance(part, int):
            out.append(f"[{part}]")
        else:
            text = clip(str(part))
            out.append(f".{text}" if out else text)
    return "".join(out)
