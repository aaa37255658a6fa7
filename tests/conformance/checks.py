"""The contracts every registered entry must meet, as functions that raise AssertionError naming what is wrong.

The parametrised tests in this package call them for every name of every registry; ``test_the_suite_bites.py``
calls them on deliberately broken entries to show that they fail. A new kind of plug-in (metrics, for example)
adds its registry to ``registries.py`` and one ``check_<kind>`` function here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from core.ports import CAM_RX, STATE, STATE_FIELDS, PortSpec, conforms
from core.robots import RobotSpec
from orchestrator.engine.scheduler import BaseObserver

Tables = dict[str, np.ndarray]

# -- control laws ------------------------------------------------------------------------------------------------
N_ROWS = (1, 5)
"""Row counts every law is called with (a group of one follower, and of several)."""

_STATE_KEYS = ("x", "y", "yaw", "v", "a", "yaw_rate")


def law_inputs(n: int, case: str) -> tuple[Tables, Tables, Tables, Tables]:
    """``ego, pred, leader, sensors`` for ``n`` followers in one of the situations a law meets in a run:

    - ``cruise``: driving at 1-2 m/s behind the predecessor at about the desired gap, fresh data, sensor target;
    - ``standstill``: everyone at zero speed (the spacing policy's guard);
    - ``no_pred``: nothing received yet (predecessor and leader NaN, age infinite);
    - ``no_range``: the range sensor sees no target (NaN range, rate and target position);
    - ``mixed``: every other row without predecessor data (a NaN must not leak into the other rows).
    """
    rows = np.arange(n, dtype=np.float64)
    ego = {"x": -3.0 * rows, "y": 0.1 * rows, "yaw": 0.02 * rows, "v": 1.0 + 0.2 * rows, "a": 0.05 * rows,
           "yaw_rate": 0.01 * rows}
    pred = {k: v.copy() for k, v in ego.items()}
    pred["x"] = ego["x"] + 2.2 + 0.3 * rows
    pred["v"] = ego["v"] + 0.1
    pred["age_s"] = np.full(n, 0.05)
    leader = {k: v.copy() for k, v in pred.items()}
    leader["x"] = pred["x"] + 2.0 * (n - rows)
    sensors = {"gap_m": 2.2 + 0.3 * rows - 0.45, "gap_rate_mps": np.full(n, 0.1),
               "target_x": pred["x"] - 0.1, "target_y": pred["y"]}
    if case == "standstill":
        for table in (ego, pred, leader):
            table["v"] = np.zeros(n)
            table["a"] = np.zeros(n)
            table["yaw_rate"] = np.zeros(n)
        sensors["gap_rate_mps"] = np.zeros(n)
    elif case in ("no_pred", "mixed"):
        missing = np.ones(n, bool) if case == "no_pred" else rows % 2 == 1
        for table in (pred, leader):
            for key in _STATE_KEYS:
                table[key] = np.where(missing, np.nan, table[key])
        pred["age_s"] = np.where(missing, np.inf, pred["age_s"])
    elif case == "no_range":
        sensors = {key: np.full(n, np.nan) for key in sensors}
    elif case != "cruise":
        raise ValueError(f"unknown case '{case}'")
    return ego, pred, leader, sensors


LAW_CASES = ("cruise", "standstill", "no_pred", "no_range", "mixed")


def _law(cls: Any, n: int) -> Any:
    law = cls(cls.Params())
    if hasattr(law, "add_rows"):  # laws with per-row memory (hysteresis, filters) grow with their group
        law.add_rows(n)
    return law


def run_law(cls: Any, n: int, case: str, dt: float = 0.02) -> dict[str, np.ndarray]:
    """One call of a fresh law with default parameters on ``law_inputs(n, case)``."""
    return _law(cls, n).compute(*law_inputs(n, case), dt)


def check_law(cls: Any) -> None:
    """Outputs: ``accel`` (and ``yaw_rate`` for a law that steers) float64 with one value per row, any other
    output one value per row; finite wherever the row has predecessor data (a steering law may return NaN on a
    row without: the control federate holds that row's commands); same inputs give the same outputs; rows are
    independent (a row's output does not depend on the other rows); the desired gap is finite and non-negative
    for every speed v >= 0, or NaN at every speed (a law that keeps no gap, like cruise control)."""
    name = f"{cls.__module__}.{cls.__qualname__}"
    for n in N_ROWS:
        for case in LAW_CASES:
            out = run_law(cls, n, case)
            where = f"{name} with {n} row(s), case '{case}'"
            wanted = ("accel", "yaw_rate") if cls.steers else ("accel",)
            for key in wanted:
                assert key in out, f"{where}: no '{key}' output (it returned {sorted(out)})"
                value = np.asarray(out[key])
                assert value.dtype == np.float64, f"{where}: '{key}' is {value.dtype}, not float64"
            for key, value in out.items():
                assert np.shape(value) == (n,), f"{where}: '{key}' has shape {np.shape(value)}, not ({n},)"
            _, pred, _, _ = law_inputs(n, case)
            must_be_finite = np.isfinite(pred["x"]) if cls.steers else np.ones(n, bool)
            for key in wanted:
                bad = must_be_finite & ~np.isfinite(np.asarray(out[key], dtype=np.float64))
                assert not bad.any(), f"{where}: '{key}' is not finite on rows {np.flatnonzero(bad).tolist()}"
            again = run_law(cls, n, case)
            for key, value in out.items():
                assert np.array_equal(np.asarray(value), np.asarray(again[key]), equal_nan=True), \
                    f"{where}: '{key}' differs between two calls with the same inputs"
    _check_rows_independent(cls, name)
    _check_desired_gap(cls, name)


def _check_rows_independent(cls: Any, name: str) -> None:
    n = max(N_ROWS)
    tables = law_inputs(n, "cruise")
    batch = _law(cls, n).compute(*tables, 0.02)
    for row in range(n):
        alone = _law(cls, 1).compute(*({k: v[row:row + 1] for k, v in t.items()} for t in tables), 0.02)
        for key, value in alone.items():
            assert np.allclose(np.asarray(batch[key])[row], np.asarray(value)[0], rtol=1e-12, atol=1e-12,
                               equal_nan=True), f"{name}: '{key}' of row {row} depends on the other rows"


def _check_desired_gap(cls: Any, name: str) -> None:
    law = _law(cls, 1)
    v = np.array([0.0, 0.1, 1.0, 5.0, 30.0])
    for curvature in (None, np.zeros(len(v)), np.full(len(v), 0.5), np.full(len(v), -0.5)):
        gap = np.asarray(law.desired_gap(v, curvature), dtype=np.float64)
        assert gap.shape == v.shape, f"{name}: desired_gap returned shape {gap.shape} for {v.shape}"
        if np.isnan(gap).all():
            continue  # keeps no gap (documented on the law)
        assert np.isfinite(gap).all() and (gap >= 0).all(), \
            f"{name}: desired_gap at v = {v.tolist()} (curvature {curvature}) is {gap.tolist()}"


# -- channel models ----------------------------------------------------------------------------------------------
def robot_specs(n: int) -> list[RobotSpec]:
    """A platoon of ``n`` robots 2 m apart: robot 1 leads, each follows the one before."""
    return [RobotSpec(id=i, name=f"robot{i - 1}", position_in_platoon=i - 1, predecessor=None if i == 1 else i - 1,
                      leader=None if i == 1 else 1) for i in range(1, n + 1)]


def estimate_of(ids: np.ndarray, t_s: float) -> Tables:
    """The ``estimate`` port of robots driving east at 1 m/s, 2 m apart in id order."""
    ids = np.asarray(ids, np.int64)
    x = t_s - 2.0 * (ids - 1)
    zeros = np.zeros(len(ids))
    return {"id": ids, "x": x, "y": zeros.copy(), "yaw": zeros.copy(), "v": np.ones(len(ids)), "a": zeros.copy(),
            "yaw_rate": zeros.copy(), "steer": zeros.copy()}


def channel_params(cls: Any) -> dict[str, Any]:
    """The defaults of a channel's ``Params`` as the scenario would hand them over (none without a model)."""
    params = getattr(cls, "Params", None)
    return params().model_dump(mode="json") if params is not None else {}


def run_channel(cls: Any, seed: int = 7, steps: int = 200, step_s: float = 0.01) -> list[Tables]:
    """Deliveries of a channel with 4 stations over ``steps`` steps; robot 4 despawns half way."""
    from comms_models.base import Interest

    model = cls(channel_params(cls), seed, None)
    specs = robot_specs(4)
    model.spawn(specs)
    alive = [s.id for s in specs]

    def interest() -> Interest:
        pairs = [(s.id, p) for s in specs if s.id in alive for p in sorted({s.predecessor, s.leader} - {None})
                 if p in alive]
        return Interest(np.array([r for r, _ in pairs], np.int64), np.array([s for _, s in pairs], np.int64))

    current = interest()
    out = []
    previous_ns = -1
    for k in range(steps):
        t_ns = round(k * step_s * 1e9)
        if k == steps // 2:
            model.despawn([4])
            alive.remove(4)
            current = interest()
        estimate = estimate_of(np.array(alive), t_ns / 1e9)
        before = {key: value.copy() for key, value in estimate.items()}
        deliveries = model.step(t_ns, estimate, current)
        for key, value in before.items():
            assert np.array_equal(estimate[key], value), f"{cls.__name__}: step() changed the estimate's '{key}'"
        _check_deliveries(cls.__name__, deliveries, previous_ns, t_ns, alive if k >= steps // 2 else [1, 2, 3, 4])
        out.append({key: np.asarray(value).copy() for key, value in deliveries.items()})
        previous_ns = t_ns
    model.finalize()
    return out


MODEL_RX = PortSpec("cam_rx", tuple(f for f in CAM_RX.fields if f.name != "u_des"), "event")
"""What a channel model must deliver: ``cam_rx`` without ``u_des``, which only models that carry the platooning
message add (the V2X federate fills it with NaN for the others)."""


def _check_deliveries(name: str, rx: Mapping[str, Any], previous_ns: int, t_ns: int, alive: list[int]) -> None:
    where = f"{name} at t = {t_ns} ns"
    problem = conforms(MODEL_RX, rx)
    assert problem is None, f"{where}: {problem}"
    lengths = {key: len(rx[key]) for key in MODEL_RX.units}
    assert len(set(lengths.values())) == 1, f"{where}: columns of different lengths {lengths}"
    received = np.asarray(rx["received_ns"])
    generated = np.asarray(rx["generated_ns"])
    assert ((received > previous_ns) & (received <= t_ns)).all(), \
        f"{where}: a reception completes outside (previous step, now]: {received.tolist()}"
    assert (generated <= received).all(), f"{where}: a message is received before it was generated"
    assert np.isin(rx["receiver"], alive).all(), f"{where}: a reception at a station that is gone or unknown"
    for key in ("x", "y", "yaw", "v", "a", "yaw_rate"):
        assert np.isfinite(np.asarray(rx[key], np.float64)).all(), f"{where}: '{key}' of a reception is not finite"


def check_channel(cls: Any) -> None:
    """spawn / step / despawn with the ``estimate`` port's fields; deliveries conform to ``cam_rx`` (fields, dtypes,
    equal lengths, finite values, times within the step, receivers alive); the estimate is not modified; the same
    seed gives the same deliveries, and something is delivered on a 2 m platoon."""
    first = run_channel(cls)
    second = run_channel(cls)
    assert len(first) == len(second)
    for k, (a, b) in enumerate(zip(first, second, strict=True)):
        for key in MODEL_RX.units:
            assert np.array_equal(a[key], b[key]), f"{cls.__name__}: step {k} '{key}' differs for the same seed"
    assert sum(len(d["receiver"]) for d in first) > 0, f"{cls.__name__}: nothing delivered in 2 s at 2 m spacing"


# -- vehicle models ----------------------------------------------------------------------------------------------
def vehicle_parameters(cls: Any, n: int) -> list[dict[str, Any]]:
    """What the physics federate hands a model: the default preset merged with the model's own defaults."""
    from core.robot_blocks import DEFAULT_VEHICLE

    own = getattr(cls, "Params", None)
    extra = own().model_dump(mode="json") if own is not None else {}
    return [{**DEFAULT_VEHICLE.params, **extra} for _ in range(n)]


def drive(cls: Any, n: int, steps: int = 300, dt: float = 0.01) -> list[Tables]:
    """States of ``n`` robots under a speed ramp and a steering / yaw-rate sine, one table per step."""
    model = cls(dt)
    rows = np.arange(n, dtype=np.float64)
    model.add(vehicle_parameters(cls, n), {"x": -2.0 * rows, "y": np.zeros(n), "yaw": 0.1 * rows,
                                           "v": 0.5 + 0.1 * rows})
    out = []
    for k in range(steps):
        phase = np.full(n, 0.5 * np.sin(0.02 * k)) + 0.05 * rows
        commands = {"speed": 1.0 + 0.2 * rows, "accel": np.full(n, 0.3), "steer": 0.2 * phase,
                    "yaw_rate": 0.3 * phase}
        model.step(commands)
        out.append({key: np.array(value, copy=True) for key, value in model.state.items()})
    return out


def check_vehicle_model(cls: Any) -> None:
    """State after each step: every ``state`` port field, float64, one finite value per robot; the same commands
    give the same states; robots are independent rows; ``remove`` deletes exactly the given rows."""
    name = cls.__name__
    n = 3
    states = drive(cls, n)
    for k, state in enumerate(states):
        problem = conforms(STATE, {**state, "id": np.arange(1, n + 1, dtype=np.int64)})
        assert problem is None, f"{name} step {k}: {problem}"
        for key in STATE_FIELDS:
            value = state[key]
            assert value.dtype == np.float64 and value.shape == (n,), f"{name}: '{key}' is {value.dtype}{value.shape}"
            assert np.isfinite(value).all(), f"{name} step {k}: '{key}' is not finite: {value.tolist()}"
    assert states[-1]["v"].min() > 0.5, f"{name}: robots did not drive under a 1 m/s speed command"
    again = drive(cls, n)
    for k, (a, b) in enumerate(zip(states, again, strict=True)):
        for key in STATE_FIELDS:
            assert np.array_equal(a[key], b[key]), f"{name}: step {k} '{key}' differs for the same commands"
    model = cls(0.01)
    model.add(vehicle_parameters(cls, n), {"x": np.arange(n, dtype=float), "y": np.zeros(n), "yaw": np.zeros(n),
                                           "v": np.zeros(n)})
    model.remove(np.array([1]))
    assert model.state["x"].tolist() == [0.0, 2.0], f"{name}: remove([1]) left x = {model.state['x'].tolist()}"


# -- leader profiles ---------------------------------------------------------------------------------------------
def check_profile(cls: Any) -> None:
    """``inputs(t)`` with default parameters: three float64 arrays shaped like ``t``, finite, the same for the same
    times and a pure function of time (a coarser grid gives the same samples). The sign of the speed is not part
    of the contract: ``sinusoid``'s defaults (1 m/s +- 10/3.6 m/s, Plexe's amplitude) command negative speeds,
    which the vehicle models clamp to standstill."""
    name = cls.__name__
    t = np.arange(0.0, 60.0, 0.01)
    v, w, a = cls(cls.Params()).inputs(t)
    for label, value in (("v", v), ("w", w), ("a", a)):
        value = np.asarray(value)
        assert value.dtype == np.float64 and value.shape == t.shape, f"{name}: {label} is {value.dtype}{value.shape}"
        assert np.isfinite(value).all(), f"{name}: {label} is not finite"
    again = cls(cls.Params()).inputs(t[::7])
    for label, full, part in zip("vwa", (v, w, a), again, strict=True):
        assert np.array_equal(np.asarray(full)[::7], np.asarray(part)), \
            f"{name}: {label} on a coarser grid differs (not a pure function of time)"


# -- federates ---------------------------------------------------------------------------------------------------
Factory = Callable[[str], Any]


def check_federate_meta(federate: Any) -> Any:
    """``setup`` returns a ``FederateMeta``: inputs are ``Input``s, outputs ``PortSpec``s; an output or input on a
    built-in port keeps that port's contract (the same fields, dtypes and units). Returns the meta."""
    from core.federate import FederateMeta, Input, SetupContext
    from core.ports import BUILTIN_PORTS, PortSpec, check_contract

    builtin = {spec.name: spec for spec in BUILTIN_PORTS}
    name = type(federate).__name__
    meta = federate.setup(SetupContext(seed=1, end_ns=2_000_000_000))
    assert isinstance(meta, FederateMeta), f"{name}: setup() returned {meta!r}"
    for spec in meta.outputs:
        assert isinstance(spec, PortSpec), f"{name}: output {spec!r} is not a PortSpec"
        if spec.name in builtin:
            assert spec.typed and spec.fields == builtin[spec.name].fields and spec.index == builtin[spec.name].index, \
                f"{name}: output '{spec.name}' differs from the built-in port's contract"
    for wanted in meta.inputs:
        assert isinstance(wanted, Input), f"{name}: input {wanted!r} is not an Input"
        if wanted.port in builtin:
            check_contract(name, wanted.fields, "the built-in port", builtin[wanted.port])
    return meta


class PortChecker(BaseObserver):
    """A scheduler observer that checks every value written on a typed port against its producer's contract, and
    counts what it checked per port."""

    def __init__(self) -> None:
        self.checked: dict[str, int] = {}
        self.scheduler: Any = None

    def on_start(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def on_instant(self, t_ns: int, bus: dict[str, Any], stepped: Any) -> None:
        for port in self.scheduler.written_now:
            producer, spec = self.scheduler.ports[port]
            if not spec.typed:
                continue
            values = bus[port]
            problem = conforms(spec, values)
            assert problem is None, f"federate '{producer}' at t = {t_ns} ns: {problem}"
            if spec.index == "robot":
                rows = {key: np.shape(values[key]) for key in (*spec.units, "id")}
                assert len(set(rows.values())) == 1, f"'{producer}' port '{port}': rows differ {rows}"
            self.checked[port] = self.checked.get(port, 0) + 1
