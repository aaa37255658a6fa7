"""Command payloads of ``<prefix>/<robot>/cmd``: JSON checked field by field, turned into command-port values, and
handed from the MQTT client's network thread to the bridge's step.

Two forms (``docs/bridges.md``, MQTT): ``{"speed": m/s, "steering": rad}`` or ``{"acceleration": m/s^2,
"yaw_rate": rad/s}``, either field of a form alone allowed, with an optional ``"t"`` (the sender's simulation time
stamp, s). Anything else is counted by reason and dropped; nothing a sender writes can stop the run.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

LOG = logging.getLogger("coopsim.mqtt")

FIELD_OF = {"speed": "speed", "steering": "steer", "acceleration": "accel", "yaw_rate": "yaw_rate"}
"""Payload key -> command-port field (SI both sides: the bridge renames, it does not convert)."""
FORMS = (frozenset({"speed", "steering"}), frozenset({"acceleration", "yaw_rate"}))
LIMITS = {"speed": (0.0, 100.0), "steering": (-1.5, 1.5), "acceleration": (-20.0, 20.0), "yaw_rate": (-10.0, 10.0),
          "t": (0.0, 1.0e9)}
"""Accepted ranges [SI]; beyond them a value is no vehicle's (``out_of_range``). The physics federate then clips to
the vehicle's own limits (max speed, acceleration, steering angle)."""

REASONS = ("too_large", "not_json", "not_object", "duplicate_key", "unknown_key", "wrong_type", "not_finite",
           "mixed_forms", "nothing_given", "out_of_range", "unknown_robot", "not_driven", "no_stamp", "stale_stamp",
           "future_stamp", "duplicate")
"""Why a command message was ignored (``docs/bridges.md``, MQTT: bad payloads)."""
_IDLE_S = 0.1  # lock-step: how often a wait looks up from the inbox (e.g. to resend after a reconnect)


@dataclass(frozen=True)
class Command:
    """One command in command-port terms: NaN where the payload did not give the field; ``t_ns`` its stamp."""

    speed: float
    accel: float
    steer: float
    yaw_rate: float
    t_ns: int | None


class BadCommandError(ValueError):
    """A payload that is no command; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):  # Python's json keeps the last silently; a sender meaning two things is wrong
        raise BadCommandError("duplicate_key")
    return dict(pairs)


def _constant(name: str) -> float:
    return float(name.replace("Infinity", "inf"))  # NaN, Infinity, -Infinity: parsed, then refused as not_finite


def parse_command(payload: bytes, max_bytes: int) -> Command:
    """The command in ``payload``; ``BadCommandError`` naming the first problem found."""
    if len(payload) > max_bytes:
        raise BadCommandError("too_large")
    try:
        data = json.loads(payload.decode("utf-8"), object_pairs_hook=_pairs, parse_constant=_constant)
    except BadCommandError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BadCommandError("not_json") from None
    if not isinstance(data, dict):
        raise BadCommandError("not_object")
    if any(k not in LIMITS for k in data):
        raise BadCommandError("unknown_key")
    values: dict[str, float] = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int | float):  # JSON true is no number
            raise BadCommandError("wrong_type")
        try:
            number = float(value)
        except OverflowError:  # an integer literal beyond any double
            raise BadCommandError("out_of_range") from None
        if not math.isfinite(number):
            raise BadCommandError("not_finite")
        values[key] = number
    given = values.keys() - {"t"}
    if not given:
        raise BadCommandError("nothing_given")
    if not any(given <= form for form in FORMS):
        raise BadCommandError("mixed_forms")
    for key, number in values.items():
        low, high = LIMITS[key]
        if not low <= number <= high:
            raise BadCommandError("out_of_range")
    fields = {FIELD_OF[k]: v for k, v in values.items() if k != "t"}
    t_ns = round(values["t"] * 1e9) if "t" in values else None
    return Command(fields.get("speed", math.nan), fields.get("accel", math.nan), fields.get("steer", math.nan),
                   fields.get("yaw_rate", math.nan), t_ns)


class Tally:
    """Ignored messages counted by reason (thread-safe); the first of each reason is logged, the rest only counted
    (a flood of bad payloads must not flood the log)."""

    def __init__(self, bridge: str) -> None:
        self.bridge = bridge
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def drop(self, reason: str, topic: str, payload: bytes) -> None:
        """Count one ignored message; log it if it is the first of its reason."""
        with self._lock:
            first = reason not in self.counts
            self.counts[reason] = self.counts.get(reason, 0) + 1
        if first:
            shown = payload[:80].decode("utf-8", "backslashreplace") + ("..." if len(payload) > 80 else "")
            LOG.warning("MQTT bridge '%s': ignored a message on %s (%s): %r; further ones of this kind are only "
                        "counted (run.json)", self.bridge, topic, reason, shown)

    def snapshot(self) -> dict[str, int]:
        """The counts so far, sorted by reason."""
        with self._lock:
            return dict(sorted(self.counts.items()))


class LockstepTimeoutError(RuntimeError):
    """A lock-step period's commands did not all arrive in time."""


