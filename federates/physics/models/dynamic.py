"""Dynamic single-track (bicycle) model with tyre slip, load transfer, actuators and wheel odometry.

Equations (body frame at the centre of gravity CG; Rajamani, *Vehicle Dynamics and Control*, 2nd ed., eqs. 2.25-2.31
and 13.x for the longitudinal forces)::

    m (vx' - vy r) = Fxf cos d - Fyf sin d + Fxr - F_res
    m (vy' + vx r) = Fyf cos d + Fxf sin d + Fyr
    Izz r'         = a (Fyf cos d + Fxf sin d) - b Fyr

with slip angles ``alpha_f = atan((vy + a r)/vx) - d``, ``alpha_r = atan((vy - b r)/vx)`` and the tyre models of
``tyres.py`` (``linear | fiala | fiala_unsaturated | pacejka``, per robot). Axle loads include the static split and
the longitudinal load transfer ``m ax h / L`` (``ax`` from the previous sub-step, so no algebraic loop). Longitudinal
axle forces come from the drive/brake actuator (see ``dynamic_kernel.py``: its lagged acceleration is the demanded
``dvx/dt``, with road loads, the drag of the front lateral force and the ``vy r`` coupling fed forward) and are
limited per axle by the friction ellipse.

Reference point. The exposed state (``x, y, yaw, v, a, yaw_rate, steer``) is the REAR-AXLE point, as in the
kinematic model. The rear-axle velocity in the body frame is ``(vx, vy - b r)``; the pose is integrated with it
exactly along the arc (constant body velocity and yaw rate over a sub-step). The CG is ``b`` ahead of the rear axle:
``x_cg = x + b cos(yaw)``, ``y_cg = y + b sin(yaw)`` (``cg_state()``). ``v`` is the longitudinal speed ``vx``
(the same at every point of the rigid body), ``a = dv/dt`` over the step.

Integration. Fixed outer step ``dt``; the kernel splits it into ``n`` sub-steps when the lateral dynamics are
stiffer than ``dt`` allows: ``n = ceil(lambda dt / substep_lambda_h)`` with ``lambda`` the larger diagonal rate
``(Cf+Cr)/(m vx)``, ``(a^2 Cf + b^2 Cr)/(Izz vx)``. ``(vy, r)`` advance by a linearly implicit Euler step (Jacobian
from the local tyre stiffness), stable for stiff small vehicles; ``vx`` advances explicitly.

Low speed. Below ``blend_speed_low_mps`` the lateral states follow the kinematic bicycle (``r = vx tan d / L``,
``vy = b r``: no rear-axle side slip); up to ``blend_speed_high_mps`` the two are blended linearly. Slip angles use
``max(vx, eps)``, so nothing divides by zero at standstill. The vehicle does not reverse (``vx >= 0``).

Input modes (constructor ``input_mode``): ``speed_steer`` (speed tracked by a proportional loop into the
acceleration actuator), ``accel_steer`` (acceleration straight into the actuator), ``speed_yaw_rate`` (yaw rate
turned into steering through the steady-state gain ``r/d = vx / (L + K_us vx^2)``, i.e.
``d = atan(r_cmd (L + K_us vx^2) / vx)``).
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numba import njit

from core.registry import UnknownNameError
from core.robots import SharedParams, param_rows

from .base import InputMode, VehicleModel
from .dynamic_kernel import (
    G_MPS2,
    MODE_ACCEL_STEER,
    MODE_SPEED_STEER,
    MODE_SPEED_YAW_RATE,
    PARAM_COLUMNS,
    STATE_ROWS,
    TYRE_PACEJKA,
    TYRE_PLUGIN,
    lateral_force_stiffness,
    step_kernel,
)
from .tyres import TyreModel, resolve_tyre

INPUT_MODES: dict[str, int] = {
    "speed_steer": MODE_SPEED_STEER, "accel_steer": MODE_ACCEL_STEER, "speed_yaw_rate": MODE_SPEED_YAW_RATE,
}

# Parameter columns (name, default); None = required. Tuples of four are Pacejka (B, C, D, E), D a friction
# coefficient multiplied by the axle load.
PARAM_DEFAULTS: dict[str, Any] = {
    "wheelbase_m": None,
    "cg_to_front_m": None,
    "mass_kg": None,
    "yaw_inertia_kgm2": None,
    "cg_height_m": 0.0,
    "cornering_stiffness_front_npr": None,  # per axle [N/rad]
    "cornering_stiffness_rear_npr": None,
    "mu": 1.0,
    "pacejka_lat_front": None,  # (B, C, D, E); required only with tyre_model "pacejka"
    "pacejka_lat_rear": None,
    "pacejka_long": None,  # longitudinal (B, C, D, E); default derived from long_stiffness_per_load
    "long_stiffness_per_load": 20.0,  # dFx/dsigma / Fz [-] for non-Pacejka tyres
    "tyre_model": "fiala",
    "track_m": 0.0,
    "wheel_radius_m": 0.3,
    "max_steer_rad": None,
    "max_steer_rate_radps": math.inf,
    "steer_tau_s": 0.0,
    "accel_tau_s": 0.0,
    "max_accel_mps2": None,
    "max_decel_mps2": None,
    "max_speed_mps": None,
    "max_drive_force_n": math.inf,
    "max_power_w": math.inf,
    "drive_split_rear": 1.0,  # share of tractive force on the rear axle (1 = rear-wheel drive)
    "brake_split_front": 0.6,  # share of braking force on the front axle
    "rolling_resistance": 0.0,
    "drag_area_m2": 0.0,  # Cd * A
    "air_density_kgpm3": 1.2,
    "speed_gain_1ps": 2.0,  # speed loop: a_cmd = k (v_cmd - v)
    "blend_speed_low_mps": None,  # default 0.3 sqrt(g L)
    "blend_speed_high_mps": None,  # default 0.6 sqrt(g L)
    "substep_lambda_h": 2.0,
    "max_substeps": 20,
}

_C = {name: k for k, name in enumerate(PARAM_COLUMNS)}
_S = {name: k for k, name in enumerate(STATE_ROWS)}
_EXPOSED = ("x", "y", "yaw", "v", "a", "yaw_rate", "steer")


def _tyre(name: str) -> tuple[int, type[TyreModel] | None]:
    """The kernel code of tyre model ``name`` (its registered class's ``code``) and, for a plug-in, its class."""
    try:
        cls = resolve_tyre(name)
    except UnknownNameError as exc:
        raise KeyError(str(exc)) from None
    return cls.code, (cls if cls.code == TYRE_PLUGIN else None)


def _param_row(params: Mapping[str, Any]) -> np.ndarray:
    """One parameter row in ``PARAM_COLUMNS`` order, with defaults and checks."""
    q = {k: v for k, v in PARAM_DEFAULTS.items()}
    q.update({k: v for k, v in params.items() if k in PARAM_DEFAULTS})
    code, _ = _tyre(str(q["tyre_model"]))
    missing = [k for k, v in q.items() if v is None and not k.startswith(("pacejka", "blend"))]
    if code == TYRE_PACEJKA:
        missing += [k for k in ("pacejka_lat_front", "pacejka_lat_rear") if q[k] is None]
    if missing:
        raise ValueError(f"dynamic single-track parameters missing: {', '.join(missing)}")
    L = float(q["wheelbase_m"])
    if L <= 0 or not 0.0 < float(q["cg_to_front_m"]) < L:
        raise ValueError("need wheelbase_m > 0 and 0 < cg_to_front_m < wheelbase_m")
    for k in ("mass_kg", "yaw_inertia_kgm2", "mu", "cornering_stiffness_front_npr",
              "cornering_stiffness_rear_npr", "wheel_radius_m", "long_stiffness_per_load", "substep_lambda_h"):
        if float(q[k]) <= 0:
            raise ValueError(f"{k} must be positive, got {q[k]}")
    v_lo = q["blend_speed_low_mps"] if q["blend_speed_low_mps"] is not None else 0.3 * math.sqrt(G_MPS2 * L)
    v_hi = q["blend_speed_high_mps"] if q["blend_speed_high_mps"] is not None else 2.0 * v_lo
    if not 0.0 < v_lo < v_hi:
        raise ValueError("need 0 < blend_speed_low_mps < blend_speed_high_mps")
    mu = float(q["mu"])
    pf = q["pacejka_lat_front"] or (1.0, 1.0, mu, 0.0)
    pr = q["pacejka_lat_rear"] or (1.0, 1.0, mu, 0.0)
    # default longitudinal curve: peak mu, C = 1.65 (typical longitudinal shape), slope = long_stiffness_per_load
    px = q["pacejka_long"] or (float(q["long_stiffness_per_load"]) / (1.65 * mu), 1.65, mu, 0.0)
    for name, t in (("pacejka_lat_front", pf), ("pacejka_lat_rear", pr), ("pacejka_long", px)):
        if len(t) != 4 or float(t[0]) <= 0 or not 0 < float(t[1]) < 2 or float(t[2]) <= 0 or float(t[3]) >= 1:
            raise ValueError(f"{name} must be (B, C, D, E) with B, D > 0, 0 < C < 2 and E < 1, got {t}")
    vals = {
        **{k: q[k] for k in PARAM_COLUMNS if k in q},
        "pf_b": pf[0], "pf_c": pf[1], "pf_d": pf[2], "pf_e": pf[3],
        "pr_b": pr[0], "pr_c": pr[1], "pr_d": pr[2], "pr_e": pr[3],
        "px_b": px[0], "px_c": px[1], "px_d": px[2], "px_e": px[3],
        "tyre_model": code, "blend_speed_low_mps": v_lo, "blend_speed_high_mps": v_hi,
    }
    return np.array([float(vals[k]) for k in PARAM_COLUMNS], dtype=np.float64)


class DynamicSingleTrack(VehicleModel):
    """Dynamic single-track model for N robots (tyre model per robot), one compiled kernel per step.

    ``input_mode``: ``speed_steer`` (default), ``accel_steer`` or ``speed_yaw_rate``. Parameters per robot are the
    keys of ``PARAM_DEFAULTS`` (presets in ``federates/physics/presets.py``; unknown keys are ignored).
    """

    def __init__(self, dt: float, input_mode: InputMode = "speed_steer") -> None:
        super().__init__(dt)
        if input_mode not in INPUT_MODES:
            raise ValueError(f"unknown input_mode '{input_mode}'; allowed: {', '.join(INPUT_MODES)}")
        self.input_mode = input_mode  # type: ignore[misc]  # per instance, overriding the class default
        self._mode = INPUT_MODES[input_mode]
        self._p = np.empty((0, len(PARAM_COLUMNS)))
        self._s = np.empty((len(STATE_ROWS), 0))
        self._kernel = step_kernel  # a tyre plug-in's robots need a kernel compiled around it
        self._tyre_plugin: type[TyreModel] | None = None

    def __len__(self) -> int:
        return self._s.shape[1]

    def add(self, params: Sequence[Mapping[str, Any]], initial: Mapping[str, np.ndarray]) -> None:
        """Append robots with their parameters and initial rear-axle ``x, y, yaw, v`` (optional ``steer``); the
        lateral states start kinematically consistent (``r = v tan(steer)/L``, no rear-axle side slip)."""
        n = len(params)
        blocks = params.distinct if isinstance(params, SharedParams) else params
        plugins = {plugin for p in blocks if (plugin := _tyre(str(p.get("tyre_model", "fiala")))[1]) is not None}
        if self._tyre_plugin is not None:
            plugins.add(self._tyre_plugin)
        if len(plugins) > 1:  # one compiled kernel steps all robots of a model and input mode
            names = ", ".join(sorted(f"{c.__module__}:{c.__qualname__}" for c in plugins))
            raise ValueError(f"robots of one vehicle model and input mode use one tyre plug-in at most, got {names}")
        if plugins:
            self._tyre_plugin = plugins.pop()
            self._kernel = kernel_with_tyre(self._tyre_plugin.lateral)
        rows = param_rows(params, _param_row).reshape(n, len(PARAM_COLUMNS))
        new = np.zeros((len(STATE_ROWS), n))
        for name in ("x", "y", "yaw", "v"):
            new[_S[name]] = np.asarray(initial[name], dtype=np.float64)
        steer = np.asarray(initial.get("steer", np.zeros(n)), dtype=np.float64)
        new[_S["steer"]] = steer
        L = rows[:, _C["wheelbase_m"]]
        b = L - rows[:, _C["cg_to_front_m"]]
        r = new[_S["v"]] * np.tan(steer) / L
        new[_S["yaw_rate"]] = r
        new[_S["vy"]] = b * r
        self._p = np.ascontiguousarray(np.vstack([self._p, rows]))
        self._s = np.ascontiguousarray(np.hstack([self._s, new]))

    def remove(self, rows: np.ndarray) -> None:
        """Delete robots at ``rows``."""
        self._p = np.ascontiguousarray(np.delete(self._p, rows, axis=0))
        self._s = np.ascontiguousarray(np.delete(self._s, rows, axis=1))

    def step(self, commands: Mapping[str, np.ndarray]) -> None:
        """Advance by ``dt`` under ``commands`` (``speed, accel, steer, yaw_rate``; the mode picks the pair)."""
        n = self._s.shape[1]
        if n == 0:
            return

        def col(name: str) -> np.ndarray:
            return np.ascontiguousarray(commands[name], dtype=np.float64).reshape(n)

        self._kernel(self._s, self._p, col("speed"), col("accel"), col("steer"), col("yaw_rate"), self._mode,
                     float(self.dt))

    @property
    def state(self) -> dict[str, np.ndarray]:
        """``x, y, yaw, v, a, yaw_rate, steer`` at the rear axle (live views)."""
        return {name: self._s[_S[name]] for name in _EXPOSED}

    @property
    def diagnostics(self) -> dict[str, np.ndarray]:
        """Internal states (live views): ``vy`` lateral velocity at the CG [m/s], ``accel_actuator`` [m/s^2],
        ``alpha_f, alpha_r`` slip angles [rad], ``fy_f, fy_r, fx_f, fx_r`` axle forces [N], ``ay, ax`` CG
        accelerations in the body frame [m/s^2], ``slip_ratio_rear`` [-], ``substeps`` used in the last step."""
        return {name: self._s[_S[name]] for name in STATE_ROWS if name not in _EXPOSED}

    def wheel_odometry(self) -> dict[str, np.ndarray]:
        """What rear wheel encoders see in the last step, slip included (live views): ``omega_rl, omega_rr``
        angular speeds [rad/s] at the end of the step, ``dist_rl, dist_rr`` rolled distance ``r_w * angle`` [m]
        during the step, ``slip_ratio`` of the rear axle [-]."""
        return {
            "omega_rl": self._s[_S["omega_rl"]], "omega_rr": self._s[_S["omega_rr"]],
            "dist_rl": self._s[_S["dist_rl"]], "dist_rr": self._s[_S["dist_rr"]],
            "slip_ratio": self._s[_S["slip_ratio_rear"]],
        }

    def cg_state(self) -> dict[str, np.ndarray]:
        """Centre-of-gravity position [m] and body-frame velocity ``vx, vy`` [m/s] (new arrays)."""
        b = self._p[:, _C["wheelbase_m"]] - self._p[:, _C["cg_to_front_m"]]
        yaw = self._s[_S["yaw"]]
        return {
            "x": self._s[_S["x"]] + b * np.cos(yaw), "y": self._s[_S["y"]] + b * np.sin(yaw),
            "vx": self._s[_S["v"]].copy(), "vy": self._s[_S["vy"]].copy(),
        }

    def understeer_gradient(self) -> np.ndarray:
        """``K_us = m/L (b/Cf - a/Cr)`` [rad/(m/s^2)] from the zero-slip cornering stiffness (Rajamani eq. 3.21)."""
        p = self._p
        L, a, m = p[:, _C["wheelbase_m"]], p[:, _C["cg_to_front_m"]], p[:, _C["mass_kg"]]
        b = L - a
        cf, cr = p[:, _C["cornering_stiffness_front_npr"]].copy(), p[:, _C["cornering_stiffness_rear_npr"]].copy()
        pac = p[:, _C["tyre_model"]] == TYRE_PACEJKA
        fzf, fzr = m * G_MPS2 * b / L, m * G_MPS2 * a / L
        cf[pac] = (p[:, _C["pf_b"]] * p[:, _C["pf_c"]] * p[:, _C["pf_d"]] * fzf)[pac]
        cr[pac] = (p[:, _C["pr_b"]] * p[:, _C["pr_c"]] * p[:, _C["pr_d"]] * fzr)[pac]
        return m / L * (b / cf - a / cr)


_PLUGIN_KERNELS: dict[Any, Callable[..., None]] = {}


def kernel_with_tyre(lateral: Any) -> Callable[..., None]:
    """``step_kernel`` with a tyre plug-in's lateral force for the rows whose code is ``TYRE_PLUGIN``.

    ``lateral(alpha, fz, c_alpha, mu) -> (fy, stiffness)`` is a numba-compiled function with the signs of
    ``lateral_force_stiffness``. The step's own code is reused, not copied: the same function body compiled with
    ``lateral_force_stiffness`` bound to a dispatcher that sends plug-in rows to ``lateral``. numba cannot cache a
    kernel built at run time, so it compiles once per process (a few seconds) and is kept here."""
    if lateral not in _PLUGIN_KERNELS:

        @njit(inline="always")
        def forces(code, alpha, fz, c_alpha, mu, b, c, d, e):  # pragma: no cover - compiled
            if code == TYRE_PLUGIN:
                return lateral(alpha, fz, c_alpha, mu)
            return lateral_force_stiffness(code, alpha, fz, c_alpha, mu, b, c, d, e)

        body = step_kernel.py_func
        scope = {**body.__globals__, "lateral_force_stiffness": forces}
        rebound = types.FunctionType(body.__code__, scope, "step_kernel_with_tyre", body.__defaults__)
        _PLUGIN_KERNELS[lateral] = njit(error_model="numpy")(rebound)
    return _PLUGIN_KERNELS[lateral]
