"""The physics federate: owns the robots' bodies, steps their vehicle models, publishes truth and estimate.

Robots appear here first (spawn), so every other federate's per-robot parts follow the rows this federate keeps.
Vehicle models are grouped by name; with a single model (the usual case) the group arrays are the published arrays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from orchestrator.federate import Federate, FederateMeta, Input, SetupContext
from orchestrator.ports import COMMAND_FIELDS, STATE_FIELDS, units
from orchestrator.registry import Registry
from orchestrator.robots import RobotSpec
from orchestrator.timebase import ns_to_seconds

from .config import PhysicsConfig
from .presets import preset

VEHICLE_MODELS = Registry(
    "vehicle model",
    {
        "kinematic": "federates.physics.models.kinematic:KinematicBicycle",
        "dynamic": "federates.physics.models.dynamic:DynamicSingleTrack",
    },
)

_STATE_KEYS = tuple(STATE_FIELDS)


def vehicle_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """A robot's vehicle parameters: its preset merged with its overrides."""
    vehicle = config.get("vehicle", {})
    params = preset(vehicle.get("preset", "auna_rc_1to10"))
    params.update(vehicle.get("params", {}) or {})
    return params


class PhysicsFederate(Federate):
    """Steps all vehicle bodies every ``step_ns``; commands act from the step after they were issued."""

    def __init__(self, name: str, step_ns: int, config: PhysicsConfig | None = None) -> None:
        super().__init__(name)
        self.step_ns = step_ns
        self.config = config or PhysicsConfig()
        self.dt = ns_to_seconds(step_ns)
        self._groups: dict[str, Any] = {}  # model name -> VehicleModel
        self._model_of: list[str] = []  # per row, the model name
        self._ids = np.empty(0, np.int64)
        self._names: list[str] = []
        self._stepped_once = False
        self._aligned_ids: np.ndarray | None = None

    def setup(self, ctx: SetupContext) -> FederateMeta:
        return FederateMeta(
            inputs=(Input("commands", delayed=True),),
            outputs=("state", "estimate"),
            period_ns=self.step_ns,
            units={**units("state", STATE_FIELDS), **units("estimate", STATE_FIELDS)},
        )

    # -- robots -------------------------------------------------------------------------------------------------
    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        by_model: dict[str, list[RobotSpec]] = {}
        for spec in robots:
            model = spec.config.get("vehicle", {}).get("model", "kinematic")
            by_model.setdefault(model, []).append(spec)
        for model, specs in by_model.items():
            if model not in self._groups:
                self._groups[model] = VEHICLE_MODELS.get(model)(self.dt)
            initial = {
                key: np.array([float(s.config.get("initial", {}).get(key, 0.0)) for s in specs])
                for key in ("x", "y", "yaw", "v")
            }
            self._groups[model].add([vehicle_params(s.config) for s in specs], initial)
        # rows keep spawn order: append in the order given (grouped models keep their own order)
        for spec in robots:
            self._model_of.append(spec.config.get("vehicle", {}).get("model", "kinematic"))
            self._names.append(spec.name)
        self._ids = np.concatenate([self._ids, np.array([s.id for s in robots], np.int64)])
        self._aligned_ids = None

    def despawn(self, robot_ids: Sequence[int]) -> None:
        gone = np.isin(self._ids, np.asarray(robot_ids, np.int64))
        for model, group in self._groups.items():
            in_group = np.array([m == model for m in self._model_of], bool)
            rows_in_group = np.flatnonzero(gone[in_group])
            if len(rows_in_group):
                group.remove(rows_in_group)
        keep = ~gone
        self._ids = self._ids[keep]
        self._model_of = [m for m, k in zip(self._model_of, keep, strict=True) if k]
        self._names = [n for n, k in zip(self._names, keep, strict=True) if k]
        self._aligned_ids = None

    def _hold_commands(self) -> dict[str, np.ndarray]:
        """Commands that keep the current speed and steering (used before a controller has spoken)."""
        state = self._state()
        return {
            "id": self._ids.copy(),
            "speed": state["v"].copy(),
            "accel": np.zeros(len(self._ids)),
            "steer": state["steer"].copy(),
            "yaw_rate": state["yaw_rate"].copy(),
        }

    # -- stepping -----------------------------------------------------------------------------------------------
    def _single_group(self) -> Any | None:
        return next(iter(self._groups.values())) if len(self._groups) == 1 else None

    def _state(self) -> dict[str, np.ndarray]:
        single = self._single_group()
        if single is not None:
            return single.state
        out = {key: np.empty(len(self._ids)) for key in _STATE_KEYS}
        for model, group in self._groups.items():
            rows = np.array([m == model for m in self._model_of], bool)
            for key in _STATE_KEYS:
                out[key][rows] = group.state[key]
        return out

    def step(self, t_ns: int, inputs: Mapping[str, Any]) -> dict[str, Any]:
        if len(self._ids) and self._stepped_once:
            commands = inputs.get("commands")
            if commands is None or commands["id"] is not self._aligned_ids:
                if commands is not None and np.array_equal(commands["id"], self._ids):
                    self._aligned_ids = commands["id"]  # same rows: trust this id array from now on
                else:
                    commands = self._align(commands)
            single = self._single_group()
            if single is not None:
                single.step(commands)
            else:
                for model, group in self._groups.items():
                    rows = np.array([m == model for m in self._model_of], bool)
                    group.step({k: np.ascontiguousarray(v[rows]) for k, v in commands.items() if k != "id"})
        self._stepped_once = True
        state = self._state()
        self._check_finite(state, t_ns)
        snapshot = {"id": self._ids, **{key: state[key].copy() for key in _STATE_KEYS}}
        return {"state": snapshot, "estimate": snapshot}

    def _align(self, commands: Mapping[str, np.ndarray] | None) -> dict[str, np.ndarray]:
        """Commands in this federate's row order; robots without a command hold speed and steering."""
        aligned = {k: v.copy() for k, v in self._hold_commands().items()}
        if commands is None or not len(commands["id"]):
            return aligned
        lookup = {int(rid): row for row, rid in enumerate(commands["id"])}
        for row, rid in enumerate(self._ids):
            src = lookup.get(int(rid))
            if src is not None:
                for key in COMMAND_FIELDS:
                    aligned[key][row] = commands[key][src]
        return aligned

    def _check_finite(self, state: Mapping[str, np.ndarray], t_ns: int) -> None:
        if np.isfinite(state["x"].sum() + state["y"].sum() + state["v"].sum()):
            return  # one cheap test per step; find the culprit only when it fails
        bad = ~np.isfinite(state["x"]) | ~np.isfinite(state["y"]) | ~np.isfinite(state["v"])
        if bad.any():
            error = FloatingPointError("vehicle state became non-finite")
            error.robot = self._names[int(np.flatnonzero(bad)[0])]  # type: ignore[attr-defined]
            raise error

    @property
    def names(self) -> list[str]:
        """Robot names in row order."""
        return list(self._names)
