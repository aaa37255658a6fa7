"""A federate slower than real time, to try the pacer's lateness report."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from core.federate import Federate, FederateMeta, SetupContext
from core.timebase import seconds_to_ns


class Sluggish(Federate):
    """Takes ``busy_s`` of wall time every ``period_s`` of simulation time."""

    def __init__(self, name: str, period_s: float = 0.01, busy_s: float = 0.02) -> None:
        super().__init__(name)
        self.period_ns, self.busy_s = seconds_to_ns(period_s), busy_s

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(period_ns=self.period_ns)

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        time.sleep(self.busy_s)
        return {}
