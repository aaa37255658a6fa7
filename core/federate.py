"""The federate interface: one small, transport-agnostic contract between the scheduler and every simulator.

The same six calls are what a remote federate (gRPC, HELICS, ROS 2) serves, so the scheduler never knows where a
federate runs. Data crossing the interface is plain: dicts of numpy arrays per port, robot-indexed in roster order.
"""

from __future__ import annotations

import functools
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .port_guard import PortError, PortGuard
from .ports import FieldSpec, PortSpec, untyped
from .robots import RobotSpec, Roster

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
    that matters). A queued input that is also ``delayed`` receives only what earlier instants published, and
    orders nothing (external commands: they act from the next step, like ``commands``).

    ``fields`` are the fields the federate reads, with the dtype and unit it expects: the scheduler checks them
    against the producer's ``PortSpec`` at setup. ``optional`` inputs may have no producer (the federate then
    receives None); any other input without a producer is a setup error.
    """

    port: str
    delayed: bool = False
    queued: bool = False
    fields: tuple[FieldSpec, ...] = ()
    optional: bool = False


@dataclass(frozen=True)
class FederateMeta:
    """What a federate declares at setup.

    ``period_ns`` set: stepped at ``offset_ns + k * period_ns``. ``period_ns`` None: event-driven, stepped at the
    times ``next_time()`` returns. ``outputs`` are ``PortSpec`` contracts; a bare port name is accepted for
    outside plug-ins (an untyped port, recorded as found, warned about once), with ``units``
    (``"port.field" -> unit``) documenting it. After construction ``units`` is derived from the port contracts
    (every field of every output), so the contracts are the one unit map.
    """

    inputs: tuple[Input, ...] = ()
    outputs: tuple[PortSpec | str, ...] = ()
    period_ns: int | None = None
    offset_ns: int = 0
    units: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.period_ns is not None and self.period_ns <= 0:
            raise ValueError(f"period must be positive, got {self.period_ns} ns")
        if self.offset_ns < 0:
            raise ValueError(f"offset must not be negative, got {self.offset_ns} ns")
        specs = []
        for out in self.outputs:
            if isinstance(out, PortSpec):
                specs.append(out)
            else:
                prefix = f"{out}."
                specs.append(untyped(out, {k[len(prefix):]: u for k, u in self.units.items() if k.startswith(prefix)}))
        names = [spec.name for spec in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"an output port is declared twice in {names}")
        object.__setattr__(self, "outputs", tuple(specs))
        object.__setattr__(self, "units", {f"{spec.name}.{f.name}": f.unit for spec in specs for f in spec.fields})

    @property
    def untyped_outputs(self) -> tuple[str, ...]:
        """The output ports declared by name only (not checked against a contract)."""
        return tuple(spec.name for spec in self.outputs if not spec.typed)  # type: ignore[union-attr]

    @property
    def output_names(self) -> tuple[str, ...]:
        """The names of the output ports."""
        return tuple(spec.name for spec in self.outputs)  # type: ignore[union-attr]

    def output(self, name: str) -> PortSpec:
        """The contract of output port ``name``."""
        for spec in self.outputs:
            if spec.name == name:  # type: ignore[union-attr]
                return spec  # type: ignore[return-value]
        raise KeyError(name)


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


class UntypedPortWarning(UserWarning):
    """A federate declares output ports by name only: they are recorded as found, never checked."""


class Federate(ABC):
    """Base class of every simulator the orchestrator steps.

    Subclasses implement ``setup`` and ``step``; per-robot federates override ``spawn``/``despawn``; event-driven
    ones override ``next_time``.

    Whoever drives a federate (the scheduler, the remote host, a benchmark), its ``step`` is checked: each
    subclass's ``step`` is wrapped once, when the class is defined (``__init_subclass__``), so that what it returns
    passes the port guard (``core.port_guard``) of the ports ``setup`` declared. Driven alone, a federate checks
    every publication against the robots spawned into it; the scheduler installs its own guard
    (``guard_ports``: the run's roster, trust and copies) instead, so a run checks each publication once.
    """

    _port_guard: PortGuard | None = None  # set by ``setup`` (own roster) or by the driver (``guard_ports``)
    _own_roster: Roster | None = None  # the robots spawned into this federate when it is driven alone

    def __init__(self, name: str) -> None:
        self.name = name

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for method, wrap in (("setup", _checked_setup), ("spawn", _counted_spawn), ("despawn", _counted_despawn),
                             ("step", _checked_step)):
            impl = cls.__dict__.get(method)
            if impl is not None and not getattr(impl, "__port_checked__", False):
                wrapped = wrap(impl)
                wrapped.__port_checked__ = True  # type: ignore[attr-defined]
                setattr(cls, method, wrapped)

    def guard_ports(self, guard: PortGuard) -> None:
        """Check this federate's outputs with ``guard`` from now on (a driver with a roster of its own: the
        scheduler). Until then, and when driven alone, it checks against the robots spawned into it."""
        self._port_guard = guard
        self._own_roster = None

    @abstractmethod
    def setup(self, ctx: SetupContext) -> FederateMeta:
        """Prepare to run and declare ports and timing."""

    def spawn(self, robots: Sequence[RobotSpec]) -> None:  # noqa: B027 - optional hook
        """Create the per-robot parts of these robots (appended after the existing rows, in this order)."""

    def despawn(self, robot_ids: Sequence[int]) -> None:  # noqa: B027 - optional hook
        """Remove the per-robot parts of these robots."""

    @abstractmethod
    def step(self, t_ns: int, inputs: Mapping[str, PortData]) -> Mapping[str, PortData]:
        """Advance to ``t_ns`` using ``inputs`` (latest value per input port) and return outputs by port name.

        Implementations return what they publish; callers get it checked against the declared ports (a
        ``FederateError`` with a ``PortError`` naming the port and field when it breaks them)."""

    def next_time(self) -> int | None:
        """Event-driven federates: the time of the next event, or None when there is none."""
        return None

    def finalize(self) -> None:  # noqa: B027 - optional hook
        """Release resources; called once, also after a failed run."""


def _checked_setup(impl: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(impl)
    def setup(self: Federate, ctx: SetupContext) -> Any:
        meta = impl(self, ctx)
        if type(self).setup is setup and isinstance(meta, FederateMeta):  # the outermost override only
            untyped_ports = meta.untyped_outputs
            if untyped_ports:
                warnings.warn(f"federate '{self.name}' ({type(self).__name__}) declares output ports by name only "
                              f"({', '.join(untyped_ports)}): they are recorded as found and never checked; declare "
                              "them as PortSpecs with units (core.ports.port)", UntypedPortWarning, stacklevel=2)
            self._own_roster = Roster()
            self._port_guard = PortGuard(self.name, {spec.name: spec for spec in meta.outputs},  # type: ignore[union-attr]
                                         self._own_roster, trusted=False)
        return meta
    return setup


def _counted_spawn(impl: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(impl)
    def spawn(self: Federate, robots: Sequence[RobotSpec]) -> None:
        impl(self, robots)
        if self._own_roster is not None and type(self).spawn is spawn:
            self._own_roster.add(robots)
    return spawn


def _counted_despawn(impl: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(impl)
    def despawn(self: Federate, robot_ids: Sequence[int]) -> None:
        impl(self, robot_ids)
        if self._own_roster is not None and type(self).despawn is despawn:
            self._own_roster.remove(robot_ids)
    return despawn


def _checked_step(impl: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(impl)
    def step(self: Federate, t_ns: int, inputs: Mapping[str, PortData]) -> Any:
        outputs = impl(self, t_ns, inputs)
        guard = self._port_guard
        # an override's ``super().step()`` is not checked: only what the outermost ``step`` returns is published
        if guard is None or not outputs or type(self).step is not step:
            return outputs
        try:
            return guard.admit(t_ns, outputs)
        except PortError as exc:
            raise FederateError(self.name, t_ns, exc) from None
    return step


def _count_base_hooks() -> None:
    """The base's own ``spawn``/``despawn`` (a subclass that keeps them) count robots like an override does."""
    for method, wrap in (("spawn", _counted_spawn), ("despawn", _counted_despawn)):
        wrapped = wrap(Federate.__dict__[method])
        wrapped.__port_checked__ = True  # type: ignore[attr-defined]
        setattr(Federate, method, wrapped)


