"""Ploeg's CACC with a time-gap spacing policy and the predecessor's input as feedforward (Ploeg,
Scheepers, van Nunen, van de Wouw, Nijmeijer, "Design and experimental evaluation of cooperative adaptive
cruise control", IEEE ITSC 2011; string stability analysis in Ploeg, van de Wouw, Nijmeijer, IEEE TCST
22(2), 2014):

- e = gap - (r + h v)                       spacing error [m]
- e' = v_pred - v - h a                     its derivative [m/s]
- h u' = -u + kp e + kd e' + u_{i-1}        the controller's own state u is the acceleration command [m/s^2]

Per row, u is integrated over the controller period dt exactly for inputs held constant over the step
(zero-order hold): u_{k+1} = u_k exp(-dt/h) + (1 - exp(-dt/h)) (kp e + kd e' + u_{i-1}); unlike forward
Euler this stays stable for any dt. The returned command is u_{k+1}.

u_{i-1} is the predecessor's desired acceleration when a platooning message carried it (``pred["u_des"]``, or
``pred["u"]``); CAMs only carry the measured acceleration, so otherwise ``pred["a"]`` stands in for it (this adds
the predecessor's actuator lag to the feedforward path, and raises the smallest string-stable time gap).
v_pred - v is the range sensor's gap rate when available, else from the received speed.

Missing inputs drop their term so the command stays finite: no gap (NaN) drops the feedback kp e + kd e', no
received input counts as u_{i-1} = 0; such rows get ``degraded`` = True.

A new row starts its integrator at the vehicle's current acceleration ``ego["a"]`` (bumpless start).
Internally stable for kp > 0, kd > kp tau; string stable without delay for any h > 0, with a delay theta
roughly for h > 2 (theta + tau).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from pydantic import Field

from .base import Arrays, ControllerParams
from .longitudinal import LongitudinalController, as_f64, column, desired_or_measured
from .rowstate import RowStateMixin


class PloegCaccParams(ControllerParams):
    """Spacing policy and gains of Ploeg's CACC (defaults of Ploeg et al., IEEE T-ITS 15(2), 2014)."""

    time_gap_s: float = Field(0.5, gt=0, le=10, description="h: time gap of the spacing policy [s]")
    standstill_m: float = Field(2.0, ge=0, le=100, description="r: bumper-to-bumper gap at standstill [m]")
    kp: float = Field(0.2, gt=0, le=1e3, description="kp: gain on the spacing error [1/s^2]")
    kd: float = Field(0.7, gt=0, le=1e3, description="kd: gain on the spacing-error rate [1/s]")


@njit(cache=True)
def ploeg_kernel(
    gap, gap_rate, v, a, v_pred, u_pred, h, r, kp, kd, dt, u_state, degraded
):  # pragma: no cover
    """Advances ``u_state`` [m/s^2] by one step of h u' = -u + kp e + kd e' + u_{i-1} (exact under ZOH)."""
    decay = math.exp(-dt / h)
    for j in range(v.shape[0]):
        if not np.isfinite(u_state[j]):  # fresh row: start from the acceleration the vehicle already has
            u_state[j] = a[j] if np.isfinite(a[j]) else 0.0
        drive = 0.0
        ok = True
        if np.isfinite(gap[j]):
            e = gap[j] - (r + h * v[j])
            # d gap / dt: the range sensor's rate, else the received predecessor speed minus own
            e_dot = (gap_rate[j] if np.isfinite(gap_rate[j]) else v_pred[j] - v[j]) - h * a[j]
            if np.isfinite(e_dot):
                drive += kp * e + kd * e_dot
            else:
                drive += kp * e
                ok = False
        else:
            ok = False
        if np.isfinite(u_pred[j]):
            drive += u_pred[j]
        else:
            ok = False
        degraded[j] = not ok
        u_state[j] = decay * u_state[j] + (1.0 - decay) * drive


class PloegCacc(RowStateMixin, LongitudinalController):
    """Ploeg's CACC; keeps the integrator state u per row (``RowStateMixin``: add_rows / remove_rows)."""

    Params = PloegCaccParams

    def __init__(self, params: PloegCaccParams) -> None:
        super().__init__(params)
        self._declare_state("u", fill=np.nan)  # NaN: not started yet, set from ego["a"] on first use

    def compute(
        self, ego: Arrays, pred: Arrays, leader: Arrays, sensors: Arrays, dt: float
    ) -> dict[str, np.ndarray]:
        """Advances u by ``dt`` [s]; returns ``accel`` = u_{k+1} [m/s^2] and ``degraded`` (module doc)."""
        if dt <= 0:
            raise ValueError(f"PloegCacc.compute: dt must be > 0, got {dt}")
        p: PloegCaccParams = self.params  # type: ignore[assignment]
        v = as_f64(ego["v"])
        n = v.shape[0]
        self._ensure_rows(n)
        u_pred = column(pred, "u", n) if "u" in pred else desired_or_measured(pred, n)
        degraded = np.empty(n, dtype=np.bool_)
        u = self._state["u"]
        ploeg_kernel(
            column(sensors, "gap_m", n), column(sensors, "gap_rate_mps", n), v, column(ego, "a", n, 0.0),
            column(pred, "v", n), u_pred, p.time_gap_s, p.standstill_m, p.kp, p.kd, dt, u, degraded,
        )
        return {"accel": u.copy(), "degraded": degraded}

    def set_state(self, rows: np.ndarray, u: np.ndarray) -> None:
        """Overwrite the integrator of ``rows`` (indices or mask) with ``u`` [m/s^2], e.g. for bumpless
        transfer when a supervisor hands those rows back from another law."""
        self._state["u"][rows] = u

    def hand_back(self, rows: np.ndarray, accel: np.ndarray) -> None:
        """The integrator of ``rows`` takes the command applied instead of this law's (bumpless return)."""
        self.set_state(rows, accel)

    @property
    def state_u(self) -> np.ndarray:
        """Read-only copy of the integrator state u per row [m/s^2] (NaN: not started)."""
        return self._state["u"].copy()

    def desired_gap(self, v: np.ndarray, curvature: np.ndarray | None = None) -> np.ndarray:
        """r + h v, bumper to bumper (measured along the lane, so ``curvature`` does not change it)."""
        p: PloegCaccParams = self.params  # type: ignore[assignment]
        return p.standstill_m + p.time_gap_s * np.asarray(v, dtype=float)
