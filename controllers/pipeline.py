"""The control pipeline of a group of followers that share one controller block, vectorised over its rows.

One control step runs, in this order:

1. prediction: the received predecessor and leader samples moved to the control instant (``controller.predict``,
   ``controllers.prediction``);
2. the law (``controller.type``): acceleration and, for steering laws, yaw rate;
3. lateral: laws that do not steer follow the predecessor's received path by pure pursuit
   (``controller.lateral``, ``controllers.pure_pursuit.PurePursuit``);
4. fallback: ACC on the robot's own range sensor while the predecessor's data is stale (``controller.fallback``,
   ``controllers.fallback.Fallback``, the same code the ``cacc_fallback`` law runs);
5. sensor steering: while degraded (by the fallback or by a law with one built in), pure pursuit on the positions
   where the range sensor saw the vehicle ahead instead of on stale V2X poses.

``ControlPipeline.step`` returns a ``ControlOutput`` (arrays over the group's rows). The pipeline keeps the yaw
rate it commanded last: a row for which no stage has a yaw rate (no data yet, stopped) holds it. Rows join and leave
with ``add_rows`` / ``remove_rows``, passed on to every stateful stage.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
from numba import njit
from pydantic import Field

from . import CONTROLLERS
from .acc import AccParams
from .base import Arrays, Controller
from .columns import LazyColumns
from .fallback import ACC, Fallback, FallbackParams
from .prediction import PREDICTORS, Predictor
from .pure_pursuit import PurePursuit, PurePursuitParams
from .rowstate import RowStateMixin

FEDERATE_KEYS = ("type", "period_s", "predict", "lateral", "fallback")
"""Keys of a controller block that configure the pipeline; the others are the law's parameters."""


class FallbackStageParams(FallbackParams):
    """``controller.fallback``: the switch thresholds, the ACC used while degraded, and the sensor steering."""

    acc: AccParams = Field(default_factory=AccParams, description="the ACC used while degraded (time gap ...)")
    steer_by_sensor: bool = Field(
        True, description="while degraded, steer by pure pursuit on where the range sensor saw the vehicle ahead "
        "(false: keep steering on the stale V2X data)"
    )
    steering: PurePursuitParams = Field(
        default_factory=PurePursuitParams, description="pure pursuit parameters of the sensor-based steering"
    )


class ControlOutput:
    """What one control step decided for each row of a group: ``accel`` [m/s^2], ``yaw_rate`` [rad/s] (held where
    no stage had one), ``stop`` (bool: command speed 0, a steering law whose predecessor stands), ``degraded``
    (bool: in ACC, or the law reported missing inputs), ``desired_gap_m`` [m] (the law's desired gap at the current
    speed, ``Controller.gap_reference``) and ``pred`` (the predecessor sample the law used, after prediction, with
    ``age_s``). ``desired_gap_m`` may be given as a function of nothing: it is then computed on first read (it
    only feeds the diagnostics, which a run without traces never reads)."""

    __slots__ = ("_gap", "accel", "degraded", "pred", "stop", "yaw_rate")

    def __init__(self, accel: np.ndarray, yaw_rate: np.ndarray, stop: np.ndarray, degraded: np.ndarray,
                 desired_gap_m: np.ndarray | Callable[[], np.ndarray], pred: Mapping[str, np.ndarray]) -> None:
        self.accel = accel
        self.yaw_rate = yaw_rate
        self.stop = stop
        self.degraded = degraded
        self.pred = pred
        self._gap = desired_gap_m

    @property
    def desired_gap_m(self) -> np.ndarray:
        """[m] the law's desired gap per row (computed now if it was deferred, then kept)."""
        if callable(self._gap):
            self._gap = self._gap()
        return self._gap

    def _fields(self) -> tuple[Any, ...]:
        return self.accel, self.yaw_rate, self.stop, self.degraded, self.desired_gap_m, self.pred

    # read like the named tuple it was: (accel, yaw_rate, stop, degraded, desired_gap_m, pred)
    def __getitem__(self, index: int | slice) -> Any:
        return self._fields()[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._fields())

    def __len__(self) -> int:
        return 6