_count_base_hooks()


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


def meta_to_dict(meta: FederateMeta) -> dict[str, Any]:
    """FederateMeta as plain data (the remote protocol's setup reply)."""

    def fields(specs: Sequence[FieldSpec]) -> list[list[Any]]:
        return [[f.name, f.dtype, f.unit, f.finite, list(f.categories)] for f in specs]

    return {
        "inputs": [{"port": i.port, "delayed": i.delayed, "queued": i.queued, "optional": i.optional,
                    "fields": fields(i.fields)} for i in meta.inputs],
        "outputs": [{"name": p.name, "index": p.index, "typed": p.typed, "doc": p.doc, "fields": fields(p.fields)}
                    for p in meta.outputs],  # type: ignore[union-attr]
        "period_ns": meta.period_ns,
        "offset_ns": meta.offset_ns,
        "units": dict(meta.units),
    }


def meta_from_dict(data: Mapping[str, Any]) -> FederateMeta:
    """The inverse of ``meta_to_dict``."""

    def fields(rows: Sequence[Sequence[Any]]) -> tuple[FieldSpec, ...]:
        return tuple(FieldSpec(str(row[0]), str(row[1]), str(row[2]), bool(row[3]) if len(row) > 3 else False,
                               tuple(map(str, row[4])) if len(row) > 4 else ()) for row in rows)

    return FederateMeta(
        inputs=tuple(Input(str(i["port"]), bool(i["delayed"]), bool(i["queued"]), fields(i["fields"]),
                           bool(i["optional"])) for i in data["inputs"]),
        outputs=tuple(PortSpec(str(o["name"]), fields(o["fields"]), o["index"], str(o["doc"]), bool(o["typed"]))
                      for o in data["outputs"]),
        period_ns=data["period_ns"],
        offset_ns=int(data["offset_ns"]),
        units=dict(data["units"]),
    )
