"""A bridge into a HELICS federation: coopsim ports go out as HELICS publications, HELICS values come back as a
coopsim output port, and time advances in step with the federation.

Scenario entry (``type: helics``)::

    - name: grid
      type: helics
      params:
        broker: 127.0.0.1:23500              # a running helics_broker (zmq core)
        period_s: 0.1
        publish: {state: [id, x, y, v]}      # each field as the vector "coopsim/<port>/<field>"
        subscribe: {probe: {v2: ext/probe/v2}}   # output port -> field -> HELICS key of a publication

Per step at t: every published field is sent as a vector of doubles (one entry per robot row, ids included when
listed), then the bridge requests time t and waits for the grant, then it reads the subscriptions. HELICS
delivers a value published at time t from the next grant on, so what the other federates publish in answer to
coopsim's values at t reaches coopsim one period later, the usual HELICS co-simulation delay. An output port
appears once each of its fields has received a value. HELICS stamps coopsim's values with the previous grant,
so peers should step with the bridge's period or a multiple of it: a finer peer would read a value early.
``setup_timeout_s`` bounds the wait for the federation to start.

A HELICS federate can drive robots: subscribe to the port ``commands_<name>`` with a ``robot`` key (the robot ids)
and any of ``speed``, ``accel``, ``steer``, ``yaw_rate`` (unmapped fields are NaN, completed by the physics
federate). Its rows go out only at grants where one of those values was updated, so a peer that stops publishing
is a silent source (the scenario's ``command_timeout_s`` rule), not one that repeats its last command forever::

    subscribe: {commands_grid: {robot: ecu/cmd/robot, speed: ecu/cmd/speed}}
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.federate import Federate, FederateMeta, Input, PortData, SetupContext
from core.ports import BUILTIN_PORTS, COMMAND_PORT_PREFIX, EXTERNAL_COMMAND_FIELDS, FieldSpec, PortSpec, command_port
from core.timebase import NS_PER_S, seconds_to_ns


class HelicsBridge(Federate):
    """A HELICS value federate named after this federate (see the module docstring for the parameters)."""

    def __init__(self, name: str, broker: str, period_s: float = 0.1,
                 publish: Mapping[str, Sequence[str]] | None = None,
                 subscribe: Mapping[str, Mapping[str, str]] | None = None, core_type: str = "zmq",
                 federation_name: str | None = None, setup_timeout_s: float = 60.0) -> None:
        super().__init__(name)
        if period_s <= 0:
            raise ValueError(f"period_s must be positive, got {period_s}")
        self.broker = broker
        self.period_ns = seconds_to_ns(period_s)
        self.publish = {port: list(fields) for port, fields in (publish or {}).items()}
        self.subscribe = {port: dict(fields) for port, fields in (subscribe or {}).items()}
        self._command_port = command_port(name).name
        commands = self.subscribe.get(self._command_port)
        if commands is not None:
            unknown = sorted(set(commands) - set(EXTERNAL_COMMAND_FIELDS))
            if unknown or "robot" not in commands:
                raise ValueError(f"subscribe.{self._command_port} maps 'robot' and any of speed, accel, steer, "
                                 f"yaw_rate; got {', '.join(commands)}")
        self.core_type = core_type
        self.federation_name = federation_name or name
        self.setup_timeout_s = setup_timeout_s
        self._fed: Any = None
        self._pubs: dict[tuple[str, str], Any] = {}
        self._subs: dict[tuple[str, str], Any] = {}
        self._seen: set[tuple[str, str]] = set()
        self._granted_s = 0.0

    def setup(self, ctx: SetupContext) -> FederateMeta:
        try:
            import helics as h
        except ImportError:
            raise RuntimeError("the HELICS bridge needs the helics package: pip install 'coopsim[helics]'") from None

        info = h.helicsCreateFederateInfo()
        h.helicsFederateInfoSetCoreTypeFromString(info, self.core_type)
        h.helicsFederateInfoSetCoreInitString(info, f"--federates=1 --broker_address=tcp://{self.broker}")
        h.helicsFederateInfoSetTimeProperty(info, h.helics_property_time_period, self.period_ns / NS_PER_S)
        # granted exactly the time asked for: a peer's value must not wake the bridge at an earlier time
        h.helicsFederateInfoSetFlagOption(info, h.helics_flag_uninterruptible, True)
        try:
            self._fed = h.helicsCreateValueFederate(self.federation_name, info)
            for port, fields in self.publish.items():
                for name in fields:
                    self._pubs[port, name] = h.helicsFederateRegisterGlobalTypePublication(
                        self._fed, f"coopsim/{port}/{name}", "vector", helics_unit(port, name))
            for port, fields in self.subscribe.items():
                for name, key in fields.items():
                    self._subs[port, name] = h.helicsFederateRegisterSubscription(self._fed, key, "")
            # entering execution waits for every federate the broker expects: bounded, so a peer that never
            # joins stops the run with a message instead of hanging it
            h.helicsFederateEnterExecutingModeAsync(self._fed)
            deadline = time.monotonic() + self.setup_timeout_s
            while not h.helicsFederateIsAsyncOperationCompleted(self._fed):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the HELICS federation at {self.broker} did not start within "
                                       f"{self.setup_timeout_s:g} s (do all its federates join?)")
                time.sleep(0.01)
            h.helicsFederateEnterExecutingModeComplete(self._fed)
        except h.HelicsException as exc:
            raise RuntimeError(f"cannot join the HELICS federation at {self.broker}: {exc}") from None
        outputs = tuple(command_port(self.name) if port == self._command_port else self._output_port(h, port)
                        for port in self.subscribe)
        return FederateMeta(inputs=tuple(Input(port) for port in self.publish), outputs=outputs,
                            period_ns=self.period_ns)

    def _output_port(self, h: Any, port: str) -> PortSpec:
        """A subscribed port: a table of float64 vectors, each field in the unit its publisher declared."""
        fields = tuple(FieldSpec(name, "float64", h.helicsInputGetInjectionUnits(self._subs[port, name]) or "-")
                       for name in self.subscribe[port])
        return PortSpec(port, fields, "event", doc=f"HELICS values from the federation at {self.broker}")

    def step(self, t_ns: int, inputs: Mapping[str, PortData]) -> Mapping[str, PortData]:
        import helics as h

        for (port, name), pub in self._pubs.items():
            value = inputs.get(port)
            if value is not None and value.get(name) is not None:
                h.helicsPublicationPublishVector(pub, np.asarray(value[name], np.float64).tolist())
        t_s = t_ns / NS_PER_S
        if t_s > self._granted_s:
            self._granted_s = h.helicsFederateRequestTime(self._fed, t_s)
        outputs: dict[str, dict[str, np.ndarray]] = {}
        fresh_commands = False
        for (port, name), sub in self._subs.items():
            if h.helicsInputIsUpdated(sub):
                self._seen.add((port, name))
                fresh_commands |= port == self._command_port
            if (port, name) in self._seen:
                outputs.setdefault(port, {})[name] = np.asarray(h.helicsInputGetVector(sub), np.float64)
        ready = {port: fields for port, fields in outputs.items() if len(fields) == len(self.subscribe[port])}
        if self._command_port in self.subscribe:
            ready[self._command_port] = self._command_table(ready.get(self._command_port) if fresh_commands else None)
        return ready

    def _command_table(self, values: Mapping[str, np.ndarray] | None) -> dict[str, np.ndarray]:
        """The command rows of this grant (none unless the peer published new ones); unmapped fields NaN."""
        robots = np.empty(0, np.int64) if values is None else np.asarray(values["robot"]).astype(np.int64)
        table = {"robot": robots}
        for field in EXTERNAL_COMMAND_FIELDS:
            if field != "robot":
                given = None if values is None else values.get(field)
                table[field] = np.asarray(given, np.float64) if given is not None and len(given) == len(robots) \
                    else np.full(len(robots), np.nan)
        return table

    def finalize(self) -> None:
        if self._fed is None:
            return
        import helics as h

        fed, self._fed = self._fed, None
        try:
            h.helicsFederateDisconnect(fed)
        finally:
            h.helicsFederateFree(fed)


_BUILTIN_UNITS = {(spec.name, f.name): f.unit for spec in BUILTIN_PORTS for f in spec.fields}
_NOT_PHYSICAL = ("-", "robot id")  # no HELICS unit: published without one


def helics_unit(port: str, field: str) -> str:
    """The unit a published field is registered with: the built-in port's (commands ports: the command fields'),
    none for ids, dimensionless values and the fields of ports whose contract is not known at setup."""
    unit = _BUILTIN_UNITS.get((port, field))
    if unit is None and port.startswith(COMMAND_PORT_PREFIX):
        declared = EXTERNAL_COMMAND_FIELDS.get(field)
        unit = declared if isinstance(declared, str) else None
    return "" if unit is None or unit in _NOT_PHYSICAL else unit
