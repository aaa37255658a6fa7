"""The central time-stepping scheduler.

Conservative and deterministic: at every grant the scheduler picks the earliest time any federate (or a pending
spawn/despawn) needs, applies the spawns due then, and steps the federates due at that instant in dependency order:
a federate runs after every federate whose output it reads without delay. Ties between independent federates keep
the order in which they were added (the documented stable rule). Observers (recorder, progress bar) are called
after each instant; they never change the loop.

Values on the bus are never mutated after they are published (federates publish fresh arrays), so observers and
delayed inputs may keep references instead of copies.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from typing import Protocol

from core.federate import Federate, FederateError, FederateMeta, PortData, SetupContext
from core.ports import ContractError, PortSpec
from core.robots import RobotSpec, Roster

from .failures import federate_failure
from .ordering import SchedulerError, check_contracts, dependency_order
from .pacing import RealtimePacer
from .port_guard import PortGuard, frozen_inputs
from .run_control import RunControl


class Observer(Protocol):
    """Hooks into the run; every method is optional in practice (see ``BaseObserver``)."""

    def on_start(self, scheduler: Scheduler) -> None: ...
    def on_instant(self, t_ns: int, bus: dict[str, PortData], stepped: Sequence[str]) -> None: ...
    def on_spawn(self, t_ns: int, robots: Sequence[RobotSpec]) -> None: ...
    def on_despawn(self, t_ns: int, robot_ids: Sequence[int]) -> None: ...
    def on_end(self, t_ns: int, error: BaseException | None) -> None: ...


class BaseObserver:
    """An observer that does nothing; subclass and override what you need."""

    def on_start(self, scheduler: Scheduler) -> None:
        pass

    def on_instant(self, t_ns: int, bus: dict[str, PortData], stepped: Sequence[str]) -> None:
        pass

    def on_spawn(self, t_ns: int, robots: Sequence[RobotSpec]) -> None:
        pass

    def on_despawn(self, t_ns: int, robot_ids: Sequence[int]) -> None:
        pass

    def on_end(self, t_ns: int, error: BaseException | None) -> None:
        pass


@dataclass
class _Slot:
    """Scheduler-side state of one federate."""

    federate: Federate
    meta: FederateMeta
    rank: int = 0
    next_ns: int | None = None
    inputs: tuple[tuple[str, bool], ...] = ()
    guard: PortGuard | None = None
    queues: dict[str, list] | None = None  # queued input port -> values published since this federate's last step
    delayed_queues: frozenset[str] = frozenset()  # queued inputs that also are delayed: entries are (t_ns, value)
    wall_s: float = 0.0  # wall time spent in this federate's step()


class Scheduler:
    """Steps federates in integer-nanosecond time from 0 to ``end_ns`` inclusive."""

    def __init__(self, end_ns: int, seed: int = 0, out_dir: Path | None = None,
                 control: RunControl | None = None) -> None:
        if end_ns < 0:
            raise ValueError("end time must not be negative")
        self.end_ns = end_ns
        self.seed = seed
        self.out_dir = out_dir
        self.now_ns = 0
        self.roster = Roster()
        self.bus: dict[str, PortData] = {}
        self._federates: list[Federate] = []
        self._slots: list[_Slot] = []
        self._observers: list[Observer] = []
        self._pending: list[tuple[int, int, str, object]] = []  # (time, sequence, kind, payload)
        self._sequence = 0
        self._set_up = False
        self._subscribers: dict[str, list[tuple[list, bool]]] = {}
        self.ports: dict[str, tuple[str, PortSpec]] = {}  # port -> (producer, contract), known after setup
        self._trusted: set[str] = set()  # federates whose ports are checked once per roster change, not per step
        self.written_now: list[str] = []  # ports written at the current instant (recorders read only those)
        self.control = control  # interrupts and the step watchdog (``run_control``); None: neither
        self.pacer: RealtimePacer | None = None  # real-time pacing (``pacing``); None: as fast as possible
        self.interrupted: str | None = None  # the signal that stopped the run before its end, if any
        self._frozen: dict[str, tuple] = {}  # port -> (bus value, its read-only copy) for untrusted readers

    # -- building -------------------------------------------------------------------------------------------
    def add(self, federate: Federate, trusted: bool = False) -> Federate:
        """Add a federate; names must be unique. Insertion order is the tie-break among independent federates.
        ``trusted`` (the built-in federates): its outputs are checked once per roster change instead of at every
        publication (``port_guard``)."""
        if any(f.name == federate.name for f in self._federates):
            raise SchedulerError(f"two federates are named '{federate.name}'")
        self._federates.append(federate)
        if trusted:
            self._trusted.add(federate.name)
        return federate

    def observe(self, observer: Observer) -> None:
        """Register an observer (called after each instant, on spawns and at the end)."""
        self._observers.append(observer)

    def schedule_spawn(self, spec: RobotSpec, at_ns: int) -> None:
        """Spawn a robot at ``at_ns`` (or at the next instant when that time has passed)."""
        self._push(max(at_ns, self.now_ns), "spawn", [spec])

    def schedule_spawns(self, specs: Sequence[RobotSpec], at_ns: int) -> None:
        """Spawn robots together at ``at_ns``, in the given order (one queue entry for all of them)."""
        if specs:
            self._push(max(at_ns, self.now_ns), "spawn", list(specs))

    def schedule_despawn(self, robot_id: int, at_ns: int) -> None:
        """Despawn a robot at ``at_ns`` (or at the next instant when that time has passed)."""
        self._push(max(at_ns, self.now_ns), "despawn", robot_id)

    def _push(self, t_ns: int, kind: str, payload: object) -> None:
        heapq.heappush(self._pending, (t_ns, self._sequence, kind, payload))
        self._sequence += 1

    @property
    def wall_by_federate(self) -> dict[str, float]:
        """Wall time [s] each federate spent in ``step`` so far (where the time goes)."""
        return {slot.federate.name: slot.wall_s for slot in self._slots}

    @property
    def order(self) -> list[str]:
        """Federate names in the order they run within an instant."""
        return [slot.federate.name for slot in self._slots]

    def setup(self) -> None:
        """Call ``setup`` on every federate and fix the execution order (raises on cycles)."""
        ctx = SetupContext(seed=self.seed, end_ns=self.end_ns, scheduler=self, out_dir=self.out_dir)
        metas = {}
        for k, fed in enumerate(self._federates):
            try:
                meta = fed.setup(ctx)
            except BaseException as exc:
                # those already set up (threads, connections, brokers) and the failing one are finalized
                for done in self._federates[: k + 1]:
                    with contextlib.suppress(BaseException):
                        done.finalize()
                raise federate_failure(fed.name, 0, exc, self.control) from exc
            if self.control is not None:
                self.control.reclaim(f"federate '{fed.name}'", 0)
            if not isinstance(meta, FederateMeta):
                raise SchedulerError(f"federate '{fed.name}' setup() must return FederateMeta, got {meta!r}")
            metas[fed.name] = meta
        order = dependency_order(metas)
        try:
            self.ports = check_contracts(metas)
        except ContractError:
            for fed in self._federates:
                with contextlib.suppress(Exception):
                    fed.finalize()
            raise
        by_name = {f.name: f for f in self._federates}
        self._slots = []
        for rank, name in enumerate(order):
            meta = metas[name]
            trusted = name in self._trusted
            slot = _Slot(
                by_name[name], meta, rank,
                inputs=tuple((i.port, i.delayed) for i in meta.inputs if not i.queued),
                # the federate's public step() checks with it: the run's roster, copies of untrusted outputs
                guard=PortGuard(name, {spec.name: spec for spec in meta.outputs}, self.roster,  # type: ignore[union-attr]
                                trusted, copies=not trusted),
                queues={i.port: [] for i in meta.inputs if i.queued} or None,
                delayed_queues=frozenset(i.port for i in meta.inputs if i.queued and i.delayed),
            )
            by_name[name].guard_ports(slot.guard)  # type: ignore[arg-type]
            try:
                slot.next_ns = meta.offset_ns if meta.period_ns is not None else by_name[name].next_time()
            except BaseException as exc:
                raise federate_failure(name, 0, exc, self.control) from exc
            self._slots.append(slot)
        # port -> the queues of its queued consumers (and whether delayed), filled whenever the port is written
        self._subscribers: dict[str, list[tuple[list, bool]]] = {}
        for slot in self._slots:
            for port, queue in (slot.queues or {}).items():
                self._subscribers.setdefault(port, []).append((queue, port in slot.delayed_queues))
        self._set_up = True

    # -- running --------------------------------------------------------------------------------------------
    def _next_grant(self) -> int | None:
        times = [s.next_ns for s in self._slots if s.next_ns is not None]
        if self._pending:
            times.append(self._pending[0][0])
        return min(times) if times else None

    def _apply_pending(self, t_ns: int) -> None:
        spawns: list[RobotSpec] = []
        despawns: list[int] = []
        while self._pending and self._pending[0][0] <= t_ns:
            _, _, kind, payload = heapq.heappop(self._pending)
            if kind == "spawn":
                if despawns:  # keep the requested order: flush despawns first
                    self._despawn(t_ns, despawns)
                    despawns = []
                spawns.extend(payload)  # type: ignore[arg-type]
            else:
                if spawns:
                    self._spawn(t_ns, spawns)
                    spawns = []
                despawns.append(payload)  # type: ignore[arg-type]
        if spawns:
            self._spawn(t_ns, spawns)
        if despawns:
            self._despawn(t_ns, despawns)

    def _spawn(self, t_ns: int, specs: list[RobotSpec]) -> None:
        added = self.roster.add(specs)
        for slot in self._slots:
            try:
                slot.federate.spawn(added)
            except BaseException as exc:
                raise federate_failure(slot.federate.name, t_ns, exc, self.control,
                                       robot=", ".join(s.name for s in added)) from exc
        for obs in self._observers:
            obs.on_spawn(t_ns, added)

    def _despawn(self, t_ns: int, robot_ids: list[int]) -> None:
        removed = self.roster.remove(robot_ids)
        if not removed:
            return
        for slot in self._slots:
            try:
                slot.federate.despawn(removed)
            except BaseException as exc:
                raise federate_failure(slot.federate.name, t_ns, exc, self.control) from exc
        for obs in self._observers:
            obs.on_despawn(t_ns, removed)

    def run(self, observers: Iterable[Observer] = ()) -> int:
        """Run to the end time; returns the last granted time. Federates are finalized also on failure."""
        for obs in observers:
            self.observe(obs)
        if not self._set_up:
            self.setup()  # a failing setup raises FederateError before anything ran
        for obs in self._observers:
            obs.on_start(self)
        error: BaseException | None = None
        # What set-up made (scenario models, federates, compiled kernels) lives through the run: the collector need
        # not walk it at each collection of the loop; it goes back to the collector's care when the loop ends.
        gc.freeze()
        try:
            self._loop()
        except BaseException as exc:
            error = exc
        finally:
            gc.unfreeze()
        # every federate is finalized and every observer closes its files, whatever failed; the first error wins
        for slot in self._slots:
            try:
                slot.federate.finalize()
            except BaseException as exc:  # even sys.exit in a finalize: the others still close
                if error is None:
                    error = federate_failure(slot.federate.name, self.now_ns, exc, self.control)
        for obs in self._observers:
            try:
                obs.on_end(self.now_ns, error)
            except Exception as exc:
                if error is None:
                    error = exc
        if error is not None:
            raise error
        return self.now_ns

    def advance(self, until_ns: int) -> int:
        """Run the instants up to ``until_ns`` (never past the end time) and stop there with every federate still
        running: for a caller that steps a run piece by piece (the Gymnasium environment, ``orchestrator.gym``).
        Sets up first when needed; no observer is started, nothing is finalized (``run`` does both). Returns the
        last granted time."""
        if not self._set_up:
            self.setup()
        self._loop(until_ns)
        return self.now_ns

    def _loop(self, until_ns: int | None = None) -> None:
        bus = self.bus
        slots = self._slots
        observers = self._observers
        subscribers = self._subscribers
        end_ns = self.end_ns if until_ns is None else min(until_ns, self.end_ns)
        control = self.control
        pacer = self.pacer
        while True:
            if control is not None and control.stop_requested is not None:
                self.interrupted = control.stop_requested  # stop between instants: every trace ends at now_ns
                return
            t_ns = self._next_grant()
            if t_ns is None or t_ns > end_ns:
                return
            self.now_ns = t_ns
            if pacer is not None:
                pacer.wait(t_ns)
            if self._pending and self._pending[0][0] <= t_ns:
                self._apply_pending(t_ns)
            previous = bus.copy()  # what delayed inputs see: the values from before this instant
            stepped = []
            written: list[str] = []
            self.written_now = written
            for slot in slots:
                if slot.next_ns != t_ns:
                    continue
                fed = slot.federate
                inputs = {port: (previous if delayed else bus).get(port) for port, delayed in slot.inputs}
                if slot.queues:
                    for port, queue in slot.queues.items():
                        if port in slot.delayed_queues:  # only what earlier instants published
                            inputs[port] = [value for at, value in queue if at < t_ns]
                            queue[:] = [item for item in queue if item[0] >= t_ns]
                        else:
                            inputs[port] = queue.copy()
                            queue.clear()
                trusted = slot.guard.trusted  # type: ignore[union-attr]
                if not trusted:
                    inputs = frozen_inputs(inputs, self._frozen)
                started = perf_counter()
                if control is not None:
                    control.entering(fed.name, started)
                try:
                    outputs = fed.step(t_ns, inputs)
                except BaseException as exc:
                    raise federate_failure(fed.name, t_ns, exc, control) from exc
                finally:
                    if control is not None:
                        control.left()
                        if not trusted:  # its handlers, not the plug-in's (built-ins: once per instant, below)
                            control.reclaim(f"federate '{fed.name}'", t_ns)
                slot.wall_s += perf_counter() - started
                if outputs:  # checked by the federate's step() (its guard), copied there when untrusted
                    bus.update(outputs)
                    written.extend(outputs)
                    if subscribers:
                        for port, value in outputs.items():
                            for queue, delayed in subscribers.get(port, ()):
                                queue.append((t_ns, value) if delayed else value)
                stepped.append(fed.name)
                meta = slot.meta
                if meta.period_ns is not None:
                    slot.next_ns = t_ns + meta.period_ns
                else:
                    try:
                        nxt = fed.next_time()
                    except BaseException as exc:
                        raise federate_failure(fed.name, t_ns, exc, control) from exc
                    if nxt is not None and nxt <= t_ns:
                        raise FederateError(
                            fed.name, t_ns, SchedulerError(f"next_time() {nxt} ns is not after now ({t_ns} ns)")
                        )
                    slot.next_ns = nxt
            if control is not None:  # a plug-in law, channel or vehicle model inside a built-in federate
                control.reclaim(stepped, t_ns)
            for obs in observers:
                obs.on_instant(t_ns, bus, stepped)
            if pacer is not None:
                pacer.finished(t_ns)
