"""The federate interface: one small, transport-agnostic contract between the scheduler and every simulator.

The same six calls are what a remote federate (gRPC, HELICS, ROS 2) serves, so the scheduler never knows where a
federate runs. Data crossing the interface is plain: dicts of numpy arrays per port, robot-indexed in roster order.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .robots import RobotSpec

PortData = Mapping[str, Any]
"""What travels on a port: usually ``{"id": int64 array, "<field>": float64 array, ...}`` in roster order."""


@dataclass(frozen=True)
class Input:
    """An input port.

    ``delayed`` inputs see the value published before the current instant, which is how a feedback cycle
    (physics -> control -> physics) is broken: the commands act from the next step on.
    ``queued`` inputs are for event ports (receptions, messages): the federate receives the list of every value
    published on the port since its own previous step, in publication order, so a consumer slower than its
    producer loses nothing. A plain input only sees the latest value (state ports: the newest state is all
    that matters)."""

    port: str
    delayed: bool = False
    queued: bool = False

    def __post_init__(self) -> None:
        if self.delayed and self.queued:
            raise ValueError(f"input '{self.port}': queued inputs cannot also be delayed")


@dataclass(frozen=True)
class FederateMeta:
    """What a federate declares at setup.

    ``period_ns`` set: stepped at ``offset_ns + k * period_ns``. ``period_ns`` None: event-driven, stepped at the
    times ``next_time()`` returns. ``units`` maps ``"port.field"`` to its SI unit, for documentation and checks.
    """

    inputs: tuple[Input, ...] = ()
    outputs: tuple[str, ...] = ()
    period_ns: int | None = None
    offset_ns: int = 0
    units: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.period_ns is not None and self.period_ns <= 0:
            raise ValueError(f"period must be positive, got {self.period_ns} ns")
        if self.offset_ns < 0:
            raise ValueError(f"offset must not be negative, got {self.offset_ns} ns")


@dataclass
class SetupContext:
    """Handed to ``Federate.setup``: the run's seed, end time, output folder (None: record nothing) and a way to
    ask for spawns during the run."""

    seed: int
    end_ns: int
    scheduler: Any = None
    out_dir: Path | None = None

    def request_spawn(self, spec: RobotSpec, at_ns: int) -> None:
        """Ask for a robot to appear at ``at_ns`` (applied at the first instant at or after it)."""
        self.scheduler.schedule_spawn(spec, at_ns)

    def request_despawn(self, robot_id: int, at_ns: int) -> None:
        """Ask for a robot to disappear at ``at_ns``."""
        self.scheduler.schedule_despawn(robot_id, at_ns)


class Federate(ABC):
    """Base class of every simulator the orchestrator steps.

    Subclasses implement ``setup`` and ``step``; per-robot federates override ``spawn``/``despawn``; event-driven
    ones override ``next_time``.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    @abstractmethod
    def setup(self, ctx: SetupContext) -> FederateMeta:
        """Prepare to run and declare ports and timing."""

    def spawn(self, robots: Sequence[RobotSpec]) -> None:  # noqa: B027 - optional hook
        """Create the per-robot parts of these robots (appended after the existing rows, in this order)."""

    def despawn(self, robot_ids: Sequence[int]) -> None:  # noqa: B027 - optional hook
        """Remove the per-robot parts of these robots."""

    @abstractmethod
    def step(self, t_ns: int, inputs: Mapping[str, PortData]) -> Mapping[str, PortData]:
        """Advance to ``t_ns`` using ``inputs`` (latest value per input port) and return outputs by port name."""

    def next_time(self) -> int | None:
        """Event-driven federates: the time of the next event, or None when there is none."""
        return None

    def finalize(self) -> None:  # noqa: B027 - optional hook
        """Release resources; called once, also after a failed run."""


class FederateError(RuntimeError):
    """A federate failed; carries its name, the simulation time and (when known) the robot."""

    def __init__(self, federate: str, t_ns: int, cause: BaseException, robot: str | None = None) -> None:
        self.federate = federate
        self.t_ns = t_ns
        self.cause = cause
        self.robot = robot if robot is not None else getattr(cause, "robot", None)
        where = f" (robot {self.robot})" if self.robot is not None else ""
        super().__init__(
            f"federate '{federate}'{where} failed at t = {t_ns / 1e9:.3f} s: {type(cause).__name__}: {cause}"
        )
