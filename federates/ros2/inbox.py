"""Commands from cmd_vel topics, handed from the ROS 2 executor's thread to the bridge's step.

Free mode takes the newest command per robot that arrived since the last step. Lock-step waits, each period, until
every robot the bridge drives has a command stamped with exactly that period's time; anything else is counted and
dropped, so what the run sees depends only on the answers for each period (reruns are bit-identical).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

MAX_SPEED_MPS = 1000.0
MAX_YAW_RATE_RADPS = 100.0
"""Beyond these a command is no vehicle's and is dropped (``out_of_range``) rather than handed to the physics."""


@dataclass(frozen=True)
class Command:
    """One cmd_vel message: ``speed`` [m/s] (linear.x) and ``yaw_rate`` [rad/s] (angular.z)."""

    speed: float
    yaw_rate: float


class LockstepTimeoutError(RuntimeError):
    """A lock-step period's commands did not all arrive in time."""


class CommandInbox:
    """Thread-safe: ``offer`` runs in the executor's thread, the rest in the bridge's."""

    def __init__(self, lockstep: bool) -> None:
        self.lockstep = lockstep
        self._cond = threading.Condition()
        self._free: dict[int, Command] = {}  # free mode: newest per robot since the last step
        self._waiting_ns: int | None = None  # lock-step: the period whose commands are collected
        self._answers: dict[int, Command] = {}
        self._opened = 0.0
        self.received = 0
        """Commands taken (given to the run)."""
        self.superseded = 0
        """Free mode: commands replaced by a newer one of the same robot before a step took them."""
        self.malformed: dict[str, int] = {}
        """Messages dropped, by reason."""
        self.waits = 0
        """Lock-step periods that had to wait for at least one answer after publishing."""
        self.wait_s = 0.0
        self.round_trips_s: list[float] = []
        """Lock-step: wall time from the start of publishing a period to its last answer (periods with driven
        robots)."""

    def _drop(self, reason: str) -> None:
        self.malformed[reason] = self.malformed.get(reason, 0) + 1

    def offer(self, robot: int, stamp_ns: int | None, speed: float, yaw_rate: float) -> None:
        """A cmd_vel message of ``robot`` (``stamp_ns``: its header stamp, None for a plain Twist)."""
        if not (math.isfinite(speed) and math.isfinite(yaw_rate)):
            with self._cond:
                self._drop("not_finite")
            return
        if abs(speed) > MAX_SPEED_MPS or abs(yaw_rate) > MAX_YAW_RATE_RADPS:
            with self._cond:
                self._drop("out_of_range")
            return
        command = Command(float(speed), float(yaw_rate))
        with self._cond:
            if not self.lockstep:
                if robot in self._free:
                    self.superseded += 1
                self._free[robot] = command
                return
            if stamp_ns is None:
                self._drop("no_stamp")
            elif self._waiting_ns is None or stamp_ns < self._waiting_ns:
                self._drop("stale_stamp")  # an answer for a period that is over
            elif stamp_ns > self._waiting_ns:
                self._drop("future_stamp")  # no period after the current one has been published
            elif robot in self._answers:
                self._drop("duplicate")  # the first answer of a period counts
            else:
                self._answers[robot] = command
                self._cond.notify_all()

    def take_free(self) -> dict[int, Command]:
        """Free mode: the newest command per robot since the last call."""
        with self._cond:
            out, self._free = self._free, {}
        self.received += len(out)
        return out

    def open_period(self, t_ns: int) -> None:
        """Lock-step: from now on, answers stamped ``t_ns`` are collected (call before publishing the period)."""
        with self._cond:
            self._waiting_ns = t_ns
            self._answers = {}
        self._opened = time.monotonic()

    def wait_period(self, robots: Iterable[int], timeout_s: float, topic_of: dict[int, str]) -> dict[int, Command]:
        """Lock-step: block until every robot in ``robots`` answered the open period; ``LockstepTimeoutError`` naming
        the missing topics after ``timeout_s``."""
        wanted = set(robots)
        if not wanted:
            return {}
        started = time.monotonic()
        deadline = started + timeout_s
        with self._cond:
            t_ns = self._waiting_ns
            if not wanted <= self._answers.keys():
                self.waits += 1
            while not wanted <= self._answers.keys():
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sorted(topic_of[r] for r in wanted - self._answers.keys())
                    raise LockstepTimeoutError(
                        f"lock-step: no geometry_msgs/TwistStamped with header.stamp = {t_ns / 1e9:.9f} s on "
                        f"{', '.join(missing)} within lockstep_timeout_s = {timeout_s:g} s "
                        f"(dropped so far: {self.malformed or 'none'})")
                self._cond.wait(left)
            out = {r: self._answers[r] for r in wanted}
        now = time.monotonic()
        self.wait_s += now - started
        self.round_trips_s.append(now - self._opened)
        self.received += len(out)
        return out
