"""FMI 2 co-simulation FMUs as a federate: one FMU instance per robot, inputs from coopsim ports, outputs as a
coopsim port (hosted with fmpy).

Scenario entry (``type: fmu``)::

    - name: odometer
      type: fmu
      params:
        path: models/Odometer.fmu
        period_s: 0.1
        inputs: {speed: state.v}                          # FMU input <- port.field of the same robot
        outputs: {odometer: {distance: distance}}         # coopsim port -> field -> FMU output
        parameters: {gain: 2.5}                           # set before initialisation
        robots: [robot1, robot2]                          # default: every robot
        commands: {speed: v_ref, steer: delta_ref}        # command field -> FMU output (an ECU in the loop)

With ``commands``, the FMU drives the robots the scenario gives to this federate (``drivers:``): after each step
their instances' outputs go out on ``commands_<name>`` (fields not mapped are NaN: the physics federate completes
them), so a controller exported from Simulink, Modelica or any FMI 2 tool commands a robot.

Timing (the usual master algorithm with held inputs): at each step t_k the instances first advance from t_(k-1)
to t_k with the inputs read at t_(k-1), then their outputs (now valid at t_k) are published and the inputs of t_k
are read and held for the next interval. At t_0 the outputs are the values after initialisation. A robot spawned
during the run gets an instance that starts at its first step.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.federate import Federate, FederateMeta, Input, PortData, SetupContext
from core.ports import COMMAND_FIELDS, FieldSpec, PortSpec, command_port
from core.robots import RobotSpec, rows_of
from core.timebase import NS_PER_S, seconds_to_ns


class FmuFederate(Federate):
    """Steps one instance of an FMI 2 co-simulation FMU per robot (see the module docstring)."""

    def __init__(self, name: str, path: str, period_s: float = 0.01, inputs: Mapping[str, str] | None = None,
                 outputs: Mapping[str, Mapping[str, str]] | None = None,
                 parameters: Mapping[str, float] | None = None, robots: Sequence[str] | None = None,
                 commands: Mapping[str, str] | None = None) -> None:
        super().__init__(name)
        if period_s <= 0:
            raise ValueError(f"period_s must be positive, got {period_s}")
        self.path = Path(path)
        self.period_ns = seconds_to_ns(period_s)
        self.inputs = {var: tuple(source.split(".", 1)) for var, source in (inputs or {}).items()}
        bad = [source for source in (inputs or {}).values() if "." not in source]
        if bad:
            raise ValueError(f"inputs must name 'port.field', got '{bad[0]}'")
        self.outputs = {port: dict(fields) for port, fields in (outputs or {}).items()}
        self.parameters = dict(parameters or {})
        self.robot_names = None if robots is None else set(robots)
        self.commands = dict(commands or {})
        unknown = sorted(set(self.commands) - set(COMMAND_FIELDS))
        if unknown:
            raise ValueError(f"commands: '{unknown[0]}' is not a command field; allowed: {', '.join(COMMAND_FIELDS)}")
        self._driven: set[int] = set()  # robots this FMU commands
        self._md: Any = None
        self._unzipped: str | None = None
        self._vr: dict[str, int] = {}
        self._instances: dict[int, Any] = {}  # robot id -> FMU2Slave, in spawn order
        self._started: dict[int, bool] = {}
        self._held: dict[int, list[float]] = {}  # robot id -> inputs read at the previous step
        self._last_ns: int | None = None

    def setup(self, ctx: SetupContext) -> FederateMeta:
        try:
            from fmpy import extract, read_model_description
        except ImportError:
            raise RuntimeError("the FMU federate needs fmpy: pip install 'coopsim[fmi]'") from None
        if not self.path.is_file():
            raise FileNotFoundError(f"no FMU at {self.path}")
        self._md = read_model_description(str(self.path))
        if self._md.coSimulation is None:
            raise ValueError(f"{self.path} is not a co-simulation FMU")
        self._vr = {v.name: v.valueReference for v in self._md.modelVariables}
        wanted = [*self.inputs, *self.parameters, *(var for f in self.outputs.values() for var in f.values()),
                  *self.commands.values()]
        missing = [var for var in wanted if var not in self._vr]
        if missing:
            raise ValueError(f"{self.path.name} has no variable '{missing[0]}'; it has: {', '.join(self._vr)}")
        self._unzipped = extract(str(self.path))
        ports = sorted({port for port, _ in self.inputs.values()})
        outputs = (*self._output_ports(), *((command_port(self.name),) if self.commands else ()))
        return FederateMeta(inputs=tuple(Input(port) for port in ports), outputs=outputs, period_ns=self.period_ns)

    def _output_ports(self) -> list[PortSpec]:
        """Each output port with the units the model description gives its variables. Stepping every robot, a
        port is robot-indexed (the live robots in roster order); stepping those ``robots`` names, it is a table of
        their rows (``id`` naming each)."""
        variables = {v.name: v for v in self._md.modelVariables}
        index = "robot" if self.robot_names is None else "event"
        specs = []
        for port, fields in self.outputs.items():
            columns = tuple(FieldSpec(field, "float64", fmu_unit(variables[var])) for field, var in fields.items())
            head = (FieldSpec("id", "int64", "robot id"),) if index == "event" else ()
            specs.append(PortSpec(port, head + columns, index, doc=f"outputs of {self.path.name}, one row per robot"))
        return specs

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        from fmpy.fmi2 import FMU2Slave

        for robot in robots:
            if robot.driven_by(self.name):
                self._driven.add(robot.id)
            elif self.robot_names is not None and robot.name not in self.robot_names:
                continue
            fmu = FMU2Slave(guid=self._md.guid, unzipDirectory=self._unzipped,
                            modelIdentifier=self._md.coSimulation.modelIdentifier,
                            instanceName=f"{self.name}_{robot.name}")
            fmu.instantiate()
            self._instances[robot.id] = fmu
            self._started[robot.id] = False

    def despawn(self, robot_ids: Sequence[int]) -> None:
        for rid in robot_ids:
            fmu = self._instances.pop(int(rid), None)
            if fmu is not None:
                self._free(fmu, self._started.pop(int(rid)))
            self._held.pop(int(rid), None)
            self._driven.discard(int(rid))

    def step(self, t_ns: int, inputs: Mapping[str, PortData]) -> Mapping[str, PortData]:
        t_s = t_ns / NS_PER_S
        h = None if self._last_ns is None else (t_ns - self._last_ns) / NS_PER_S
        ids = list(self._instances)
        for rid in ids:
            fmu = self._instances[rid]
            if not self._started[rid]:  # a new instance starts now, its outputs are those after initialisation
                fmu.setupExperiment(startTime=t_s)
                if self.parameters:
                    fmu.setReal([self._vr[k] for k in self.parameters], [float(v) for v in self.parameters.values()])
                fmu.enterInitializationMode()
                fmu.exitInitializationMode()
                self._started[rid] = True
            elif h is not None:  # every instance advances, also before its inputs first arrive (FMU time)
                if self.inputs and rid in self._held:
                    fmu.setReal([self._vr[k] for k in self.inputs], self._held[rid])
                fmu.doStep(currentCommunicationPoint=t_s - h, communicationStepSize=h)
        outputs: dict[str, dict[str, np.ndarray]] = {}
        for port, fields in self.outputs.items():
            refs = [self._vr[var] for var in fields.values()]
            values = np.array([self._instances[rid].getReal(refs) for rid in ids], float).reshape(len(ids), -1)
            outputs[port] = {"id": np.array(ids, np.int64),
                             **{field: values[:, j].copy() for j, field in enumerate(fields)}}
        if self.commands:
            outputs[command_port(self.name).name] = self._command_table(ids)
        self._hold(inputs, ids)
        self._last_ns = t_ns
        return outputs

    def _command_table(self, ids: list[int]) -> dict[str, np.ndarray]:
        """The driven robots' commands from their instances' outputs (unmapped fields NaN)."""
        driven = [rid for rid in ids if rid in self._driven]
        refs = [self._vr[var] for var in self.commands.values()]
        values = np.array([self._instances[rid].getReal(refs) for rid in driven], float).reshape(len(driven), -1)
        table = {"robot": np.array(driven, np.int64), **{f: np.full(len(driven), np.nan) for f in COMMAND_FIELDS}}
        for j, field in enumerate(self.commands):
            table[field] = values[:, j].copy()
        return table

    def _hold(self, inputs: Mapping[str, PortData], ids: list[int]) -> None:
        """Each instance's inputs read now, held over the next interval."""
        columns = []
        for port, field in self.inputs.values():
            data = inputs.get(port)
            if data is None:
                return
            columns.append((rows_of(data["id"], ids, missing=-1), np.asarray(data[field], float)))
        for k, rid in enumerate(ids):
            if all(rows[k] >= 0 for rows, _ in columns):
                self._held[rid] = [float(values[rows[k]]) for rows, values in columns]

    def finalize(self) -> None:
        """Frees every instance (all of them, even if one fails) and removes the unpacked FMU."""
        error: Exception | None = None
        for rid, fmu in list(self._instances.items()):
            try:
                self._free(fmu, self._started.get(rid, False))
            except Exception as exc:  # the first failure is reported, after the others are freed
                error = error or exc
        self._instances.clear()
        if self._unzipped is not None:
            shutil.rmtree(self._unzipped, ignore_errors=True)
            self._unzipped = None
        if error is not None:
            raise error

    @staticmethod
    def _free(fmu: Any, started: bool) -> None:
        if started:
            fmu.terminate()
        fmu.freeInstance()


def fmu_unit(variable: Any) -> str:
    """The unit of an FMU model variable (its own, else its declared type's), in coopsim's form: ``-`` for a
    dimensionless or unitless variable."""
    declared = getattr(variable, "declaredType", None)
    unit = getattr(variable, "unit", None) or getattr(declared, "unit", None) or ""
    return "-" if unit in ("", "1") else str(unit)
