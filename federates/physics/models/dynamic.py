"""Dynamic single-track (bicycle) model with tyre slip, load transfer, actuators and wheel odometry.

Equations (body frame at the centre of gravity CG; Rajamani, *Vehicle Dynamics and Control*, 2nd ed., eqs. 2.25-2.31
and 13.x for the longitudinal forces)::

    m (vx' - vy r) = Fxf cos d - Fyf sin d + Fxr - F_res
    m (vy' + vx r) = Fyf cos d + Fxf sin d + Fyr
    Izz r'         = a (Fyf cos d + Fxf sin d) - b Fyr

with slip angles ``alpha_f = atan((vy + a r)/vx) - d``, ``alpha_r = atan((vy - b r)/vx)`` and the tyre models of
``tyres.py`` (``linear | fiala | fiala_unsaturated | pacejka``, per robot). Axle loads include the static split and
the longitudinal load transfer ``m ax h / L`` (``ax`` from the previous sub-step, so no algebraic loop). Longitudinal
axle forces come from the drive/brake actuator (``actuators.py``: its lagged acceleration is the demanded
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
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numba import njit

from .actuators import G_MPS2, accel_update, drive_force_limit, resistance_force, steer_update
from .base import InputMode, VehicleModel
from .tyres import TYRE_MODELS, lateral_force_stiffness, mf_inverse

INPUT_MODES: dict[str, int] = {"speed_steer": 0, "accel_steer": 1, "speed_yaw_rate": 2}

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

_COLS = (
    "wheelbase_m", "cg_to_front_m", "mass_kg", "yaw_inertia_kgm2", "cg_height_m",
    "cornering_stiffness_front_npr", "cornering_stiffness_rear_npr", "mu",
    "pf_b", "pf_c", "pf_d", "pf_e", "pr_b", "pr_c", "pr_d", "pr_e", "px_b", "px_c", "px_d", "px_e",
    "long_stiffness_per_load", "tyre_model", "track_m", "wheel_radius_m",
    "max_steer_rad", "max_steer_rate_radps", "steer_tau_s", "accel_tau_s",
    "max_accel_mps2", "max_decel_mps2", "max_speed_mps", "max_drive_force_n", "max_power_w",
    "drive_split_rear", "brake_split_front", "rolling_resistance", "drag_area_m2", "air_density_kgpm3",
    "speed_gain_1ps", "blend_speed_low_mps", "blend_speed_high_mps", "substep_lambda_h", "max_substeps",
)
_C = {name: k for k, name in enumerate(_COLS)}

STATE_ROWS: tuple[str, ...] = (
    "x", "y", "yaw", "v", "a", "yaw_rate", "steer",  # exposed state (rear axle)
    "vy", "accel_actuator", "alpha_f", "alpha_r", "fy_f", "fy_r", "fx_f", "fx_r", "ay", "ax",
    "slip_ratio_rear", "omega_rl", "omega_rr", "dist_rl", "dist_rr", "substeps",
)
_S = {name: k for k, name in enumerate(STATE_ROWS)}
_EXPOSED = ("x", "y", "yaw", "v", "a", "yaw_rate", "steer")


@njit(cache=True, inline="always")
def _linear_stiffness(p, i, fzf, fzr):  # pragma: no cover - compiled
    """Cornering stiffness per axle at zero slip [N/rad] (Pacejka: B C D Fz)."""
    if int(p[i, 21]) == 3:
        return p[i, 8] * p[i, 9] * p[i, 10] * fzf, p[i, 12] * p[i, 13] * p[i, 14] * fzr
    return p[i, 5], p[i, 6]


@njit(cache=True, error_model="numpy")
def _step_kernel(s, p, cmd_speed, cmd_accel, cmd_steer, cmd_yaw_rate, mode, dt):  # pragma: no cover - compiled
    n = s.shape[1]
    for i in range(n):
        L = p[i, 0]
        a_cg = p[i, 1]
        b_cg = L - a_cg
        m = p[i, 2]
        izz = p[i, 3]
        h_cg = p[i, 4]
        mu = p[i, 7]
        code = int(p[i, 21])
        track = p[i, 22]
        r_w = p[i, 23]
        v_lo = p[i, 39]
        v_hi = p[i, 40]
        fzf0 = m * G_MPS2 * b_cg / L
        fzr0 = m * G_MPS2 * a_cg / L
        cf_lin, cr_lin = _linear_stiffness(p, i, fzf0, fzr0)

        vx = s[3, i]
        vy = s[7, i]
        r = s[5, i]
        yaw = s[2, i]
        x = s[0, i]
        y = s[1, i]
        v_start = vx

        # --- commands -> steering target and acceleration demand
        max_speed = p[i, 30]
        kv = p[i, 38]
        a_cmd = cmd_accel[i] if mode == 1 else kv * (min(max(cmd_speed[i], 0.0), max_speed) - vx)
        a_cmd = min(a_cmd, kv * (max_speed - vx))  # never accelerate beyond max speed
        if mode == 2:
            # steady-state yaw-rate gain inverted (Rajamani eq. 3.16 with K_us of eq. 3.21)
            k_us = m / L * (b_cg / cf_lin - a_cg / cr_lin)
            steer_cmd = math.atan(cmd_yaw_rate[i] * (L + k_us * vx * vx) / max(vx, 0.5 * v_lo))
        else:
            steer_cmd = cmd_steer[i]
        delta = steer_update(s[6, i], steer_cmd, p[i, 24], p[i, 25], p[i, 26], dt)
        a_act = accel_update(s[8, i], a_cmd, p[i, 28], p[i, 29], p[i, 27], dt)
        cos_d = math.cos(delta)
        sin_d = math.sin(delta)
        tan_d = sin_d / cos_d

        # --- sub-steps: as many as the stiffest lateral mode needs
        vx_eff = max(vx, v_lo, 1e-3)
        lam = max((cf_lin + cr_lin) / (m * vx_eff), (a_cg * a_cg * cf_lin + b_cg * b_cg * cr_lin) / (izz * vx_eff))
        nsub = math.ceil(lam * dt / p[i, 41])
        nsub = min(max(nsub, 1), int(p[i, 42]))
        h = dt / nsub
        ax = s[16, i]
        fx_dem_r = 0.0
        fxr = 0.0
        fyf = 0.0
        fyr = 0.0
        fxf = 0.0
        af = 0.0
        ar = 0.0
        ay = 0.0
        dist_l = 0.0
        dist_r = 0.0
        vx_eps = max(0.05 * v_lo, 1e-3)
        sin0 = math.sin(yaw)
        cos0 = math.cos(yaw)
        for _ in range(nsub):
            # axle loads with longitudinal transfer, kept positive
            fzf = max(m * (G_MPS2 * b_cg - ax * h_cg) / L, 0.05 * m * G_MPS2)
            fzr = max(m * (G_MPS2 * a_cg + ax * h_cg) / L, 0.05 * m * G_MPS2)
            vxs = max(vx, vx_eps)
            uf = vy + a_cg * r
            ur = vy - b_cg * r
            af = math.atan(uf / vxs) - delta
            ar = math.atan(ur / vxs)
            fyf, kf = lateral_force_stiffness(code, af, fzf, p[i, 5], mu, p[i, 8], p[i, 9], p[i, 10], p[i, 11])
            fyr, kr = lateral_force_stiffness(code, ar, fzr, p[i, 6], mu, p[i, 12], p[i, 13], p[i, 14], p[i, 15])
            # drive / brake demand: the actuator acceleration is dvx/dt, so the demand feeds forward the road loads,
            # the drag of the front lateral force and the body-frame coupling vy r (as a wheel-speed based speed
            # controller would), leaving the friction limits as the only cause of error
            f_res = resistance_force(vx, m, p[i, 35], p[i, 36], p[i, 37])
            # below the blend speed the tyre forces are not meaningful (slip angles of a crawling wheel): their
            # longitudinal effect fades out with the same weight as the lateral dynamics
            w0 = min(max((vx - v_lo) / (v_hi - v_lo), 0.0), 1.0)
            fyf_drag = w0 * fyf * sin_d
            f_req = m * (a_act - vy * r) + f_res + fyf_drag
            # front forces act along the steered wheel: divide by cos(d) so that the body-x force is the demand
            if f_req > 0.0:
                f_req = drive_force_limit(f_req, vx, p[i, 31], p[i, 32])
                fx_dem_f = (1.0 - p[i, 33]) * f_req / cos_d
                fx_dem_r = p[i, 33] * f_req
            else:
                fx_dem_f = p[i, 34] * f_req / cos_d
                fx_dem_r = (1.0 - p[i, 34]) * f_req
            # friction limits per axle: clamp Fx, then friction-ellipse scaling of (Fx, Fy)
            if code == 3:
                fxmax_f = p[i, 18] * fzf
                fxmax_r = p[i, 18] * fzr
                fymax_f = p[i, 10] * fzf
                fymax_r = p[i, 14] * fzr
            else:
                fxmax_f = mu * fzf
                fxmax_r = mu * fzr
                fymax_f = mu * fzf
                fymax_r = mu * fzr
            fxf = min(max(fx_dem_f, -fxmax_f), fxmax_f)
            fxr = min(max(fx_dem_r, -fxmax_r), fxmax_r)
            if code != 0:
                ef = math.sqrt((fxf / fxmax_f) ** 2 + (fyf / fymax_f) ** 2)
                if ef > 1.0:
                    fxf /= ef
                    fyf /= ef
                    kf /= ef
                er = math.sqrt((fxr / fxmax_r) ** 2 + (fyr / fymax_r) ** 2)
                if er > 1.0:
                    fxr /= er
                    fyr /= er
                    kr /= er
            fy_front = fyf * cos_d + fxf * sin_d
            fx_body = fxf * cos_d - w0 * fyf * sin_d + fxr - f_res
            f_vy = (fy_front + fyr) / m - vx * r
            f_r = (a_cg * fy_front - b_cg * fyr) / izz
            # linearly implicit Euler on (vy, r); Jacobian from the (non-negative) local stiffness
            kf = max(kf, 0.0) * cos_d
            kr = max(kr, 0.0)
            gf = vxs / (vxs * vxs + uf * uf)
            gr = vxs / (vxs * vxs + ur * ur)
            j11 = -(kf * gf + kr * gr) / m
            j12 = -(kf * a_cg * gf - kr * b_cg * gr) / m - vx
            j21 = -(a_cg * kf * gf - b_cg * kr * gr) / izz
            j22 = -(a_cg * a_cg * kf * gf + b_cg * b_cg * kr * gr) / izz
            m00 = 1.0 - h * j11
            m01 = -h * j12
            m10 = -h * j21
            m11 = 1.0 - h * j22
            det = m00 * m11 - m01 * m10
            if det > 1e-9:
                dvy = h * (m11 * f_vy - m01 * f_r) / det
                dr = h * (-m10 * f_vy + m00 * f_r) / det
            else:
                dvy = h * f_vy
                dr = h * f_r
            ax = fx_body / m
            vx_new = max(vx + h * (ax + vy * r), 0.0)
            vy_dyn = vy + dvy
            r_dyn = r + dr
            # blend towards the kinematic bicycle at low speed
            w = min(max((vx_new - v_lo) / (v_hi - v_lo), 0.0), 1.0)
            r_kin = vx_new * tan_d / L
            r_new = w * r_dyn + (1.0 - w) * r_kin
            vy_new = w * vy_dyn + (1.0 - w) * b_cg * r_kin
            ay = w * (fy_front + fyr) / m + (1.0 - w) * vx_new * r_kin
            # rear-axle pose: exact arc at the mean body velocity and yaw rate of the sub-step
            u = 0.5 * (vx + vx_new)
            lat = 0.5 * (vy + vy_new) - b_cg * 0.5 * (r + r_new)
            wz = 0.5 * (r + r_new)
            dth = wz * h
            sin1 = math.sin(yaw + dth)
            cos1 = math.cos(yaw + dth)
            if abs(dth) > 1e-9:
                sc = (sin1 - sin0) / wz
                ss = (cos0 - cos1) / wz
            else:
                sc = h * 0.5 * (cos0 + cos1)
                ss = h * 0.5 * (sin0 + sin1)
            sin0 = sin1
            cos0 = cos1
            x += u * sc - lat * ss
            y += u * ss + lat * sc
            yaw += dth
            dist_l += h * (u - wz * 0.5 * track)
            dist_r += h * (u + wz * 0.5 * track)
            vx = vx_new
            vy = vy_new
            r = r_new

        # --- rear wheel slip ratio from the rear longitudinal force (pure-slip curve inverted); beyond the limit the
        # excess demand spins (or locks) the wheel in proportion
        fzr_end = max(m * (G_MPS2 * a_cg + ax * h_cg) / L, 0.05 * m * G_MPS2)
        if abs(fx_dem_r) > abs(fxr) * (1.0 + 1e-9) + 1e-12:
            sig_peak = mf_inverse(p[i, 18], p[i, 16], p[i, 17], p[i, 18], p[i, 19]) if code == 3 else mu / p[i, 20]
            over = abs(fx_dem_r) / max(abs(fxr), 1e-9 * m)
            sig = math.copysign(sig_peak * min(over, 50.0), fx_dem_r)
        elif code == 3:
            sig = mf_inverse(fxr / fzr_end, p[i, 16], p[i, 17], p[i, 18], p[i, 19])
        else:
            sig = fxr / (p[i, 20] * fzr_end)
        sig = max(sig, -1.0)  # a locked wheel does not turn backwards
        s[0, i] = x
        s[1, i] = y
        if yaw > math.pi or yaw < -math.pi:  # wrap to [-pi, pi)
            yaw = (yaw + math.pi) % (2.0 * math.pi) - math.pi
        s[2, i] = yaw
        s[3, i] = vx
        s[4, i] = (vx - v_start) / dt
        s[5, i] = r
        s[6, i] = delta
        s[7, i] = vy
        s[8, i] = a_act
        s[9, i] = af
        s[10, i] = ar
        s[11, i] = fyf
        s[12, i] = fyr
        s[13, i] = fxf
        s[14, i] = fxr
        s[15, i] = ay
        s[16, i] = ax
        s[17, i] = sig
        s[18, i] = (vx - 0.5 * track * r) * (1.0 + sig) / r_w
        s[19, i] = (vx + 0.5 * track * r) * (1.0 + sig) / r_w
        s[20, i] = dist_l * (1.0 + sig)
        s[21, i] = dist_r * (1.0 + sig)
        s[22, i] = nsub


def _param_row(params: Mapping[str, Any]) -> np.ndarray:
    """One parameter row in ``_COLS`` order, with defaults and checks."""
    q = {k: v for k, v in PARAM_DEFAULTS.items()}
    q.update({k: v for k, v in params.items() if k in PARAM_DEFAULTS})
    code = TYRE_MODELS.get(str(q["tyre_model"]))
    if code is None:
        raise KeyError(f"unknown tyre model '{q['tyre_model']}'; allowed: {', '.join(TYRE_MODELS)}")
    missing = [k for k, v in q.items() if v is None and not k.startswith(("pacejka", "blend"))]
    if code == 3:
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
        **{k: q[k] for k in _COLS if k in q},
        "pf_b": pf[0], "pf_c": pf[1], "pf_d": pf[2], "pf_e": pf[3],
        "pr_b": pr[0], "pr_c": pr[1], "pr_d": pr[2], "pr_e": pr[3],
        "px_b": px[0], "px_c": px[1], "px_d": px[2], "px_e": px[3],
        "tyre_model": code, "blend_speed_low_mps": v_lo, "blend_speed_high_mps": v_hi,
    }
    return np.array([float(vals[k]) for k in _COLS], dtype=np.float64)


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
        self._p = np.empty((0, len(_COLS)))
        self._s = np.empty((len(STATE_ROWS), 0))

    def __len__(self) -> int:
        return self._s.shape[1]

    def add(self, params: Sequence[Mapping[str, Any]], initial: Mapping[str, np.ndarray]) -> None:
        """Append robots with their parameters and initial rear-axle ``x, y, yaw, v`` (optional ``steer``); the
        lateral states start kinematically consistent (``r = v tan(steer)/L``, no rear-axle side slip)."""
        n = len(params)
        rows = np.array([_param_row(p) for p in params], dtype=np.float64).reshape(n, len(_COLS))
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

        _step_kernel(self._s, self._p, col("speed"), col("accel"), col("steer"), col("yaw_rate"), self._mode,
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
        pac = p[:, _C["tyre_model"]] == TYRE_MODELS["pacejka"]
        fzf, fzr = m * G_MPS2 * b / L, m * G_MPS2 * a / L
        cf[pac] = (p[:, _C["pf_b"]] * p[:, _C["pf_c"]] * p[:, _C["pf_d"]] * fzf)[pac]
        cr[pac] = (p[:, _C["pr_b"]] * p[:, _C["pr_c"]] * p[:, _C["pr_d"]] * fzr)[pac]
        return m / L * (b / cf - a / cr)
