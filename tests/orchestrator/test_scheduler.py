"""Scheduler semantics: ordering, periods and offsets, event times, cycles, spawning mid-run, failures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from core.federate import Federate, FederateError, FederateMeta, Input, SetupContext
from core.ports import ContractError, FieldSpec, PortSpec, port
from core.robots import RobotSpec
from orchestrator.engine.scheduler import Scheduler, SchedulerError, dependency_order

MS = 1_000_000


class Probe(Federate):
    """Logs (time, name, inputs) into a shared list and publishes a counter on its outputs."""

    def __init__(self, name: str, log: list, inputs: Sequence[Input] = (), outputs: Sequence[str] = (),
                 period_ns: int | None = 10 * MS, offset_ns: int = 0, events: Sequence[int] = ()) -> None:
        super().__init__(name)
        self.log = log
        self._meta = FederateMeta(tuple(inputs), tuple(outputs), period_ns, offset_ns)
        self._events = list(events)
        self.count = 0
        self.robots: list[int] = []
        self.finalized = False

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return self._meta

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        self.robots += [r.id for r in robots]
        self.log.append(("spawn", self.name, [r.id for r in robots]))

    def despawn(self, robot_ids: Sequence[int]) -> None:
        self.robots = [r for r in self.robots if r not in robot_ids]
        self.log.append(("despawn", self.name, list(robot_ids)))

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        self.count += 1
        if self._events:
            self._events.pop(0)
        self.log.append((t_ns, self.name, dict(inputs)))
        return {port: (self.name, self.count, t_ns) for port in self._meta.output_names}

    def next_time(self) -> int | None:
        return self._events[0] if self._events else None

    def finalize(self) -> None:
        self.finalized = True


def steps(log: list) -> list[tuple[int, str]]:
    return [(entry[0], entry[1]) for entry in log if isinstance(entry[0], int)]


def test_dependency_order_runs_producers_first_whatever_the_insertion_order():
    #   physics --state--> v2x --cam--> control --commands (delayed)--> physics
    log: list = []
    sched = Scheduler(end_ns=0)
    sched.add(Probe("control", log, [Input("state"), Input("cam")], ["commands"]))
    sched.add(Probe("v2x", log, [Input("state")], ["cam"]))
    sched.add(Probe("physics", log, [Input("commands", delayed=True)], ["state"]))
    sched.run()
    assert sched.order == ["physics", "v2x", "control"]
    assert steps(log) == [(0, "physics"), (0, "v2x"), (0, "control")]


def test_ties_between_independent_federates_keep_insertion_order():
    log: list = []
    sched = Scheduler(end_ns=0)
    for name in ("c", "a", "b"):
        sched.add(Probe(name, log))
    sched.run()
    assert [name for _, name in steps(log)] == ["c", "a", "b"]


def test_cycle_without_delay_is_rejected_naming_the_federates():
    log: list = []
    metas = {
        "free": FederateMeta((), ("z",)),
        "physics": FederateMeta((Input("commands"),), ("state",)),
        "control": FederateMeta((Input("state"),), ("commands",)),
    }
    with pytest.raises(SchedulerError, match=r"cycle.*'physics', 'control'"):
        dependency_order(metas)
    sched = Scheduler(end_ns=0)
    sched.add(Probe("physics", log, [Input("commands")], ["state"]))
    sched.add(Probe("control", log, [Input("state")], ["commands"]))
    with pytest.raises(SchedulerError, match="delayed"):
        sched.run()


def test_two_writers_of_one_port_are_rejected():
    with pytest.raises(SchedulerError, match="'state' is written by both 'a' and 'b'"):
        dependency_order({"a": FederateMeta((), ("state",)), "b": FederateMeta((), ("state",))})


def test_periods_and_offsets_in_integer_nanoseconds():
    log: list = []
    sched = Scheduler(end_ns=30 * MS)
    sched.add(Probe("fast", log, period_ns=10 * MS))
    sched.add(Probe("slow", log, period_ns=20 * MS, offset_ns=5 * MS))
    sched.run()
    assert steps(log) == [
        (0, "fast"), (5 * MS, "slow"), (10 * MS, "fast"), (20 * MS, "fast"), (25 * MS, "slow"), (30 * MS, "fast"),
    ]


def test_period_of_one_third_millisecond_does_not_drift():
    log: list = []
    period = 333_333  # ns: float seconds would accumulate error over a million steps
    sched = Scheduler(end_ns=period * 3000)
    fed = sched.add(Probe("p", log, period_ns=period))
    sched.run()
    assert fed.count == 3001
    assert steps(log)[-1][0] == period * 3000


def test_event_driven_federate_runs_at_its_event_times_only():
    log: list = []
    sched = Scheduler(end_ns=100 * MS)
    sched.add(Probe("ev", log, period_ns=None, events=[7 * MS, 42 * MS, 99 * MS, 150 * MS]))
    sched.run()
    assert steps(log) == [(7 * MS, "ev"), (42 * MS, "ev"), (99 * MS, "ev")]


def test_delayed_input_sees_the_value_from_before_the_instant():
    log: list = []
    sched = Scheduler(end_ns=10 * MS)
    sched.add(Probe("consumer", log, [Input("x", delayed=True), Input("y")]))
    sched.add(Probe("producer", log, [], ["x", "y"]))
    sched.run()
    consumer_steps = [e for e in log if isinstance(e[0], int) and e[1] == "consumer"]
    # y (undelayed) is this instant's value, x (delayed) the previous instant's
    assert consumer_steps[0][2] == {"x": None, "y": ("producer", 1, 0)}
    assert consumer_steps[1][2] == {"x": ("producer", 1, 0), "y": ("producer", 2, 10 * MS)}


def test_spawn_and_despawn_mid_run_reach_every_federate_before_the_step():
    log: list = []
    sched = Scheduler(end_ns=50 * MS)
    a = sched.add(Probe("a", log))
    b = sched.add(Probe("b", log, period_ns=20 * MS))
    sched.schedule_spawn(RobotSpec(id=1, name="r1"), 0)
    sched.schedule_spawn(RobotSpec(id=2, name="r2"), 15 * MS)  # between two steps: its own instant
    sched.schedule_despawn(1, 30 * MS)
    sched.run()
    assert ("spawn", "a", [2]) in log and ("spawn", "b", [2]) in log
    spawn2 = log.index(("spawn", "a", [2]))
    assert log[spawn2 - 1][0] == 10 * MS  # after the 10 ms step, before the 20 ms one
    despawn = log.index(("despawn", "a", [1]))
    assert log[despawn + 2][:2] == (30 * MS, "a")  # despawned before the 30 ms step
    assert a.robots == [2] and b.robots == [2]
    assert list(sched.roster.ids) == [2]


def test_spawn_requested_by_a_federate_during_the_run():
    log: list = []

    class Spawner(Probe):
        def setup(self, ctx: SetupContext) -> FederateMeta:
            self.ctx = ctx
            return super().setup(ctx)

        def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
            if t_ns == 10 * MS:
                self.ctx.request_spawn(RobotSpec(id=7, name="late"), t_ns)  # now: applied at the next instant
            return super().step(t_ns, inputs)

    sched = Scheduler(end_ns=30 * MS)
    fed = sched.add(Spawner("s", log))
    sched.run()
    assert fed.robots == [7]
    idx = log.index(("spawn", "s", [7]))
    assert log[idx - 1][0] == 10 * MS and log[idx + 1][0] == 20 * MS


def test_a_failing_federate_stops_the_run_with_its_name_and_time_and_all_are_finalized():
    log: list = []

    class Broken(Probe):
        def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
            if t_ns == 20 * MS:
                raise ZeroDivisionError("boom")
            return super().step(t_ns, inputs)

    sched = Scheduler(end_ns=100 * MS)
    ok = sched.add(Probe("ok", log))
    broken = sched.add(Broken("broken", log))
    with pytest.raises(FederateError) as info:
        sched.run()
    assert info.value.federate == "broken"
    assert info.value.t_ns == 20 * MS
    assert "federate 'broken' failed at t = 0.020 s: ZeroDivisionError: boom" in str(info.value)
    assert ok.finalized and broken.finalized


def test_undeclared_output_is_an_error():
    class Liar(Probe):
        def step(self, t_ns: int, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
            return {"surprise": 1}

    sched = Scheduler(end_ns=0)
    sched.add(Liar("liar", []))
    with pytest.raises(FederateError, match="undeclared ports"):
        sched.run()


def test_queued_input_receives_every_value_since_its_last_step():
    #   radio (every 10 ms) --rx (queued)--> app (every 30 ms)
    log: list = []
    sched = Scheduler(end_ns=60 * MS)
    app = sched.add(Probe("app", log, [Input("rx", queued=True), Input("state")], period_ns=30 * MS))
    sched.add(Probe("radio", log, [], ["rx", "state"], period_ns=10 * MS))
    sched.run()
    app_inputs = [entry[2] for entry in log if isinstance(entry[0], int) and entry[1] == "app"]
    assert [[v[2] for v in step["rx"]] for step in app_inputs] == [[0], [10 * MS, 20 * MS, 30 * MS],
                                                                   [40 * MS, 50 * MS, 60 * MS]]
    # a plain input only sees the latest value
    assert [step["state"][2] for step in app_inputs] == [0, 30 * MS, 60 * MS]
    assert app.count == 3


def test_cycle_message_names_only_the_federates_on_the_cycle():
    metas = {
        "a": FederateMeta((Input("y"),), ("x",)),
        "b": FederateMeta((Input("x"),), ("y",)),
        "c": FederateMeta((Input("y"),), ("z",)),  # waits for the cycle but is not on it
    }
    with pytest.raises(SchedulerError) as info:
        dependency_order(metas)
    assert "'a', 'b';" in str(info.value) and "'c'" not in str(info.value)


def test_a_failing_finalize_still_closes_every_observer_and_finalizes_the_others():
    log: list = []

    class BadFinalize(Probe):
        def finalize(self) -> None:
            raise OSError("disk full")

    class Closer:
        ended = None

        def on_start(self, scheduler): ...
        def on_instant(self, t_ns, bus, stepped): ...
        def on_spawn(self, t_ns, robots): ...
        def on_despawn(self, t_ns, robot_ids): ...

        def on_end(self, t_ns, error):
            Closer.ended = error

    sched = Scheduler(end_ns=10 * MS)
    sched.add(BadFinalize("bad", log))
    other = sched.add(Probe("other", log))
    with pytest.raises(FederateError, match=r"federate 'bad'.*disk full"):
        sched.run([Closer()])
    assert other.finalized and isinstance(Closer.ended, FederateError)


class BrokenSetup(Probe):
    def setup(self, ctx: SetupContext) -> FederateMeta:
        raise ConnectionError("broker unreachable")


def test_a_failing_setup_finalizes_what_was_already_set_up():
    """Connections, threads and brokers opened by earlier setups are released when a later one fails."""
    log: list = []
    first, broken, never = Probe("first", log), BrokenSetup("broken", log), Probe("never", log)
    sched = Scheduler(end_ns=MS)
    for fed in (first, broken, never):
        sched.add(fed)
    with pytest.raises(FederateError, match=r"broken.*broker unreachable"):
        sched.run()
    assert first.finalized and broken.finalized and not never.finalized


# -- port contracts ---------------------------------------------------------------------------------------------
def _typed(name: str, inputs: Sequence[Input], outputs: Sequence[PortSpec | str], log: list) -> Probe:
    probe = Probe(name, log, inputs, ())
    probe._meta = FederateMeta(tuple(inputs), tuple(outputs), 10 * MS)
    return probe


def test_a_unit_mismatch_is_rejected_at_setup_naming_both_ends() -> None:
    sched = Scheduler(end_ns=20 * MS)
    log: list = []
    sched.add(_typed("physics", [], [port("state", {"v": "m/s"})], log))
    sched.add(_typed("bridge", [Input("state", fields=(FieldSpec("v", "float64", "km/h"),))], [], log))
    with pytest.raises(ContractError) as err:
        sched.setup()
    message = str(err.value)
    assert "'bridge'" in message and "'physics'" in message and "state.v" in message
    assert "km/h" in message and "m/s" in message
    assert log == []  # nothing was stepped


def test_a_missing_field_or_dtype_mismatch_is_rejected() -> None:
    for wanted, needle in ((FieldSpec("w", "float64", "m/s"), "no field 'w'"),
                           (FieldSpec("v", "int64", "m/s"), "dtype int64")):
        sched = Scheduler(end_ns=20 * MS)
        sched.add(_typed("physics", [], [port("state", {"v": "m/s"})], []))
        sched.add(_typed("bridge", [Input("state", fields=(wanted,))], [], []))
        with pytest.raises(ContractError, match=needle):
            sched.setup()


def test_an_input_without_producer_is_an_error_unless_optional() -> None:
    sched = Scheduler(end_ns=20 * MS)
    sched.add(_typed("bridge", [Input("nowhere")], [], []))
    with pytest.raises(ContractError, match="'nowhere' of federate 'bridge' has no producer"):
        sched.setup()
    sched = Scheduler(end_ns=20 * MS)
    sched.add(_typed("bridge", [Input("nowhere", optional=True)], [], []))
    sched.setup()


def test_matching_contracts_pass_and_untyped_ports_still_run() -> None:
    sched = Scheduler(end_ns=20 * MS)
    log: list = []
    sched.add(_typed("physics", [], [port("state", {"v": "m/s"}), "legacy"], log))
    sched.add(_typed("bridge", [Input("state", fields=(FieldSpec("v", "float64", "m/s"),)), Input("legacy")], [], log))
    sched.setup()
    assert sched.ports["state"][0] == "physics" and sched.ports["legacy"][1].typed is False


class _Rows(Federate):
    """Publishes a robot-indexed port whose ids are, on purpose, reversed after the second robot spawns."""

    def __init__(self, name: str, reverse: bool) -> None:
        super().__init__(name)
        self.ids: list[int] = []
        self.reverse = reverse
        self.steps = 0

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(outputs=(port("state", {"v": "m/s"}),), period_ns=10 * MS)

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        self.ids += [r.id for r in robots]

    def step(self, t_ns: int, inputs):
        self.steps += 1
        ids = self.ids[::-1] if self.reverse and len(self.ids) > 1 else self.ids
        return {"state": {"id": np.asarray(ids, np.int64), "v": np.zeros(len(ids))}}


def test_robot_rows_are_checked_once_per_roster_change() -> None:
    for reverse in (False, True):
        sched = Scheduler(end_ns=100 * MS)
        fed = sched.add(_Rows("physics", reverse))
        sched.schedule_spawn(RobotSpec(1, "a"), 0)
        sched.schedule_spawn(RobotSpec(2, "b"), 30 * MS)
        if not reverse:
            sched.run()
            assert fed.steps == 11
            continue
        with pytest.raises(FederateError, match=r"rows .* are not the live robots in roster order"):
            sched.run()
        assert sched.now_ns == 30 * MS
