"""Pure pursuit path following (Coulter, "Implementation of the pure pursuit path tracking algorithm",
CMU-RI-TR-92-01, 1992), vectorised over vehicles.

The vehicle (rear-axle point p, heading th, speed v) aims at a target point on the path at the look-ahead
distance L_d and drives the circular arc through p, tangent to its heading, that passes through the target:

- L_d = max(L_min, L_0 + t_L |v|)                         look-ahead [m]
- y_l = -sin(th) dx + cos(th) dy, d^2 = dx^2 + dy^2        target offset in the vehicle frame [m]
- kappa = 2 y_l / d^2                                      curvature of that arc [1/m]
- w = v kappa                                              yaw rate [rad/s]; 0 at v = 0, never NaN

Two users:

- ``PurePursuit``: a follower steers along its predecessor's breadcrumbs, the received positions kept in a
  fixed-size ring buffer per follower (rows x ``buffer_size`` x 2). It only steers (returns ``yaw_rate``); a
  longitudinal law supplies ``accel``.
- ``WaypointDriver``: a leader drives a scenario polyline (open or closed) with a speed profile along it and
  returns (v, w, a).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from pydantic import Field, model_validator

from .base import Arrays, Controller, ControllerParams
from .longitudinal import as_f64
from .rowstate import RowStateMixin


class LookaheadParams(ControllerParams):
    """Look-ahead distance L_d = max(L_min, L_0 + t_L |v|)."""

    lookahead_m: float = Field(1.0, ge=0, description="L_0: constant part of the look-ahead distance [m]")
    lookahead_time_s: float = Field(0.0, ge=0, description="t_L: speed-proportional part of the look-ahead [s]")
    min_lookahead_m: float = Field(0.3, gt=0, description="L_min: lower bound of the look-ahead distance [m]")
    max_curvature_per_m: float = Field(
        math.inf, gt=0, allow_inf_nan=True,
        description="|kappa| is clamped to this (e.g. tan(max steer) / wheelbase); .inf: no clamp [1/m]",
    )


@njit(cache=True, inline="always")
def _arc_yaw_rate(x, y, th, v, tx, ty, kmax):  # pragma: no cover
    """w = v kappa, kappa = 2 y_l / d^2 towards target (tx, ty); 0 when the target coincides with p."""
    dx = tx - x
    dy = ty - y
    d2 = dx * dx + dy * dy
    if d2 < 1e-12:
        return 0.0
    kappa = 2.0 * (-math.sin(th) * dx + math.cos(th) * dy) / d2
    kappa = min(max(kappa, -kmax), kmax)
    return v * kappa


# --- breadcrumbs ------------------------------------------------------------------------------------------


class PurePursuitParams(LookaheadParams):
    """Look-ahead and breadcrumb buffer of the follower's pure pursuit."""

    buffer_size: int = Field(256, ge=4, description="breadcrumbs kept per follower (ring buffer) [-]")
    crumb_spacing_m: float = Field(
        0.05, gt=0, description="a received position is stored when this far from the newest crumb [m]"
    )


@njit(cache=True)
def push_crumbs(px, py, buf, total, spacing):  # pragma: no cover
    """Appends (px, py) to each row's ring buffer when finite and at least ``spacing`` from its newest crumb.

    ``total[j]`` counts crumbs ever stored: crumb number q lives in slot q % size and is still held while
    q >= total - size."""
    size = buf.shape[1]
    for j in range(px.shape[0]):
        if not (np.isfinite(px[j]) and np.isfinite(py[j])):
            continue
        if total[j] > 0:
            last = (total[j] - 1) % size
            dx = px[j] - buf[j, last, 0]
            dy = py[j] - buf[j, last, 1]
            if dx * dx + dy * dy < spacing * spacing:
                continue
        slot = total[j] % size
        buf[j, slot, 0] = px[j]
        buf[j, slot, 1] = py[j]
        total[j] += 1


