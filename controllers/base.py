"""The control-law interface: a law is vectorised over the followers that use it and is fed only data.

``ego`` is what the followers believe about themselves (the ``estimate`` port rows of those followers), ``pred``
is what they last received about their predecessor over the channel (``cam_rx`` rows), ``leader`` likewise for the
platoon leader, ``sensors`` what on-board sensors measure (e.g. ``range_m``, ``range_rate_mps``; NaN when there is
no target). All arrays are aligned row by row and in SI units. A law returns at least ``accel`` (m/s^2) and, when
it steers, ``yaw_rate`` (rad/s); laws that only act longitudinally leave steering to a path follower.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

Arrays = Mapping[str, np.ndarray]


class ControllerParams(BaseModel):
    """Base of every law's parameter model: unknown keys are errors, and numbers are finite (a field that means
    "no limit" by infinity says so with its own ``allow_inf_nan``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Controller(ABC):
    """A control law for a group of followers sharing one parameter set.

    ``Params`` is the pydantic model of the law's parameters (scenario ``controller`` block minus type/period).
    ``steers`` tells whether the law outputs a yaw rate itself.
    """

    Params: ClassVar[type[ControllerParams]] = ControllerParams
    steers: ClassVar[bool] = False
    gap_reference: ClassVar[str] = "axle"
    pure_desired_gap: ClassVar[bool] = False
    """True when ``desired_gap`` depends on the parameters alone (no state): it may then be computed when read."""
    row_params: ClassVar[tuple[str, ...]] = ()
    """Numeric parameters that may differ from row to row of one group (followers of many batch points, or of
    blocks that differ only in these, share one vectorised call): the law reads them with ``param``."""
    row_values: Mapping[str, np.ndarray] = {}
    """Per-row values of ``row_params`` (arrays over the group's rows) when the pipeline set them; empty: every row
    has ``params``'. Never mutated: the pipeline assigns a new mapping."""

    def __init__(self, params: ControllerParams) -> None:
        self.params = params

    def param(self, name: str) -> Any:
        """A parameter's value: an array over the group's rows when rows carry their own (``row_values``), else the
        scalar of ``params``."""
        values = self.row_values.get(name)
        return getattr(self.params, name) if values is None else values

    def at_rows(self, rows: Any = None) -> Controller:
        """This law as the group rows ``rows`` (indices; None: all, as they are now) see it, for questions about a
        few of its followers (a maneuver's desired gap) rather than the whole group, or asked later: itself when no
        row carries values of its own, else a new law with the same ``params`` whose ``row_values`` are those
        rows' (its ``desired_gap`` then takes one speed per row of ``rows``). Row state is not carried over: ask
        it only what depends on parameters."""
        if not self.row_values:
            return self
        law = type(self)(self.params)
        if rows is None:  # the mapping is replaced, never mutated, when rows join or leave: this one stays
            law.row_values = self.row_values
        else:
            index = np.asarray(rows, np.int64).reshape(-1)
            law.row_values = {name: column[index] for name, column in self.row_values.items()}
        return law

    def _rows_asked(self, n: int) -> None:
        """Raises unless ``n`` values (speeds) can be read against the rows' own parameters: one per row."""
        rows = len(next(iter(self.row_values.values()), ()))
        if self.row_values and n != rows:
            raise ValueError(f"{type(self).__name__}: {n} values for a group of {rows} rows with parameters of "
                             "their own; ask at_rows(rows) about fewer rows")

    @abstractmethod
    def compute(
        self, ego: Arrays, pred: Arrays, leader: Arrays, sensors: Arrays, dt: float
    ) -> dict[str, np.ndarray]:
        """Commands for each row: ``accel`` (m/s^2) and, for steering laws, ``yaw_rate`` (rad/s)."""

    def hand_back(self, rows: np.ndarray, accel: np.ndarray) -> None:
        """A supervisor (the fallback) applied ``accel`` [m/s^2] to ``rows`` (indices or a mask) instead of this
        law's command. A law with internal state aligns it, so that its return is bumpless; stateless laws ignore
        it."""
        return None

    def desired_gap(self, v: np.ndarray, curvature: np.ndarray | None = None) -> np.ndarray:
        """Desired gap at own speed ``v`` while the predecessor drives with ``curvature`` [1/m] (None: straight),
        measured as ``gap_reference`` says ("axle": straight-line distance between rear-axle reference points,
        "bumper": bumper to bumper). Used for the spacing-error metric."""
        return np.zeros_like(v)

    def spacing_error(self, ego: Arrays, pred: Arrays, dims: Mapping[str, float],
                      pred_dims: Mapping[str, float]) -> np.ndarray:
        """The law's own longitudinal spacing error from true states (for metrics): gap - desired gap, the gap
        measured as ``gap_reference`` says. ``dims``: length_m, rear_overhang_m of the follower and predecessor."""
        axle_gap = np.hypot(pred["x"] - ego["x"], pred["y"] - ego["y"])
        curvature = np.where(pred["v"] > 0.1, pred["yaw_rate"] / np.maximum(pred["v"], 0.1), 0.0)
        if self.gap_reference == "bumper":
            gap = axle_gap - pred_dims["rear_overhang_m"] - (dims["length_m"] - dims["rear_overhang_m"])
        else:
            gap = axle_gap
        return gap - self.desired_gap(ego["v"], curvature)

    @staticmethod
    def describe(params: Any) -> str:
        """One line for reports."""
        return str(params)
