"""A federate that fails on purpose, for the batch retry tests (``type: tests.orchestrator.flaky_plugins:Flaky``)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.federate import Federate, FederateMeta, Input, SetupContext
from core.timebase import seconds_to_ns


class Flaky(Federate):
    """Reads the state and raises at t = 1 s: never (``mode: ok``), on the first attempt only (``once``: the first
    attempt leaves the file ``marker``, a later one finds it), or every time (``always``)."""

    def __init__(self, name: str, mode: str = "ok", marker: str = "") -> None:
        super().__init__(name)
        self.mode = mode
        self.marker = Path(marker)

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(inputs=(Input("state"),), period_ns=seconds_to_ns(0.1))

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        if t_ns < seconds_to_ns(1.0) or self.mode == "ok":
            return {}
        if self.mode == "once":
            if self.marker.exists():
                return {}
            self.marker.write_text("failed once")
        raise RuntimeError(f"flaky federate failed ({self.mode})")


class Slow(Federate):
    """Sleeps ``delay_s`` of wall-clock time every ``period_s`` of simulated time: a run that lasts long enough to
    be interrupted, however fast the simulation is."""

    def __init__(self, name: str, delay_s: float = 0.05, period_s: float = 0.1) -> None:
        super().__init__(name)
        self.delay_s = delay_s
        self.period_ns = seconds_to_ns(period_s)

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(inputs=(Input("state"),), period_ns=self.period_ns)

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        time.sleep(self.delay_s)
        return {}


class KillProcess(Federate):
    """With ``kill``, ends its whole process at t = 1 s the first time (no marker file yet): a worker that dies
    mid-run."""

    def __init__(self, name: str, marker: str = "", kill: bool = False) -> None:
        super().__init__(name)
        self.marker = Path(marker)
        self.kill = kill

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(inputs=(Input("state"),), period_ns=seconds_to_ns(0.1))

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        if self.kill and t_ns >= seconds_to_ns(1.0) and not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            os._exit(1)
        return {}