@njit(cache=True)
def pursue_crumbs(x, y, th, v, buf, total, closest, L0, tL, Lmin, kmax, out_w, has_path):  # pragma: no cover
    """Fills ``out_w`` [rad/s]; ``closest[j]`` (crumb number nearest the vehicle) only moves forward, so a
    path that crosses itself cannot pull the target back to an older pass."""
    size = buf.shape[1]
    for j in range(x.shape[0]):
        n = total[j]
        if n == 0:
            out_w[j] = 0.0
            has_path[j] = False
            continue
        has_path[j] = True
        first = max(n - size, closest[j])
        best = first
        best_d2 = math.inf
        for q in range(first, n):
            s = q % size
            dx = buf[j, s, 0] - x[j]
            dy = buf[j, s, 1] - y[j]
            d2 = dx * dx + dy * dy
            if d2 < best_d2:
                best_d2 = d2
                best = q
        closest[j] = best
        L = max(Lmin, L0 + tL * abs(v[j]))
        s_last = (n - 1) % size
        tx = buf[j, s_last, 0]  # path shorter than L ahead: aim at the newest crumb
        ty = buf[j, s_last, 1]
        for q in range(best, n):
            s = q % size
            dx1 = buf[j, s, 0] - x[j]
            dy1 = buf[j, s, 1] - y[j]
            if dx1 * dx1 + dy1 * dy1 >= L * L:
                tx = buf[j, s, 0]
                ty = buf[j, s, 1]
                if q > best:  # interpolate where the segment from the previous crumb leaves the circle of radius L
                    s0 = (q - 1) % size
                    x0 = buf[j, s0, 0] - x[j]
                    y0 = buf[j, s0, 1] - y[j]
                    ex = dx1 - x0
                    ey = dy1 - y0
                    a = ex * ex + ey * ey
                    b = 2.0 * (x0 * ex + y0 * ey)
                    c = x0 * x0 + y0 * y0 - L * L  # <= 0: the previous crumb is inside the circle
                    if a > 0.0:
                        r = (-b + math.sqrt(max(b * b - 4.0 * a * c, 0.0))) / (2.0 * a)
                        r = min(max(r, 0.0), 1.0)
                        tx = x[j] + x0 + r * ex
                        ty = y[j] + y0 + r * ey
                break
        out_w[j] = _arc_yaw_rate(x[j], y[j], th[j], v[j], tx, ty, kmax)


class PurePursuit(RowStateMixin, Controller):
    """Follower steering on its predecessor's breadcrumbs (per-row ring buffers, ``RowStateMixin``).

    ``compute`` stores ``pred["x"], pred["y"]`` as a new crumb (when finite and at least ``crumb_spacing_m``
    from the newest), then returns ``yaw_rate`` [rad/s] from pure pursuit on the crumbs for the follower at
    ``ego["x"], ego["y"], ego["yaw"]`` with speed ``ego["v"]``, and ``has_path`` (False while a row has no
    crumb yet; its yaw rate is then 0). It does not command acceleration: pair it with a longitudinal law.
    """

    Params = PurePursuitParams
    steers = True

    def __init__(self, params: PurePursuitParams) -> None:
        super().__init__(params)
        self._declare_state("crumbs", (params.buffer_size, 2), fill=np.nan)
        self._declare_state("total", fill=0, dtype=np.int64)
        self._declare_state("closest", fill=0, dtype=np.int64)

    def compute(
        self, ego: Arrays, pred: Arrays, leader: Arrays, sensors: Arrays, dt: float
    ) -> dict[str, np.ndarray]:
        """Adds the received predecessor position to the breadcrumbs; returns ``yaw_rate`` and ``has_path``."""
        p: PurePursuitParams = self.params  # type: ignore[assignment]
        x = as_f64(ego["x"])
        n = x.shape[0]
        self._ensure_rows(n)
        st = self._state
        push_crumbs(as_f64(pred["x"]), as_f64(pred["y"]), st["crumbs"], st["total"], p.crumb_spacing_m)
        w = np.empty(n)
        has_path = np.empty(n, dtype=np.bool_)
        pursue_crumbs(
            x, as_f64(ego["y"]), as_f64(ego["yaw"]), as_f64(ego["v"]), st["crumbs"], st["total"],
            st["closest"], p.lookahead_m, p.lookahead_time_s, p.min_lookahead_m, p.max_curvature_per_m,
            w, has_path,
        )
        return {"yaw_rate": w, "has_path": has_path}

    def crumbs(self, row: int) -> np.ndarray:
        """The breadcrumbs of ``row``, oldest first, shape (k, 2) [m]."""
        size = self._state["crumbs"].shape[1]
        n = int(self._state["total"][row])
        order = np.arange(max(0, n - size), n) % size
        return self._state["crumbs"][row, order].copy()


# --- waypoints ----------------------------------------------------------------------------------------------


