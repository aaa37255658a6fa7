"""Federates used by the tests as plug-ins (``type: tests.orchestrator.plugins:Name`` in a scenario)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.federate import Federate, FederateMeta, Input, SetupContext
from orchestrator.timebase import seconds_to_ns


class FailAt(Federate):
    """Reads the state and raises at a given simulation time."""

    def __init__(self, name: str, at_s: float = 1.0) -> None:
        super().__init__(name)
        self.at_ns = seconds_to_ns(at_s)

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(inputs=(Input("state"),), period_ns=seconds_to_ns(0.01))

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        if t_ns >= self.at_ns:
            raise RuntimeError("sensor driver lost")
        return {}
