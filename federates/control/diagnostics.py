"""The control federate's ``control_diag`` port: what each follower's law used, with the desired gap computed only
when someone reads it (the trace does; a run without traces never does)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from controllers.columns import LazyColumns
from controllers.pipeline import ControlOutput

from .received import Received

GapParts = Iterable[tuple[np.ndarray, ControlOutput]]
"""Per group: its rows and its last ``ControlOutput`` (whose ``desired_gap_m`` may not be computed yet)."""


def with_gaps(base: np.ndarray, parts: GapParts) -> np.ndarray:
    """A copy of ``base`` (desired gap per row) with each group's last desired gaps written over its rows."""
    gaps = base.copy()
    for rows, out in parts:
        gaps[rows] = out.desired_gap_m
    return gaps


def control_diagnostics(ids: np.ndarray, pred: Received, t_ns: int, degraded: np.ndarray, gap_base: np.ndarray,
                        gap_parts: GapParts) -> LazyColumns:
    """The ``control_diag`` value of this step: copies of this step's values now, ``desired_gap_m`` when read
    (``gap_base`` is never written into and the outputs keep their gaps, so it is this step's whenever read)."""
    diag = {
        "id": ids,
        "pred_age_s": pred.age_s(t_ns, never=np.nan),
        "desired_gap_m": None,
        "pred_x": pred.values["x"].copy(),
        "pred_y": pred.values["y"].copy(),
        "pred_v": pred.values["v"].copy(),
        "degraded": degraded.astype(np.float64),
    }
    parts = list(gap_parts)
    return LazyColumns(tuple(diag), lambda name: with_gaps(gap_base, parts) if name == "desired_gap_m" else diag[name])
