"""The compiled step of the dynamic single-track model (``dynamic.py``) and everything it inlines.

numba's on-disk cache checks only the file of the cached function: a helper or a constant in another file would
leave a stale kernel behind when edited. So the parameter and state layout, the tyre codes, the actuators and the
scalar tyre forces all live here, in the kernel's own file.

Actuators and road loads (scalar functions, callable from Python with floats too):

- Steering: the command is clamped to ``+-max_angle``, followed through a first-order lag of time constant
  ``tau`` (discretised like the drive lag below) and rate-limited to ``+-max_rate``.
- Drive/brake: first-order lag on acceleration as in Plexe (Segata et al., "Plexe: a platooning extension for
  Veins", IEEE VNC 2014): ``a_k = alpha u_k + (1 - alpha) a_{k-1}``, ``alpha = dt / (tau + dt)``, with ``u`` clamped
  to ``[-max_decel, max_accel]``; ``tau = 0`` passes the command through.
- Drivetrain: the tractive force is capped by a maximum force (torque / wheel radius) and by ``P_max / v``.
- Road loads: rolling resistance ``c_rr m g`` (only while moving) and aerodynamic drag ``0.5 rho CdA v^2``
  (Rajamani, *Vehicle Dynamics and Control*, 2nd ed., sec. 4.2).

Tyre forces: the scalar counterparts of the numpy models in ``tyres.py`` (checked against them in
``tests/physics``).
"""

from __future__ import annotations

import math

from numba import njit

G_MPS2 = 9.81  # gravity [m/s^2]

TYRE_LINEAR, TYRE_FIALA, TYRE_FIALA_UNSATURATED, TYRE_PACEJKA, TYRE_PLUGIN = 0, 1, 2, 3, 4
"""Tyre model codes the kernel switches on (``tyres.TYRE_MODELS`` maps the built-in names to them; a plug-in's
lateral force is compiled into a kernel of its own by ``dynamic.kernel_with_tyre``)."""

MODE_SPEED_STEER, MODE_ACCEL_STEER, MODE_SPEED_YAW_RATE = 0, 1, 2
"""Input mode codes (``dynamic.INPUT_MODES`` maps the names to them)."""

# One row of parameters per robot, in this column order (``dynamic._param_row`` fills it). The pf_/pr_/px_ columns
# are the Pacejka (B, C, D, E) of the front and rear lateral and the longitudinal curves.
PARAM_COLUMNS: tuple[str, ...] = (
    "wheelbase_m", "cg_to_front_m", "mass_kg", "yaw_inertia_kgm2", "cg_height_m",
    "cornering_stiffness_front_npr", "cornering_stiffness_rear_npr", "mu",
    "pf_b", "pf_c", "pf_d", "pf_e", "pr_b", "pr_c", "pr_d", "pr_e", "px_b", "px_c", "px_d", "px_e",
    "long_stiffness_per_load", "tyre_model", "track_m", "wheel_radius_m",
    "max_steer_rad", "max_steer_rate_radps", "steer_tau_s", "accel_tau_s",
    "max_accel_mps2", "max_decel_mps2", "max_speed_mps", "max_drive_force_n", "max_power_w",
    "drive_split_rear", "brake_split_front", "rolling_resistance", "drag_area_m2", "air_density_kgpm3",
    "speed_gain_1ps", "blend_speed_low_mps", "blend_speed_high_mps", "substep_lambda_h", "max_substeps",
)

# Rows of the state array (one column per robot): the exposed rear-axle state first, then internal states.
STATE_ROWS: tuple[str, ...] = (
    "x", "y", "yaw", "v", "a", "yaw_rate", "steer",  # exposed state (rear axle)
    "vy", "accel_actuator", "alpha_f", "alpha_r", "fy_f", "fy_r", "fx_f", "fx_r", "ay", "ax",
    "slip_ratio_rear", "omega_rl", "omega_rr", "dist_rl", "dist_rr", "substeps",
)


def _columns(*names: str) -> tuple[int, ...]:
    return tuple(PARAM_COLUMNS.index(n) for n in names)


def _rows(*names: str) -> tuple[int, ...]:
    return tuple(STATE_ROWS.index(n) for n in names)


# named indices: the kernel reads p[i, P_MASS], s[S_VY, i]; numba freezes these module constants into the code
P_WHEELBASE, P_CG_TO_FRONT, P_MASS, P_YAW_INERTIA = _columns(
    "wheelbase_m", "cg_to_front_m", "mass_kg", "yaw_inertia_kgm2")
