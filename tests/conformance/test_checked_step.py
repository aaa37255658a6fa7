"""The public ``Federate.step`` checks what the implementation returns, whoever drives the federate; the
federate kinds bridged to outside services go through it with in-process doubles; outside plug-ins that declare
untyped ports are warned about, and no built-in kind declares one."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest

from core.federate import Federate, FederateError, FederateMeta, SetupContext, UntypedPortWarning
from core.ports import STATE, command_port, port
from core.robot_blocks import CommandSourceSpec
from core.robots import RobotSpec
from federates import FEDERATE_KINDS

from .registries import FEDERATE_FACTORIES, FEDERATES_NEEDING_SERVICES

CTX = SetupContext(seed=1, end_ns=1_000_000_000)
ROBOTS = [RobotSpec(id=k, name=f"robot{k}") for k in (1, 2, 3)]


def _state(ids: list[int]) -> dict[str, np.ndarray]:
    n = len(ids)
    return {"id": np.array(ids, np.int64), **{f.name: np.full(n, 1.5) for f in STATE.fields}}


class Speeds(Federate):
    """Publishes one row per robot it was given, or ``rows`` when set (a broken federate)."""

    def __init__(self, name: str = "speeds") -> None:
        super().__init__(name)
        self.ids: list[int] = []
        self.rows: list[int] | None = None

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(outputs=(port("speeds", {"v": "m/s"}),), period_ns=10_000_000)

    def spawn(self, robots):
        self.ids += [r.id for r in robots]

    def despawn(self, robot_ids):
        self.ids = [i for i in self.ids if i not in robot_ids]

    def step(self, t_ns, inputs):
        ids = self.rows if self.rows is not None else self.ids
        return {"speeds": {"id": np.array(ids, np.int64), "v": np.ones(len(ids))}}


class Faster(Speeds):
    """An override calling ``super().step()``: only what it returns is checked."""

    def step(self, t_ns, inputs):
        out = super().step(t_ns, inputs)
        return {"speeds": {**out["speeds"], "v": out["speeds"]["v"] * 2}}


def test_a_federate_driven_alone_is_checked_against_the_robots_spawned_into_it() -> None:
    fed = Speeds()
    fed.setup(CTX)
    fed.spawn(ROBOTS)
    assert list(fed.step(0, {})["speeds"]["id"]) == [1, 2, 3]
    fed.despawn([2])
    assert list(fed.step(10_000_000, {})["speeds"]["id"]) == [1, 3]
    fed.rows = [1, 2, 3]  # robot 2 is gone
    with pytest.raises(FederateError, match=r"federate 'speeds' failed at t = 0.020 s: PortError: port 'speeds' "
                                            r"field 'id' has shape \(3,\), expected \(2,\)"):
        fed.step(20_000_000, {})


def test_an_undeclared_port_is_refused_outside_a_run_too() -> None:
    class Stray(Speeds):
        def step(self, t_ns, inputs):
            return {"stray": {"id": np.zeros(0, np.int64)}}

    fed = Stray("stray")
    fed.setup(CTX)
    with pytest.raises(FederateError, match=r"wrote undeclared ports \['stray'\]"):
        fed.step(0, {})


def test_an_override_calling_super_is_checked_once_on_what_it_returns() -> None:
    fed = Faster("faster")
    fed.setup(CTX)
    fed.spawn(ROBOTS[:2])
    assert list(fed.step(0, {})["speeds"]["v"]) == [2.0, 2.0]


def test_untyped_outputs_are_warned_about_once_naming_the_federate() -> None:
    class Legacy(Federate):
        def setup(self, ctx):
            return FederateMeta(outputs=("loose",), units={"loose.v": "m/s"})

        def step(self, t_ns, inputs):
            return {}

    fed = Legacy("legacy")
    with pytest.warns(UntypedPortWarning, match=r"federate 'legacy' \(Legacy\) declares output ports by name only "
                                                r"\(loose\)") as caught:
        meta = fed.setup(CTX)
    assert len(caught) == 1 and meta.units == {"loose.v": "m/s"}  # the unit map comes from the port contracts


@pytest.mark.parametrize("kind", sorted(set(FEDERATE_KINDS.builtin_names()) - set(FEDERATES_NEEDING_SERVICES)))
def test_no_built_in_kind_declares_an_untyped_port(kind: str) -> None:
    federate = FEDERATE_FACTORIES[kind](kind)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UntypedPortWarning)
            meta = federate.setup(CTX)
        assert all(spec.typed for spec in meta.outputs), kind
    finally:
        federate.finalize()


@pytest.mark.parametrize("kind", ["helics", "fmu", "mqtt", "ros2"])
def test_the_doubled_bridges_publish_what_they_declare(kind: str) -> None:
    federate = FEDERATE_FACTORIES[kind](kind)
    driven = [replace(r, command_source=CommandSourceSpec(federate=kind)) for r in ROBOTS[:2]]  # robot3 is not
    try:
        meta = federate.setup(CTX)
        federate.spawn([*driven, ROBOTS[2]])
        for k in range(3):  # each publication passes the contract check of the public step()
            outputs = federate.step(k * meta.period_ns, {"state": _state([1, 2, 3])})
        assert outputs and all(meta.output(p).typed for p in outputs)
    finally:
        federate.finalize()
    if kind == "helics":
        assert meta.output("probe").units == {"v2": "m"}  # the unit its publisher declared
    elif kind == "fmu":
        assert meta.output("odometer").index == "robot" and list(outputs["odometer"]["id"]) == [1, 2, 3]
    else:  # the double's commander answered every period, for the driven robots only
        commands = outputs[command_port(kind).name]
        assert list(commands["robot"]) == [1, 2] and np.allclose(commands["speed"], 1.0)


def test_helics_publications_carry_the_built_in_units() -> None:
    from federates.helics.federate import helics_unit

    assert [helics_unit("state", f) for f in ("v", "x", "yaw", "id")] == ["m/s", "m", "rad", ""]
    assert helics_unit("commands_grid", "accel") == "m/s^2" and helics_unit("my_port", "q") == ""
