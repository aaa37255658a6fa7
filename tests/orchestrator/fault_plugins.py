"""Misbehaving plug-in federates for the fault tests (``type: tests.orchestrator.fault_plugins:Name``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from core.federate import Federate, FederateMeta, Input, SetupContext
from core.ports import port
from core.timebase import seconds_to_ns

SPEEDS = port("speeds", {"v_kmh": "km/h"}, doc="each robot's speed in km/h", finite=True)


class _Misbehaving(Federate):
    """Reads the state every 50 ms; from ``at_s`` on, does what its subclass does wrong."""

    outputs: tuple = ()

    def __init__(self, name: str, at_s: float = 0.5) -> None:
        super().__init__(name)
        self.at_ns = seconds_to_ns(at_s)

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(inputs=(Input("state"),), outputs=self.outputs, period_ns=seconds_to_ns(0.05))

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Any:
        state = inputs["state"]
        good = {"speeds": {"id": state["id"], "v_kmh": state["v"] * 3.6}} if self.outputs else {}
        return self.wrong(state, good) if t_ns >= self.at_ns else good

    def wrong(self, state: Mapping[str, Any], good: dict) -> Any:
        raise NotImplementedError


class Sleeper(_Misbehaving):
    """Blocks in a call that never returns."""

    def wrong(self, state, good):
        time.sleep(3600)


class Spinner(_Misbehaving):
    """Loops forever in Python."""

    def wrong(self, state, good):
        while True:
            pass


class NotAMapping(_Misbehaving):
    """Returns a list instead of port -> data."""

    outputs = (SPEEDS,)

    def wrong(self, state, good):
        return [1, 2, 3]


class NanSpeeds(_Misbehaving):
    """Publishes NaN on a port whose contract forbids it."""

    outputs = (SPEEDS,)

    def wrong(self, state, good):
        return {"speeds": {"id": state["id"], "v_kmh": np.full(len(state["id"]), np.nan)}}


class ShortRows(_Misbehaving):
    """Publishes one row fewer than there are robots."""

    outputs = (SPEEDS,)

    def wrong(self, state, good):
        return {"speeds": {"id": state["id"][:-1], "v_kmh": good["speeds"]["v_kmh"][:-1]}}


class InputMutator(_Misbehaving):
    """Writes NaN into the state it was handed."""

    def wrong(self, state, good):
        state["x"][:] = np.nan
        return good


class ClaimsState(Federate):
    """Declares the built-in ``state`` port as its own."""

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(outputs=("state",), period_ns=seconds_to_ns(0.05))

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Any:
        return {}