class WaypointDriverParams(LookaheadParams):
    """A polyline of waypoints, its speed profile and the speed loop of a leader."""

    waypoints: list[tuple[float, float]] = Field(
        ..., min_length=2, description="polyline vertices (x, y) in the scenario frame [m]"
    )
    closed: bool = Field(False, description="drive the polyline as a loop (last vertex joins the first)")
    speed_mps: float = Field(1.0, ge=0, description="cruise speed along the path when speeds_mps is not given [m/s]")
    speeds_mps: list[float] | None = Field(
        None, description="speed at each waypoint, linear in arc length between them [m/s]"
    )
    max_accel_mps2: float = Field(1.0, gt=0, description="acceleration limit of the speed loop [m/s^2]")
    max_decel_mps2: float = Field(1.0, gt=0, description="deceleration limit; an open path ends at rest [m/s^2]")
    speed_gain: float = Field(1.0, gt=0, description="k_v in a = clamp(k_v (v_ref - v)) [1/s]")
    search_back_m: float = Field(1.0, ge=0, description="projection search window behind the last one [m]")
    search_ahead_m: float = Field(5.0, gt=0, description="projection search window ahead of the last one [m]")

    @model_validator(mode="after")
    def _check_path(self) -> WaypointDriverParams:
        if self.speeds_mps is not None and len(self.speeds_mps) != len(self.waypoints):
            raise ValueError(f"speeds_mps has {len(self.speeds_mps)} entries for {len(self.waypoints)} waypoints")
        pts = np.asarray(self.waypoints, dtype=float)
        if self.closed:
            pts = np.vstack([pts, pts[:1]])
        if np.any(np.hypot(*np.diff(pts, axis=0).T) <= 0.0):
            raise ValueError("consecutive waypoints must differ (closed: the last must differ from the first)")
        return self


@njit(cache=True, inline="always")
def _point_at(pts, s_cum, s):  # pragma: no cover
    """Point at arc length s (clamped to the path) on the polyline."""
    k = np.searchsorted(s_cum, s, side="right") - 1
    k = min(max(k, 0), pts.shape[0] - 2)
    seg = s_cum[k + 1] - s_cum[k]
    r = min(max((s - s_cum[k]) / seg, 0.0), 1.0)
    return pts[k, 0] + r * (pts[k + 1, 0] - pts[k, 0]), pts[k, 1] + r * (pts[k + 1, 1] - pts[k, 1])


@njit(cache=True)
def waypoint_kernel(
    x, y, th, v, pts, s_cum, speeds, closed, progress, L0, tL, Lmin, kmax, back, ahead,
    kv, amax, dmax, dt, out_v, out_w, out_a,
):  # pragma: no cover
    """Projects each leader on the path near its last progress, pursues the point L_d further along, and
    tracks the path's speed profile: a = clamp(k_v (v_ref - v), -dmax, amax); on an open path it brakes at the
    constant deceleration v^2 / (2 rem) once that reaches dmax / 2 (rem: arc length left), ending at rest.
    The yaw rate is w = v_cmd kappa with the speed commanded for the step."""
    total = s_cum[-1]
    nseg = pts.shape[0] - 1
    for j in range(x.shape[0]):
        best_d2 = math.inf
        best_s = 0.0
        for k in range(nseg):
            ex = pts[k + 1, 0] - pts[k, 0]
            ey = pts[k + 1, 1] - pts[k, 1]
            seg2 = ex * ex + ey * ey
            r = ((x[j] - pts[k, 0]) * ex + (y[j] - pts[k, 1]) * ey) / seg2
            r = min(max(r, 0.0), 1.0)
            s = s_cum[k] + r * math.sqrt(seg2)
            if np.isfinite(progress[j]):  # stay near the last projection (self-crossing paths)
                ds = s - progress[j]
                if closed:
                    ds = (ds + 0.5 * total) % total - 0.5 * total
                if ds < -back or ds > ahead:
                    continue
            dx = pts[k, 0] + r * ex - x[j]
            dy = pts[k, 1] + r * ey - y[j]
            d2 = dx * dx + dy * dy
            if d2 < best_d2:
                best_d2 = d2
                best_s = s
        if best_d2 == math.inf:  # nothing in the window (e.g. moved far): search the whole path again
            progress[j] = np.nan
            best_s = 0.0
            for k in range(nseg):
                ex = pts[k + 1, 0] - pts[k, 0]
                ey = pts[k + 1, 1] - pts[k, 1]
                seg2 = ex * ex + ey * ey
                r = min(max(((x[j] - pts[k, 0]) * ex + (y[j] - pts[k, 1]) * ey) / seg2, 0.0), 1.0)
                dx = pts[k, 0] + r * ex - x[j]
                dy = pts[k, 1] + r * ey - y[j]
                if dx * dx + dy * dy < best_d2:
                    best_d2 = dx * dx + dy * dy
                    best_s = s_cum[k] + r * math.sqrt(seg2)
        progress[j] = best_s
        L = max(Lmin, L0 + tL * abs(v[j]))
        s_t = best_s + L
        s_t = s_t % total if closed else min(s_t, total)
        tx, ty = _point_at(pts, s_cum, s_t)
        # speed reference at the projection, linear between waypoints
        k = min(max(np.searchsorted(s_cum, best_s, side="right") - 1, 0), nseg - 1)
        r = min(max((best_s - s_cum[k]) / (s_cum[k + 1] - s_cum[k]), 0.0), 1.0)
        v_ref = speeds[k] + r * (speeds[k + 1] - speeds[k])
        a = min(max(kv * (v_ref - v[j]), -dmax), amax)
        if not closed:  # stop at the end: constant deceleration v^2 / (2 rem) once it reaches dmax / 2
            rem = total - best_s
            if rem <= 1e-3:
                a = -v[j] / dt
            else:
                a_stop = -v[j] * v[j] / (2.0 * rem)
                if a_stop <= -0.5 * dmax:
                    a = max(min(a, a_stop), -dmax)
        v_cmd = max(v[j] + a * dt, 0.0)
        out_v[j] = v_cmd
        out_a[j] = (v_cmd - v[j]) / dt
        out_w[j] = _arc_yaw_rate(x[j], y[j], th[j], v_cmd, tx, ty, kmax)


