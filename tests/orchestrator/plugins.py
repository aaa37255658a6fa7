"""Plug-ins used by the tests (``type: tests.orchestrator.plugins:Name`` in a scenario): federates, a leader
profile and a class of the wrong kind."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from controllers.profiles import LeaderProfile
from core.federate import Federate, FederateMeta, Input, SetupContext
from core.timebase import seconds_to_ns


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


class Probe(Federate):
    """Reads the state (and the queued receptions) every ``period_s`` and publishes what it saw, scaled by
    ``gain``; raises at ``fail_at_s`` and stalls for ``stall_s`` (3 s) at ``stall_at_s`` when given, first creating
    the file ``stall_note`` when given (so that a test waits for the stall by an event, not a sleep). Run in
    process or in a ``coopsim host``."""

    def __init__(self, name: str, period_s: float = 0.02, gain: float = 1.0, fail_at_s: float | None = None,
                 stall_at_s: float | None = None, stall_s: float = 3.0, stall_note: str | None = None) -> None:
        super().__init__(name)
        self.stall_at_ns = None if stall_at_s is None else seconds_to_ns(stall_at_s)
        self.stall_s = stall_s
        self.stall_note = stall_note
        self.period_ns = seconds_to_ns(period_s)
        self.gain = gain
        self.fail_at_ns = None if fail_at_s is None else seconds_to_ns(fail_at_s)
        self.robots: list[int] = []

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(inputs=(Input("state"), Input("cam_rx", queued=True)), outputs=("probe",),
                            period_ns=self.period_ns, units={"probe.v_scaled": "m/s"})

    def spawn(self, robots: Any) -> None:
        self.robots += [r.id for r in robots]

    def despawn(self, robot_ids: Any) -> None:
        self.robots = [r for r in self.robots if r not in set(robot_ids)]

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        if self.fail_at_ns is not None and t_ns >= self.fail_at_ns:
            raise RuntimeError("probe cable unplugged")
        if self.stall_at_ns is not None and t_ns == self.stall_at_ns:
            if self.stall_note:
                open(self.stall_note, "w").close()
            time.sleep(self.stall_s)  # a simulator that stops answering for a while
        state = inputs["state"]
        receptions = sum(len(rx["receiver"]) for rx in inputs.get("cam_rx") or () if rx is not None)
        return {"probe": {"id": state["id"], "v_scaled": self.gain * state["v"], "yaw": state["yaw"].copy(),
                          "receptions": np.array([receptions], np.int64), "robots": np.array(self.robots, np.int64)}}


class Sink(Federate):
    """Collects every value of ``port`` (queued input) and writes them to ``path`` (.npz) at finalize."""

    def __init__(self, name: str, path: str, port: str = "probe") -> None:
        super().__init__(name)
        self.path = path
        self.port = port
        self.seen: dict[str, list[np.ndarray]] = {}

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(inputs=(Input(self.port, queued=True),), period_ns=seconds_to_ns(0.05))

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        for value in inputs.get(self.port) or ():
            for key, array in value.items():
                self.seen.setdefault(key, []).append(np.asarray(array))
        return {}

    def finalize(self) -> None:
        np.savez(self.path, **{k: np.concatenate(v) for k, v in self.seen.items()})


class Stop(LeaderProfile):
    """A leader profile plug-in: cruise at ``speed_mps``, stop at ``stop_at_s`` (a step, for validation tests)."""

    class Params(BaseModel):
        """Its own parameters."""

        model_config = ConfigDict(extra="forbid")

        speed_mps: float = Field(1.0, ge=0)
        stop_at_s: float = Field(5.0, ge=0)

    def inputs(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        v = np.where(t < self.params.stop_at_s, self.params.speed_mps, 0.0)
        return v, np.zeros_like(t), np.zeros_like(t)


class Logged(Federate):
    """A federate whose parameters are validated by its ``Params`` model."""

    class Params(BaseModel):
        """Its own parameters."""

        model_config = ConfigDict(extra="forbid")

        period_s: float = Field(0.1, gt=0)

    def __init__(self, name: str, period_s: float = 0.1) -> None:
        super().__init__(name)
        self.period_ns = seconds_to_ns(period_s)

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(inputs=(Input("state"),), period_ns=self.period_ns)

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        return {}


class NotALaw:
    """Not a Controller: naming it as a law must fail before anything of it runs."""

    Params = Logged.Params
