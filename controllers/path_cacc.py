"""PATH CACC with a constant spacing, as in Plexe / SUMO's CC car-following model (Rajamani, Vehicle Dynamics
and Control, 2nd ed., ch. 7, constant-spacing platoon with leader and predecessor information):

- eps = -gap + d                  spacing error [m], d the constant bumper-to-bumper gap (5 m)
- eps' = v - v_pred               [m/s]
- u = a1 a_pred + a2 a_leader + a3 eps' + a4 (v - v_leader) + a5 eps
- a1 = 1 - C1, a2 = C1, a3 = -(2 xi - C1 (xi + sqrt(xi^2 - 1))) wn, a4 = -C1 (xi + sqrt(xi^2 - 1)) wn,
  a5 = -wn^2

eps' comes from the range sensor's gap rate (eps' = -gap_rate), else from the received predecessor speed.
Missing inputs drop their term so the command stays finite: no gap (NaN) gives eps = 0, no received
acceleration counts as 0, no leader speed as v_leader = v. Such rows get ``degraded`` = True; a supervising
policy (controllers.fallback) should take over for them.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from pydantic import Field

from .base import Arrays, ControllerParams
from .longitudinal import LongitudinalController, as_f64, column, desired_or_measured


class PathCaccParams(ControllerParams):
    """Spacing and gains of the PATH CACC (Plexe defaults)."""

    spacing_m: float = Field(5.0, gt=0, le=1000, description="d: constant bumper-to-bumper gap [m]")
    c1: float = Field(0.5, ge=0, le=1, description="C1: weight of the leader's acceleration [-]")
    xi: float = Field(1.0, ge=1, le=100, description="xi: damping ratio [-] (>= 1 for the real square root)")
    omega_n: float = Field(0.2, gt=0, le=100, description="wn: bandwidth of the spacing loop [rad/s]")


def path_gains(c1: float, xi: float, wn: float) -> tuple[float, float, float, float, float]:
    """(a1, a2, a3, a4, a5) from C1, xi, wn (Rajamani ch. 7)."""
    root = xi + math.sqrt(xi * xi - 1.0)
    return 1.0 - c1, c1, -(2.0 * xi - c1 * root) * wn, -c1 * root * wn, -wn * wn


@njit(cache=True)
def path_cacc_kernel(
    gap, gap_rate, v, v_pred, a_pred, v_lead, a_lead, d, a1, a2, a3, a4, a5, out, degraded
):  # pragma: no cover
    """Fills ``out`` [m/s^2] with the PATH CACC command and ``degraded`` with the rows missing an input."""
    for j in range(v.shape[0]):
        eps = -gap[j] + d if np.isfinite(gap[j]) else 0.0
        # d gap / dt: the range sensor's rate, else the received predecessor speed minus own
        eps_dot = -(gap_rate[j] if np.isfinite(gap_rate[j]) else v_pred[j] - v[j])
        if not np.isfinite(eps_dot):
            eps_dot = 0.0
        ap = a_pred[j] if np.isfinite(a_pred[j]) else 0.0
        al = a_lead[j] if np.isfinite(a_lead[j]) else 0.0
        dv_lead = v[j] - v_lead[j] if np.isfinite(v_lead[j]) else 0.0
        have_v2x = np.isfinite(a_pred[j]) and np.isfinite(a_lead[j]) and np.isfinite(v_lead[j])
        degraded[j] = not (have_v2x and np.isfinite(gap[j]))
        out[j] = a1 * ap + a2 * al + a3 * eps_dot + a4 * dv_lead + a5 * eps


class PathCacc(LongitudinalController):
    """Rajamani's constant-spacing CACC using predecessor and leader data."""

    Params = PathCaccParams

    def compute(
        self, ego: Arrays, pred: Arrays, leader: Arrays, sensors: Arrays, dt: float
    ) -> dict[str, np.ndarray]:
        """``accel`` = a1 a_pred + a2 a_leader + a3 eps' + a4 (v - v_leader) + a5 eps [m/s^2]; ``degraded``
        marks rows where a missing input was replaced (see the module docstring)."""
        p: PathCaccParams = self.params  # type: ignore[assignment]
        v = as_f64(ego["v"])
        n = v.shape[0]
        out = np.empty(n)
        degraded = np.empty(n, dtype=np.bool_)
        path_cacc_kernel(
            column(sensors, "gap_m", n), column(sensors, "gap_rate_mps", n), v,
            column(pred, "v", n), desired_or_measured(pred, n), column(leader, "v", n), desired_or_measured(leader, n),
            p.spacing_m, *path_gains(p.c1, p.xi, p.omega_n), out, degraded,
        )
        return {"accel": out, "degraded": degraded}

    def desired_gap(self, v: np.ndarray, curvature: np.ndarray | None = None) -> np.ndarray:
        """The constant spacing d at every speed and ``curvature`` (bumper to bumper)."""
        p: PathCaccParams = self.params  # type: ignore[assignment]
        return np.full_like(np.asarray(v, dtype=float), p.spacing_m)