P_CG_HEIGHT, P_CORNERING_FRONT, P_CORNERING_REAR, P_MU = _columns(
    "cg_height_m", "cornering_stiffness_front_npr", "cornering_stiffness_rear_npr", "mu")
P_PF_B, P_PF_C, P_PF_D, P_PF_E = _columns("pf_b", "pf_c", "pf_d", "pf_e")
P_PR_B, P_PR_C, P_PR_D, P_PR_E = _columns("pr_b", "pr_c", "pr_d", "pr_e")
P_PX_B, P_PX_C, P_PX_D, P_PX_E = _columns("px_b", "px_c", "px_d", "px_e")
P_LONG_STIFFNESS, P_TYRE_MODEL, P_TRACK, P_WHEEL_RADIUS = _columns(
    "long_stiffness_per_load", "tyre_model", "track_m", "wheel_radius_m")
P_MAX_STEER, P_MAX_STEER_RATE, P_STEER_TAU, P_ACCEL_TAU = _columns(
    "max_steer_rad", "max_steer_rate_radps", "steer_tau_s", "accel_tau_s")
P_MAX_ACCEL, P_MAX_DECEL, P_MAX_SPEED, P_MAX_DRIVE_FORCE = _columns(
    "max_accel_mps2", "max_decel_mps2", "max_speed_mps", "max_drive_force_n")
P_MAX_POWER, P_DRIVE_SPLIT_REAR, P_BRAKE_SPLIT_FRONT, P_ROLLING_RESISTANCE = _columns(
    "max_power_w", "drive_split_rear", "brake_split_front", "rolling_resistance")
P_DRAG_AREA, P_AIR_DENSITY, P_SPEED_GAIN, P_BLEND_LOW = _columns(
    "drag_area_m2", "air_density_kgpm3", "speed_gain_1ps", "blend_speed_low_mps")
P_BLEND_HIGH, P_SUBSTEP_LAMBDA_H, P_MAX_SUBSTEPS = _columns("blend_speed_high_mps", "substep_lambda_h", "max_substeps")
S_X, S_Y, S_YAW, S_V = _rows("x", "y", "yaw", "v")
S_A, S_YAW_RATE, S_STEER, S_VY = _rows("a", "yaw_rate", "steer", "vy")
S_ACCEL_ACTUATOR, S_ALPHA_F, S_ALPHA_R, S_FY_F = _rows("accel_actuator", "alpha_f", "alpha_r", "fy_f")
S_FY_R, S_FX_F, S_FX_R, S_AY = _rows("fy_r", "fx_f", "fx_r", "ay")
S_AX, S_SLIP_RATIO_REAR, S_OMEGA_RL, S_OMEGA_RR = _rows("ax", "slip_ratio_rear", "omega_rl", "omega_rr")
S_DIST_RL, S_DIST_RR, S_SUBSTEPS = _rows("dist_rl", "dist_rr", "substeps")


# ---------------------------------------------------------------------------------------------------------------
# actuators and road loads
# ---------------------------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def lag_alpha(tau_s: float, dt_s: float) -> float:
    """Discrete first-order lag gain ``dt / (tau + dt)`` (1 for ``tau <= 0``)."""
    if tau_s <= 0.0:
        return 1.0
    return dt_s / (tau_s + dt_s)


@njit(cache=True, inline="always")
def steer_update(
    steer_rad: float, cmd_rad: float, max_angle_rad: float, max_rate_radps: float, tau_s: float, dt_s: float,
) -> float:
    """Steering angle [rad] after ``dt_s``: clamp, first-order lag, then rate limit."""
    target = min(max(cmd_rad, -max_angle_rad), max_angle_rad)
    d = lag_alpha(tau_s, dt_s) * (target - steer_rad)
    d_max = max_rate_radps * dt_s
    return steer_rad + min(max(d, -d_max), d_max)


@njit(cache=True, inline="always")
def accel_update(
    a_prev_mps2: float, cmd_mps2: float, max_accel_mps2: float, max_decel_mps2: float, tau_s: float, dt_s: float,
) -> float:
    """Plexe-style lagged acceleration [m/s^2]: ``alpha u + (1 - alpha) a_prev`` with ``u`` clamped."""
    u = min(max(cmd_mps2, -max_decel_mps2), max_accel_mps2)
    alpha = lag_alpha(tau_s, dt_s)
    return alpha * u + (1.0 - alpha) * a_prev_mps2