def block_key(block: Mapping[str, Any], row_params: tuple[str, ...] = ()) -> str:
    """A key equal for controller blocks that can share one pipeline: equal but for ``row_params`` (the law's
    ``Controller.row_params``, which rows carry each their own)."""
    return json.dumps({k: v for k, v in block.items() if k not in row_params}, sort_keys=True)


def law_from_block(block: Mapping[str, Any]) -> Controller:
    """The law of a controller block (plain data, as validated), looked up by ``type`` in
    ``controllers.CONTROLLERS``, with the block's parameters (all of them plain: no ``row_values``)."""
    law_cls = CONTROLLERS.get(block["type"])
    return law_cls(law_cls.Params(**{k: v for k, v in block.items() if k not in FEDERATE_KEYS}))


def _own_values(law: Controller, columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``columns`` as the law's ``row_values``, or none when every row has the law's ``params`` (the usual case
    outside batched worlds: the plain kernels, and one desired gap for any number of speeds)."""
    same = all(np.all(column == float(getattr(law.params, name))) for name, column in columns.items())
    return {} if same else columns


def law_row_params(block: Mapping[str, Any]) -> tuple[str, ...]:
    """The ``Controller.row_params`` of a controller block's law."""
    return tuple(getattr(CONTROLLERS.get(block["type"]), "row_params", ()))


def _degrades(law: Controller) -> bool:
    """Whether a law switches to ACC by itself (it carries a fallback ``policy``)."""
    return "policy" in getattr(type(law).Params, "model_fields", {})


class ControlPipeline(RowStateMixin):
    """Prediction -> law -> lateral -> fallback -> sensor steering for one group (module docstring).

    ``dt`` [s] is the group's control period; ``predict`` a ``controllers.prediction.PREDICTORS`` name; ``lateral``
    the pure pursuit of non-steering laws (defaults when None); ``fallback`` None for no ``controller.fallback``.
    """

    def __init__(
        self, law: Controller, dt: float, predict: str = "none", lateral: PurePursuitParams | None = None,
        fallback: FallbackStageParams | None = None,
    ) -> None:
        if dt <= 0:
            raise ValueError(f"control period must be > 0, got {dt}")
        self.law = law
        self.dt = dt
        self.predictor: Predictor = PREDICTORS[predict]
        lateral_params = lateral if lateral is not None else PurePursuitParams()
        self.lateral = None if law.steers else PurePursuit(lateral_params)
        self.fallback = None if fallback is None else Fallback(fallback, fallback.acc)
        # degraded followers steer on their range sensor: stale V2X poses would lead them off the road in a curve
        degrades = fallback is not None or _degrades(law)
        steer_by_sensor = fallback.steer_by_sensor if fallback is not None else True
        steering = fallback.steering if fallback is not None else lateral_params
        self.sensed = PurePursuit(steering) if degrades and steer_by_sensor else None
        self._declare_state("yaw_rate", fill=0.0)  # [rad/s] last yaw-rate command per row

    @classmethod
    def from_block(cls, block: Mapping[str, Any], dt: float) -> ControlPipeline:
        """The pipeline of a scenario ``controller`` block (plain data, as validated); ``dt`` [s] its period. The
        law is looked up by ``type`` in ``controllers.CONTROLLERS``."""
        law = law_from_block(block)
        lateral = block.get("lateral")
        fallback = block.get("fallback")
        return cls(
            law, dt, predict=block.get("predict", "none") or "none",
            lateral=PurePursuitParams(**lateral) if lateral else None,
            fallback=FallbackStageParams(**fallback) if fallback else None,
        )

    # -- rows ---------------------------------------------------------------------------------------------------
    def _parts(self) -> tuple[Any, ...]:
        return tuple(p for p in (self.law, self.lateral, self.fallback, self.sensed) if p is not None)

    def add_rows(self, n: int) -> None:
        """n new followers at the end of the group (one call per spawn, whatever n)."""
        for part in self._parts():
            if hasattr(part, "add_rows"):
                part.add_rows(n)
        super().add_rows(n)

    def add_row_values(self, values: Mapping[str, np.ndarray]) -> None:
        """The law's ``row_params`` of the rows just added (an array per name, after ``add_rows``), for a group
        whose rows may carry their own (``Controller.row_values``: kept only while some row's differ from the
        law's ``params``)."""
        law = self.law
        before = self.n_rows - len(next(iter(values.values()), ()))
        have = {name: law.row_values.get(name, np.full(before, float(getattr(law.params, name)))) for name in values}
        law.row_values = _own_values(law, {name: np.concatenate([have[name], np.asarray(column, float)])
                                           for name, column in values.items()})

    def remove_rows(self, rows: np.ndarray) -> None:
        """Drops ``rows`` (indices in the group's current numbering); the others keep their order."""
        for part in self._parts():
            if hasattr(part, "remove_rows"):
                part.remove_rows(rows)
        super().remove_rows(rows)
        if self.law.row_values:
            self.law.row_values = _own_values(self.law, {name: np.delete(column, rows)
                                                         for name, column in self.law.row_values.items()})

    def forget_path(self, rows: np.ndarray) -> None:
        """Forgets the path ``rows`` followed (they follow another vehicle from now on, after a maneuver): their
        pure pursuit breadcrumbs start again from the new predecessor's messages."""
        for part in (self.lateral, self.sensed):
            if part is not None:
                for name, values in part._state.items():
                    values[rows] = part._state_fill[name]

    # -- one control step ---------------------------------------------------------------------------------------
    def step(
        self, t_s: float, ego: Arrays, pred: Arrays, leader: Arrays, pred_age_s: np.ndarray,
        leader_age_s: np.ndarray, sensors: Arrays,
    ) -> ControlOutput:
        """One control step at ``t_s`` [s]. ``ego``: the followers' estimates (x, y, yaw, v, a, yaw_rate);
        ``pred`` / ``leader``: the newest received samples (NaN where none), ``pred_age_s`` / ``leader_age_s``
        their ages [s] (inf where never received); ``sensors``: ``gap_m``, ``gap_rate_mps`` and the sensed
        rear bumper of the vehicle ahead ``target_x``, ``target_y`` (NaN where unknown)."""
        dt = self.dt
        self._ensure_rows(len(ego["v"]))
        pred = self.predictor(pred, pred_age_s)
        leader = self.predictor(leader, leader_age_s)
        pred["age_s"] = pred_age_s
        held_w = self._state["yaw_rate"]

        out = self.law.compute(ego, pred, leader, sensors, dt)  # laws read the sample, never write it
        if (self.law.steers and self.lateral is None and self.fallback is None and self.sensed is None
                and "degraded" not in out and "stop" in out and out.get("yaw_rate") is not None):
            return self._steering_output(out, pred, held_w, ego)
        have = np.isfinite(pred["x"])
        # steering laws need the predecessor's pose: without any, hold speed and yaw rate
        a = np.where(have, out["accel"], 0.0) if self.law.steers else np.array(out["accel"], dtype=float)
        w = out.get("yaw_rate")

        if self.lateral is not None:
            lateral = self.lateral.compute(ego, pred, leader, sensors, dt)
            w = np.where(lateral["has_path"], lateral["yaw_rate"], held_w)

        degraded = np.zeros(len(have), bool)
        if self.fallback is not None:
            a, mode = self.fallback.apply(t_s, pred_age_s, ego, pred, sensors, dt, a)
            degraded = mode == ACC
            if degraded.any():
                self.law.hand_back(degraded, a[degraded])
        if "degraded" in out:
            degraded |= np.asarray(out["degraded"], bool)

        steered_by_sensor = np.zeros(len(have), bool)
        if self.sensed is not None:
            # called every step, degraded or not, so the sensed path is there when the V2X data goes stale
            sensed = self.sensed.compute(ego, {"x": sensors["target_x"], "y": sensors["target_y"]}, {}, {}, dt)
            steered_by_sensor = degraded & sensed["has_path"]
            if w is not None:
                w = np.where(steered_by_sensor, sensed["yaw_rate"], w)

        stop = out["stop"] & have & ~degraded if "stop" in out else np.zeros(len(have), bool)
        if w is not None:
            usable = (have | (self.lateral is not None) | steered_by_sensor) & ~stop
            self._state["yaw_rate"] = np.where(usable, w, held_w)
        return ControlOutput(
            accel=a, yaw_rate=self._state["yaw_rate"].copy(), stop=stop, degraded=degraded,
            desired_gap_m=self._desired_gap(ego, pred), pred=pred,
        )

    def _desired_gap(self, ego: Arrays, pred: Arrays) -> np.ndarray | Callable[[], np.ndarray]:
        """The law's desired gap, or for a law whose gap depends on its parameters only (``pure_desired_gap``) the
        function computing it from this step's speeds and curvatures (read now: the received samples change)."""
        curvature = np.empty(len(ego["v"]))
        _curvature(np.asarray(pred["v"], np.float64), np.asarray(pred["yaw_rate"], np.float64), curvature)
        return self._desired_gap_at(ego, curvature)

    def _desired_gap_at(self, ego: Arrays, curvature: np.ndarray) -> np.ndarray | Callable[[], np.ndarray]:
        """``_desired_gap`` given the predecessors' path curvatures."""
        v = ego["v"]
        law = self.law
        if getattr(law, "pure_desired_gap", False):
            law = law.at_rows()  # the rows' parameters of this step: a join or leave before the read changes them
            return lambda: np.asarray(law.desired_gap(v, curvature), dtype=float)
        return np.asarray(law.desired_gap(v, curvature), dtype=float)

    def _steering_output(self, out: Mapping[str, np.ndarray], pred: Any, held_w: np.ndarray,
                         ego: Arrays) -> ControlOutput:
        """The end of ``step`` for a steering law alone (no lateral stage, fallback or sensor steering, no degraded
        flag of its own), in one compiled pass: what the general path computes with about ten array operations.
        Received samples read in place (``LazyColumns`` with a source) are not gathered: the pass reads the rows
        and also gives the predecessors' path curvatures for the desired gap."""
        accel = np.asarray(out["accel"], np.float64)
        n = len(accel)
        a = np.empty(n)
        stop = np.empty(n, bool)
        w = np.empty(n)
        law_w, law_stop = np.asarray(out["yaw_rate"], np.float64), np.asarray(out["stop"], np.bool_)
        src = pred.source_of(_PRED_POSE) if isinstance(pred, LazyColumns) else None
        if src is not None:
            (px, pv, pw), rows = src
        else:  # a gathered sample: its own rows
            px, pv, pw = (np.asarray(pred[name], np.float64) for name in _PRED_POSE)
            rows = np.arange(n)
        curvature = np.empty(n)
        _steering_pass_rows(px, pv, pw, rows, accel, law_w, law_stop, held_w, a, stop, w, curvature)
        gap = self._desired_gap_at(ego, curvature)
        self._state["yaw_rate"] = w
        return ControlOutput(accel=a, yaw_rate=w.copy(), stop=stop, degraded=np.zeros(n, bool),
                             desired_gap_m=gap, pred=pred)


_PRED_POSE = ("x", "v", "yaw_rate")  # what the steering pass reads of the predecessor's sample


@njit(cache=True)
def _curvature(v, yaw_rate, out):  # pragma: no cover - compiled
    """The predecessor's path curvature w / v [1/m], 0 at or below 0.1 m/s (and where v is NaN)."""
    for i in range(out.shape[0]):
        out[i] = yaw_rate[i] / v[i] if v[i] > 0.1 else 0.0


@njit(cache=True)
def _steering_pass_rows(px, pv, pw, rows, accel, yaw_rate, law_stop, held_yaw_rate, a, stop, w,
                        curvature):  # pragma: no cover - compiled
    """Per row, reading the predecessor's sample at ``rows`` of ``px``, ``pv``, ``pw`` (no gathered copies): without
    its pose (x not finite) no acceleration and the held yaw rate; the law's stop only with a pose; the law's yaw
    rate unless stopped; and ``_curvature`` of the sample into ``curvature``."""
    for i in range(rows.shape[0]):
        r = rows[i]
        have = np.isfinite(px[r])
        a[i] = accel[i] if have else 0.0
        stop[i] = law_stop[i] and have
        w[i] = yaw_rate[i] if have and not stop[i] else held_yaw_rate[i]
        curvature[i] = pw[r] / pv[r] if pv[r] > 0.1 else 0.0
