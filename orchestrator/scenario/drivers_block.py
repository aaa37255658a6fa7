"""Who commands each robot: the built-in control federate (default) or an external source named by federate.

Two ways to say it: a robot's own ``driver: {federate: ros}`` (a vehicle entry or a fleet override), or the
top-level ``drivers:`` list, whose entries give a federate a set of robots by name (``robots: [robot1]`` or
``robots: all``) or by platoon index (``platoons: [0]``). A robot named by two of these is an error naming the
robot, and so is a source that names no federate of the scenario.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from core.params import Loc, Strict

ON_TIMEOUT = ("brake", "hold", "fail")


class CommandSource(Strict):
    """An external source of a robot's commands: a federate publishing ``commands_<federate>`` (or ``port``)."""

    federate: str = Field(description="the federate (of 'federates:') that commands the robot")
    port: str | None = Field(None, description="the port it publishes commands on (default: commands_<federate>)")
    command_timeout_s: float = Field(0.5, gt=0, le=3600, description="[s] silence after which on_timeout applies "
                                     "(counted from the robot's spawn until the first command)")
    on_timeout: Literal["brake", "hold", "fail"] = Field(
        "brake", description="when the source is silent: brake to a stop (default), hold the last command, or fail "
        "the run naming the robot and the source")

    @property
    def port_name(self) -> str:
        """The port the physics federate reads this robot's commands from."""
        from core.ports import command_port

        return self.port or command_port(self.federate).name


class DriverAssignment(CommandSource):
    """One entry of ``drivers:``: a source and the robots it drives."""

    robots: list[str] | Literal["all"] | None = Field(None, description="robot names, or 'all'")
    platoons: list[int] | None = Field(None, description="platoon indices (0 = the first platoon)")

    @model_validator(mode="after")
    def _one_selection(self) -> DriverAssignment:
        if (self.robots is None) == (self.platoons is None):
            raise ValueError("give exactly one of 'robots' (names or 'all') and 'platoons' (indices)")
        return self

    def source(self) -> CommandSource:
        """The source part, without the selection."""
        return CommandSource(**self.model_dump(exclude={"robots", "platoons"}))


@dataclass(frozen=True)
class RobotSlot:
    """What resolving the drivers needs of a robot: its name, platoon, own driver and where that is written."""

    name: str
    platoon: int
    driver: CommandSource | None
    loc: Loc


def resolve_drivers(robots: Sequence[RobotSlot], assignments: Sequence[DriverAssignment],
                    federates: Sequence[str]) -> tuple[dict[str, CommandSource], list[tuple[Loc, str]]]:
    """``{robot name: source}`` for every externally driven robot, and the problems: a robot driven twice, a name
    or platoon that does not exist, a source naming no federate of the scenario. Each problem has its location."""
    sources: dict[str, CommandSource] = {}
    where: dict[str, Loc] = {}
    problems: list[tuple[Loc, str]] = []
    names = [r.name for r in robots]
    platoons = sorted({r.platoon for r in robots})

    def give(robot: str, source: CommandSource, loc: Loc) -> None:
        if robot in sources:
            problems.append((loc, f"robot '{robot}' has two command sources: '{sources[robot].federate}' (at "
                                  f"{_path(where[robot])}) and '{source.federate}'; a robot has one source"))
            return
        sources[robot], where[robot] = source, loc

    for robot in robots:
        if robot.driver is not None:
            give(robot.name, robot.driver, (*robot.loc, "driver"))
    for i, entry in enumerate(assignments):
        loc: Loc = ("drivers", i)
        if entry.robots == "all":
            chosen = names
        elif entry.robots is not None:
            unknown = [n for n in entry.robots if n not in names]
            for name in unknown:
                problems.append(((*loc, "robots"), f"no robot named '{name}' (robots: {_few(names)})"))
            chosen = [n for n in entry.robots if n in names]
        else:
            assert entry.platoons is not None
            for p in entry.platoons:
                if p not in platoons:
                    problems.append(((*loc, "platoons"), f"no platoon {p} (platoons: {_few(platoons)})"))
            chosen = [r.name for r in robots if r.platoon in entry.platoons]
        for name in chosen:
            give(name, entry.source(), loc)
    known = set(federates)
    for name, source in sources.items():
        if source.federate not in known:
            problems.append(((*where[name], "federate"), f"robot '{name}' is driven by federate '{source.federate}', "
                                                         f"which the scenario does not have (federates: "
                                                         f"{_few(sorted(known)) or 'none'})"))
    return sources, problems


def _few(items: Sequence[Any]) -> str:
    shown = ", ".join(map(str, items[:8]))
    return shown + (f", ... ({len(items)} in all)" if len(items) > 8 else "")


def _path(loc: Loc) -> str:
    return ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in loc).replace(".[", "[")
