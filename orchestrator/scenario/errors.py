"""Scenario errors that name the file, line, field path and what is allowed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a scenario."""

    path: str
    message: str
    line: int | None = None


class ScenarioError(ValueError):
    """A scenario that cannot be run; ``str()`` lists every problem, one per line, ``file:line: path: message``."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        lines = []
        for p in self.problems:
            where = f"{self.source}:{p.line}" if p.line else self.source
            lines.append(f"{where}: {p.path or '<scenario>'}: {p.message}")
        return "\n".join(lines)


def format_path(loc: tuple[object, ...]) -> str:
    """('vehicles', 2, 'controller', 'time_gap') -> 'vehicles[2].controller.time_gap'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