@njit(cache=True, inline="always")
def drive_force_limit(force_n: float, v_mps: float, max_force_n: float, max_power_w: float) -> float:
    """Tractive force [N] after the drivetrain's force (torque) and power limits; braking passes unchanged."""
    if force_n <= 0.0:
        return force_n
    f = min(force_n, max_force_n)
    # P = F v; below 0.5 m/s the power limit is held at its 0.5 m/s value (no infinite force at standstill)
    return min(f, max_power_w / max(abs(v_mps), 0.5))


@njit(cache=True, inline="always")
def resistance_force(v_mps: float, mass_kg: float, c_rr: float, drag_area_m2: float, rho_kgpm3: float) -> float:
    """Rolling resistance plus aerodynamic drag [N], opposing motion (positive for forward motion)."""
    if abs(v_mps) < 1e-3:
        return 0.0
    return math.copysign(c_rr * mass_kg * G_MPS2 + 0.5 * rho_kgpm3 * drag_area_m2 * v_mps * v_mps, v_mps)


# ---------------------------------------------------------------------------------------------------------------
# tyre forces (scalar)
# ---------------------------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def mf_value_slope(x: float, b: float, c: float, d: float, e: float) -> tuple[float, float]:
    """Magic formula value ``y`` and slope ``dy/dx`` at ``x`` (scalar)."""
    bx = b * x
    at_bx = math.atan(bx)
    phi = bx - e * (bx - at_bx)
    ang = c * math.atan(phi)
    dphi = b - e * (b - b / (1.0 + bx * bx))
    sa = math.sin(ang)
    # cos from sin (cheaper than a second trigonometric call); |ang| < pi for C < 2, so the sign is that of
    # pi/2 - |ang|
    ca = math.copysign(math.sqrt(max(1.0 - sa * sa, 0.0)), 0.5 * math.pi - abs(ang))
    return d * sa, d * ca * c / (1.0 + phi * phi) * dphi


@njit(cache=True, inline="always")
def lateral_force_stiffness(
    code: int, alpha: float, fz: float, c_alpha: float, mu: float, b: float, c: float, d: float, e: float,
) -> tuple[float, float]:
    """Lateral force ``Fy`` [N] and local cornering stiffness ``-dFy/dalpha`` [N/rad] of one axle (scalar).

    ``code`` is one of the ``TYRE_*`` codes; ``c_alpha`` is used by linear and Fiala, ``(b, c, d, e)`` by Pacejka
    (``d`` a friction coefficient multiplied by ``fz``).
    """
    if code == TYRE_LINEAR:
        return -c_alpha * alpha, c_alpha
    if code == TYRE_PACEJKA:
        y, dy = mf_value_slope(alpha, b, c, d, e)
        return -fz * y, fz * dy
    # Fiala: dF/dz = C (1 - C z / (3 mu Fz))^2 and dz/dalpha = 1 + z^2
    sgn = 1.0 if alpha >= 0.0 else -1.0
    z = math.tan(abs(alpha))
    cz = c_alpha * z
    mfz = mu * fz
    if code == TYRE_FIALA and cz >= 3.0 * mfz:
        return -sgn * mfz, 0.0
    q = cz / (3.0 * mfz)
    mag = cz * (1.0 - q + q * q / 3.0)
    slope = c_alpha * (1.0 - q) * (1.0 - q) * (1.0 + z * z)
    return -sgn * mag, slope


@njit(cache=True, inline="always")
def mf_inverse(y: float, b: float, c: float, d: float, e: float) -> float:
    """Slip ``x`` on the rising branch with ``pacejka(x) = y``; ``|y| >= d`` returns the peak slip (scalar).

    Solves ``C atan(phi) = asin(y / D)`` then ``(1 - E) u + E atan(u) = phi`` for ``u = B x`` by Newton (monotone
    for ``E < 1``).
    """
    q = y / d
    if q > 1.0:
        q = 1.0
    elif q < -1.0:
        q = -1.0
    ang = math.asin(q) / c
    # the rising branch ends where C atan(phi) = pi/2
    lim = 0.5 * math.pi / c
    if ang > lim:
        ang = lim
    elif ang < -lim:
        ang = -lim
    if abs(ang) >= 0.5 * math.pi - 1e-9:
        ang = math.copysign(0.5 * math.pi - 1e-9, ang)
    phi = math.tan(ang)
    u = phi
    for _ in range(8):
        g = (1.0 - e) * u + e * math.atan(u) - phi
        dg = (1.0 - e) + e / (1.0 + u * u)
        step = g / dg
        u -= step
        if abs(step) < 1e-10 * (1.0 + abs(u)):
            break
    return u / b