class WaypointDriver(RowStateMixin, Controller):
    """Leaders driving a polyline with pure pursuit and a speed profile; one row per leader.

    Each row keeps its arc-length progress (``RowStateMixin``) so the projection only searches a window
    [-search_back_m, +search_ahead_m] around it; a new row starts from the global projection.
    ``step(x, y, yaw, v, dt)`` -> (v, w, a): the speed command after dt [m/s], yaw rate [rad/s] and the
    acceleration that leads to that speed [m/s^2]; ``compute`` returns the same as ``speed``, ``yaw_rate``,
    ``accel``.
    """

    Params = WaypointDriverParams
    steers = True

    def __init__(self, params: WaypointDriverParams) -> None:
        super().__init__(params)
        pts = np.asarray(params.waypoints, dtype=float)
        speeds = np.full(len(pts), params.speed_mps) if params.speeds_mps is None else np.asarray(params.speeds_mps)
        if params.closed:
            pts = np.vstack([pts, pts[:1]])
            speeds = np.append(speeds, speeds[0])
        self._pts = np.ascontiguousarray(pts)
        self._speeds = np.ascontiguousarray(speeds, dtype=float)
        self._s_cum = np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(pts, axis=0).T))])
        self._declare_state("progress", fill=np.nan)

    @property
    def length_m(self) -> float:
        """Arc length of the path (closing segment included for a loop) [m]."""
        return float(self._s_cum[-1])

    @property
    def progress_m(self) -> np.ndarray:
        """Arc length of each row's last projection on the path [m] (NaN before the first step)."""
        return self._state["progress"].copy()

    def step(
        self, x: np.ndarray, y: np.ndarray, yaw: np.ndarray, v: np.ndarray, dt: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(v, w, a) per leader for pose (x, y, yaw) and speed v, over the control period dt [s]."""
        if dt <= 0:
            raise ValueError(f"WaypointDriver.step: dt must be > 0, got {dt}")
        p: WaypointDriverParams = self.params  # type: ignore[assignment]
        x = as_f64(x)
        n = x.shape[0]
        self._ensure_rows(n)
        out_v, out_w, out_a = np.empty(n), np.empty(n), np.empty(n)
        waypoint_kernel(
            x, as_f64(y), as_f64(yaw), as_f64(v), self._pts, self._s_cum, self._speeds, p.closed,
            self._state["progress"], p.lookahead_m, p.lookahead_time_s, p.min_lookahead_m,
            p.max_curvature_per_m, p.search_back_m, p.search_ahead_m, p.speed_gain, p.max_accel_mps2,
            p.max_decel_mps2, dt, out_v, out_w, out_a,
        )
        return out_v, out_w, out_a

    def compute(
        self, ego: Arrays, pred: Arrays, leader: Arrays, sensors: Arrays, dt: float
    ) -> dict[str, np.ndarray]:
        """``speed``, ``yaw_rate`` and ``accel`` for leaders at ``ego`` (x, y, yaw, v)."""
        v, w, a = self.step(ego["x"], ego["y"], ego["yaw"], ego["v"], dt)
        return {"speed": v, "yaw_rate": w, "accel": a}