class CommandInbox:
    """Commands from the network thread (``offer``) to the step (``take_free``, ``open_period``/``wait_period``).

    Free mode keeps the newest command per robot since the last step. Lock-step collects, for the open period, the
    first command per robot whose ``t`` is the period's time; others are dropped by reason, so the run depends only
    on each period's answers (reruns are bit-identical).
    """

    def __init__(self, lockstep: bool, tally: Tally) -> None:
        self.lockstep = lockstep
        self.tally = tally
        self._cond = threading.Condition()
        self._free: dict[int, Command] = {}
        self._period_ns: int | None = None
        self._answers: dict[int, Command] = {}
        self._opened = 0.0
        self.received = 0
        """Valid commands accepted from the broker (before a step took them)."""
        self.superseded = 0
        """Free mode: commands replaced by a newer one of the same robot before a step took them."""
        self.round_trips_s: list[float] = []
        """Lock-step: wall time from opening a period (before publishing it) to its last answer."""
        self.waits = 0

    def offer(self, robot: int, command: Command, topic: str, payload: bytes) -> None:
        """A valid command of ``robot`` (network thread)."""
        with self._cond:
            if not self.lockstep:
                if robot in self._free:
                    self.superseded += 1
                self._free[robot] = command
                self.received += 1
                return
            period = self._period_ns
            if command.t_ns is None:
                reason = "no_stamp"
            elif period is None or command.t_ns < period:
                reason = "stale_stamp"  # an answer to a period that is over
            elif command.t_ns > period:
                reason = "future_stamp"  # no later period has been published
            elif robot in self._answers:
                reason = "duplicate"  # the first answer of a period counts
            else:
                self._answers[robot] = command
                self.received += 1
                self._cond.notify_all()
                return
        self.tally.drop(reason, topic, payload)

    def take_free(self) -> dict[int, Command]:
        """Free mode: the newest command per robot since the last call."""
        with self._cond:
            out, self._free = self._free, {}
        return out

    def open_period(self, t_ns: int) -> None:
        """Lock-step: collect answers stamped ``t_ns`` from now on (call before publishing the period)."""
        with self._cond:
            self._period_ns = t_ns
            self._answers = {}
        self._opened = time.monotonic()

    def wait_period(self, robots: Iterable[int], timeout_s: float, topic_of: Mapping[int, str],
                    on_idle: Callable[[], None] | None = None) -> dict[int, Command]:
        """Lock-step: block until every robot in ``robots`` answered the open period, else
        ``LockstepTimeoutError`` naming the missing topics after ``timeout_s`` of wall time. ``on_idle`` is called
        about every 0.1 s while waiting (outside the lock)."""
        wanted = set(robots)
        if not wanted:
            return {}
        deadline = time.monotonic() + timeout_s
        with self._cond:
            if not wanted <= self._answers.keys():
                self.waits += 1
            while not wanted <= self._answers.keys():
                left = deadline - time.monotonic()
                if left <= 0:
                    t_ns = self._period_ns or 0
                    missing = sorted(topic_of[r] for r in wanted - self._answers.keys())
                    raise LockstepTimeoutError(
                        f"lock-step: no command with \"t\": {t_ns / 1e9:.9f} on {', '.join(missing)} within "
                        f"lockstep_timeout_s = {timeout_s:g} s (ignored so far: {self.tally.snapshot() or 'none'})")
                self._cond.wait(min(left, _IDLE_S))
                if on_idle is not None and not wanted <= self._answers.keys():
                    self._cond.release()  # the network thread must be able to offer meanwhile
                    try:
                        on_idle()
                    finally:
                        self._cond.acquire()
            out = {r: self._answers[r] for r in wanted}
        self.round_trips_s.append(time.monotonic() - self._opened)
        return out
