"""Waiting for a condition in tests: poll it until it holds, with a deadline generous enough that a loaded machine
never meets it (the deadline catches a hang; it is not a measure of speed)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEADLINE_S = 60.0


def wait_until(condition: Callable[[], T], what: str, timeout_s: float = DEADLINE_S, poll_s: float = 0.02) -> T:
    """The first truthy value of ``condition()``, polled every ``poll_s``; fails naming ``what`` after
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s:.0f} s for {what}")
        time.sleep(poll_s)
