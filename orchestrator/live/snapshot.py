"""The scheduler's side of the live view: an observer that hands snapshots to a sender thread.

It must neither slow an unwatched run nor change any run, so:

- with nobody watching, ``on_instant`` reads one boolean and returns;
- while watched, a snapshot is taken at most ``rate_hz`` times per second of wall time, and only on an instant where
  ``trigger`` (physics) stepped, so its robot states are exactly the rows the trace records at that time;
- a snapshot holds references to the published port values, never copies: bus values are immutable once published
  (see the scheduler), so the sender thread may read them at leisure;
- the hand-over is a ``Mailbox``: the newest snapshot replaces an unread one (latest wins), so nothing queues up
  when the sender or a browser is slow. V2X log values between snapshots are kept (for the link counts) but only
  those within ``window_ns`` of simulation time of the newest.

The observer writes nothing the simulation reads: what is watched never changes what is computed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.robots import RobotSpec

from ..engine.scheduler import BaseObserver, Scheduler

DEFAULT_RATE_HZ = 20.0
"""Snapshots per second of wall time while someone watches: smooth enough for the eye, cheap for the run."""

DEFAULT_WINDOW_S = 1.0
"""V2X links are drawn from the receptions and losses of the last second of simulation time."""


@dataclass
class Snapshot:
    """What the sender thread turns into one frame: port values as published at ``t_ns`` (references)."""

    t_ns: int
    end_ns: int
    state: dict[str, Any] | None
    v2x: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (t_ns published, v2x or cam_rx value)
    roster_version: int = 0
    final: bool = False  # the run ended at t_ns (no more frames follow)


class Mailbox:
    """A one-slot, latest-wins hand-over between the scheduler thread and the sender thread."""

    def __init__(self, window_ns: int) -> None:
        self.window_ns = window_ns
        self._cond = threading.Condition()
        self._item: Snapshot | None = None
        self._closed = False

    def put(self, snap: Snapshot) -> None:
        """Offer ``snap``; an unread snapshot is replaced, its V2X values carried over (within the window)."""
        with self._cond:
            old = self._item
            if old is not None and old.v2x:
                keep_from = snap.t_ns - self.window_ns
                snap.v2x[:0] = [item for item in old.v2x if item[0] > keep_from]
            self._item = snap
            self._cond.notify_all()

    def take(self, timeout: float | None = None) -> Snapshot | None:
        """The newest unread snapshot, waiting up to ``timeout`` s (None when none came or the box is closed)."""
        with self._cond:
            if self._item is None and not self._closed:
                self._cond.wait(timeout)
            item, self._item = self._item, None
            return item

    def close(self) -> None:
        """Wake the reader for good."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


class Watchers:
    """How many viewers are connected; ``watched`` is the one flag the hot loop reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self.watched = False

    def joined(self) -> None:
        with self._lock:
            self._count += 1
            self.watched = True

    def left(self) -> None:
        with self._lock:
            self._count = max(self._count - 1, 0)
            self.watched = self._count > 0

    @property
    def count(self) -> int:
        return self._count


class RosterBook:
    """The live robots' specs, written by the scheduler thread on spawns and despawns, read by the sender thread
    only when ``version`` moved (so a fleet spawned one robot at a time costs O(1) per robot here)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._specs: dict[int, RobotSpec] = {}
        self.version = 0

    def add(self, robots: Sequence[RobotSpec]) -> None:
        with self._lock:
            for spec in robots:
                self._specs[spec.id] = spec
            self.version += 1

    def remove(self, robot_ids: Sequence[int]) -> None:
        with self._lock:
            for rid in robot_ids:
                self._specs.pop(int(rid), None)
            self.version += 1

    def specs(self) -> tuple[int, list[RobotSpec]]:
        """The version and the live robots' specs in spawn order."""
        with self._lock:
            return self.version, list(self._specs.values())


class LiveObserver(BaseObserver):
    """Offers a snapshot of the run to ``mailbox`` at most ``rate_hz`` times per wall-clock second while
    ``watchers.watched`` holds; keeps ``roster`` up to date on every spawn and despawn."""

    def __init__(self, mailbox: Mailbox, watchers: Watchers, roster: RosterBook,
                 rate_hz: float = DEFAULT_RATE_HZ, trigger: str = "physics",
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if rate_hz <= 0:
            raise ValueError(f"rate_hz must be positive, got {rate_hz}")
        self.mailbox = mailbox
        self.watchers = watchers
        self.interval_s = 1.0 / rate_hz
        self.trigger = trigger
        self.roster = roster
        self._clock = clock
        self._next_wall = 0.0
        self._end_ns = 0
        self._v2x: list[tuple[int, dict[str, Any]]] = []
        self._last_v2x: object = None
        self._v2x_port = "v2x"
        self._bus: dict[str, Any] = {}
        self.snapshots = 0  # offered so far (for tests and the run's record)

    def on_start(self, scheduler: Scheduler) -> None:
        self._end_ns = scheduler.end_ns
        self._bus = scheduler.bus  # the live dict: read only at the end, for the final frame
        # the V2X log when the run records it; else the deliveries alone (received, no losses)
        self._v2x_port = "v2x" if "v2x" in scheduler.ports else "cam_rx"

    def on_spawn(self, t_ns: int, robots: Sequence[RobotSpec]) -> None:
        self.roster.add(robots)

    def on_despawn(self, t_ns: int, robot_ids: Sequence[int]) -> None:
        self.roster.remove(robot_ids)

    def on_instant(self, t_ns: int, bus: dict, stepped: Sequence[str]) -> None:
        if not self.watchers.watched:  # the whole cost of an unwatched run
            return
        log = bus.get(self._v2x_port)
        if log is not None and log is not self._last_v2x:  # a fresh publication (values are never reused)
            self._last_v2x = log
            self._v2x.append((t_ns, log))
        now = self._clock()
        if now < self._next_wall or self.trigger not in stepped:
            return
        self._next_wall = now + self.interval_s
        self._offer(t_ns, bus, final=False)

    def _offer(self, t_ns: int, bus: dict, final: bool) -> None:
        keep_from = t_ns - self.mailbox.window_ns
        v2x = [item for item in self._v2x if item[0] > keep_from]
        self._v2x = []
        self.mailbox.put(Snapshot(t_ns, self._end_ns, bus.get("state"), v2x, self.roster.version, final))
        self.snapshots += 1

    def on_end(self, t_ns: int, error: BaseException | None) -> None:
        # the last state, whoever watches: a viewer that connects late still sees where the run ended
        self._offer(t_ns, self._bus, final=True)