# ---------------------------------------------------------------------------------------------------------------
# the step
# ---------------------------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _linear_stiffness(p, i, fzf, fzr):  # pragma: no cover - compiled
    """Cornering stiffness per axle at zero slip [N/rad] (Pacejka: B C D Fz)."""
    if int(p[i, P_TYRE_MODEL]) == 3:
        return p[i, P_PF_B] * p[i, P_PF_C] * p[i, P_PF_D] * fzf, p[i, P_PR_B] * p[i, P_PR_C] * p[i, P_PR_D] * fzr
    return p[i, P_CORNERING_FRONT], p[i, P_CORNERING_REAR]


@njit(cache=True, error_model="numpy")
def step_kernel(s, p, cmd_speed, cmd_accel, cmd_steer, cmd_yaw_rate, mode, dt):  # pragma: no cover - compiled
    """Advance every robot (column of the state ``s``, row of the parameters ``p``) by ``dt`` in place, under the
    commands of input mode ``mode`` (``MODE_*``); the equations are in ``dynamic.py``'s docstring."""
    n = s.shape[1]
    for i in range(n):
        L = p[i, P_WHEELBASE]
        a_cg = p[i, P_CG_TO_FRONT]
        b_cg = L - a_cg
        m = p[i, P_MASS]
        izz = p[i, P_YAW_INERTIA]
        h_cg = p[i, P_CG_HEIGHT]
        mu = p[i, P_MU]
        code = int(p[i, P_TYRE_MODEL])
        track = p[i, P_TRACK]
        r_w = p[i, P_WHEEL_RADIUS]
        v_lo = p[i, P_BLEND_LOW]
        v_hi = p[i, P_BLEND_HIGH]
        fzf0 = m * G_MPS2 * b_cg / L
        fzr0 = m * G_MPS2 * a_cg / L
        cf_lin, cr_lin = _linear_stiffness(p, i, fzf0, fzr0)

        vx = s[S_V, i]
        vy = s[S_VY, i]
        r = s[S_YAW_RATE, i]
        yaw = s[S_YAW, i]
        x = s[S_X, i]
        y = s[S_Y, i]
        v_start = vx

        # --- commands -> steering target and acceleration demand
        max_speed = p[i, P_MAX_SPEED]
        kv = p[i, P_SPEED_GAIN]
        a_cmd = cmd_accel[i] if mode == MODE_ACCEL_STEER else kv * (min(max(cmd_speed[i], 0.0), max_speed) - vx)
        a_cmd = min(a_cmd, kv * (max_speed - vx))  # never accelerate beyond max speed
        if mode == MODE_SPEED_YAW_RATE:
            # steady-state yaw-rate gain inverted (Rajamani eq. 3.16 with K_us of eq. 3.21)
            k_us = m / L * (b_cg / cf_lin - a_cg / cr_lin)
            steer_cmd = math.atan(cmd_yaw_rate[i] * (L + k_us * vx * vx) / max(vx, 0.5 * v_lo))
        else:
            steer_cmd = cmd_steer[i]
        delta = steer_update(s[S_STEER, i], steer_cmd, p[i, P_MAX_STEER], p[i, P_MAX_STEER_RATE], p[i, P_STEER_TAU], dt)
        a_act = accel_update(s[S_ACCEL_ACTUATOR, i], a_cmd, p[i, P_MAX_ACCEL], p[i, P_MAX_DECEL], p[i, P_ACCEL_TAU], dt)
        cos_d = math.cos(delta)
        sin_d = math.sin(delta)
        tan_d = sin_d / cos_d

        # --- sub-steps: as many as the stiffest lateral mode needs
        vx_eff = max(vx, v_lo, 1e-3)
        lam = max((cf_lin + cr_lin) / (m * vx_eff), (a_cg * a_cg * cf_lin + b_cg * b_cg * cr_lin) / (izz * vx_eff))
        nsub = math.ceil(lam * dt / p[i, P_SUBSTEP_LAMBDA_H])
        nsub = min(max(nsub, 1), int(p[i, P_MAX_SUBSTEPS]))
        h = dt / nsub
        ax = s[S_AX, i]
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
            fyf, kf = lateral_force_stiffness(code, af, fzf, p[i, P_CORNERING_FRONT], mu,
                                              p[i, P_PF_B], p[i, P_PF_C], p[i, P_PF_D], p[i, P_PF_E])
            fyr, kr = lateral_force_stiffness(code, ar, fzr, p[i, P_CORNERING_REAR], mu,
                                              p[i, P_PR_B], p[i, P_PR_C], p[i, P_PR_D], p[i, P_PR_E])
            # drive / brake demand: the actuator acceleration is dvx/dt, so the demand feeds forward the road loads,
            # the drag of the front lateral force and the body-frame coupling vy r (as a wheel-speed based speed
            # controller would), leaving the friction limits as the only cause of error
            f_res = resistance_force(vx, m, p[i, P_ROLLING_RESISTANCE], p[i, P_DRAG_AREA], p[i, P_AIR_DENSITY])
            # below the blend speed the tyre forces are not meaningful (slip angles of a crawling wheel): their
            # longitudinal effect fades out with the same weight as the lateral dynamics
            w0 = min(max((vx - v_lo) / (v_hi - v_lo), 0.0), 1.0)
            fyf_drag = w0 * fyf * sin_d
            f_req = m * (a_act - vy * r) + f_res + fyf_drag
            # front forces act along the steered wheel: divide by cos(d) so that the body-x force is the demand
            if f_req > 0.0:
                f_req = drive_force_limit(f_req, vx, p[i, P_MAX_DRIVE_FORCE], p[i, P_MAX_POWER])
                fx_dem_f = (1.0 - p[i, P_DRIVE_SPLIT_REAR]) * f_req / cos_d
                fx_dem_r = p[i, P_DRIVE_SPLIT_REAR] * f_req
            else:
                fx_dem_f = p[i, P_BRAKE_SPLIT_FRONT] * f_req / cos_d
                fx_dem_r = (1.0 - p[i, P_BRAKE_SPLIT_FRONT]) * f_req
            # friction limits per axle: clamp Fx, then friction-ellipse scaling of (Fx, Fy)
            if code == TYRE_PACEJKA:
                fxmax_f = p[i, P_PX_D] * fzf
                fxmax_r = p[i, P_PX_D] * fzr
                fymax_f = p[i, P_PF_D] * fzf
                fymax_r = p[i, P_PR_D] * fzr
            else:
                fxmax_f = mu * fzf
                fxmax_r = mu * fzr
                fymax_f = mu * fzf
                fymax_r = mu * fzr
            fxf = min(max(fx_dem_f, -fxmax_f), fxmax_f)
            fxr = min(max(fx_dem_r, -fxmax_r), fxmax_r)
            if code != TYRE_LINEAR:
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
            if code == TYRE_PACEJKA:
                sig_peak = mf_inverse(p[i, P_PX_D], p[i, P_PX_B], p[i, P_PX_C], p[i, P_PX_D], p[i, P_PX_E])
            else:
                sig_peak = mu / p[i, P_LONG_STIFFNESS]
            over = abs(fx_dem_r) / max(abs(fxr), 1e-9 * m)
            sig = math.copysign(sig_peak * min(over, 50.0), fx_dem_r)
        elif code == TYRE_PACEJKA:
            sig = mf_inverse(fxr / fzr_end, p[i, P_PX_B], p[i, P_PX_C], p[i, P_PX_D], p[i, P_PX_E])
        else:
            sig = fxr / (p[i, P_LONG_STIFFNESS] * fzr_end)
        sig = max(sig, -1.0)  # a locked wheel does not turn backwards
        s[S_X, i] = x
        s[S_Y, i] = y
        if yaw > math.pi or yaw < -math.pi:  # wrap to [-pi, pi)
            yaw = (yaw + math.pi) % (2.0 * math.pi) - math.pi
        s[S_YAW, i] = yaw
        s[S_V, i] = vx
        s[S_A, i] = (vx - v_start) / dt
        s[S_YAW_RATE, i] = r
        s[S_STEER, i] = delta
        s[S_VY, i] = vy
        s[S_ACCEL_ACTUATOR, i] = a_act
        s[S_ALPHA_F, i] = af
        s[S_ALPHA_R, i] = ar
        s[S_FY_F, i] = fyf
        s[S_FY_R, i] = fyr
        s[S_FX_F, i] = fxf
        s[S_FX_R, i] = fxr
        s[S_AY, i] = ay
        s[S_AX, i] = ax
        s[S_SLIP_RATIO_REAR, i] = sig
        s[S_OMEGA_RL, i] = (vx - 0.5 * track * r) * (1.0 + sig) / r_w
        s[S_OMEGA_RR, i] = (vx + 0.5 * track * r) * (1.0 + sig) / r_w
        s[S_DIST_RL, i] = dist_l * (1.0 + sig)
        s[S_DIST_RR, i] = dist_r * (1.0 + sig)
        s[S_SUBSTEPS, i] = nsub

