"""Vehicle parameter checks: the allowed range of every numeric parameter and what an override may name.

The presets themselves are the core's catalogue (``core.vehicle_presets``), re-exported here.
"""

from __future__ import annotations

import math
from typing import Any

from core.vehicle_presets import PRESETS, preset  # the presets stay importable from here

_INF = float("inf")

PARAMETER_RANGES: dict[str, tuple[float, float, bool]] = {
    # name: (low, high, low excluded). Lengths and masses are positive (a zero wheelbase divides by zero); the
    # upper bounds are generous for road vehicles (a 100 m, 1,000 t road train) and only keep numbers physical.
    "wheelbase_m": (0.0, 100.0, True),
    "length_m": (0.0, 100.0, True),
    "width_m": (0.0, 20.0, True),
    "track_m": (0.0, 20.0, False),
    "rear_overhang_m": (0.0, 100.0, False),
    "wheel_radius_m": (0.0, 10.0, True),
    "cg_to_front_m": (0.0, 100.0, True),
    "cg_height_m": (0.0, 20.0, False),
    "mass_kg": (0.0, 1e6, True),
    "yaw_inertia_kgm2": (0.0, 1e9, True),
    "cornering_stiffness_front_npr": (0.0, 1e8, True),
    "cornering_stiffness_rear_npr": (0.0, 1e8, True),
    "long_stiffness_per_load": (0.0, 1e3, True),
    "mu": (0.0, 5.0, True),
    "max_steer_rad": (0.0, 1.5708, True),
    "max_steer_rate_radps": (0.0, 1e3, True),
    "max_speed_mps": (0.0, 200.0, True),
    "max_accel_mps2": (0.0, 100.0, True),
    "max_decel_mps2": (0.0, 100.0, True),
    "max_drive_force_n": (0.0, 1e8, True),
    "max_power_w": (0.0, 1e9, True),
    "steer_tau_s": (0.0, 10.0, False),
    "accel_tau_s": (0.0, 10.0, False),
    "drive_split_rear": (0.0, 1.0, False),
    "brake_split_front": (0.0, 1.0, False),
    "rolling_resistance": (0.0, 1.0, False),
    "drag_area_m2": (0.0, 100.0, False),
    "air_density_kgpm3": (0.0, 10.0, True),
    "speed_gain_1ps": (0.0, 1e3, True),
    "blend_speed_low_mps": (0.0, 200.0, True),
    "blend_speed_high_mps": (0.0, 200.0, True),
    "substep_lambda_h": (0.0, 100.0, True),
    "max_substeps": (1.0, 1000.0, False),
}
"""Allowed range of every numeric vehicle parameter; a parameter not listed only has to be finite."""


def parameter_range_problems(params: dict[str, Any]) -> list[tuple[str, str]]:
    """``(name, message)`` for each override out of its physical range (``PARAMETER_RANGES``); NaN and infinity
    never pass (leave a limit out for "no limit"). When both are given, the centre of gravity lies between the
    axles (a fleet override may inherit the other from its template's preset, which is not known here)."""
    problems = []
    for key, value in params.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue  # a wrong type is parameter_problems' to report
        low, high, open_low = PARAMETER_RANGES.get(key, (-_INF, _INF, True))
        below = value <= low if open_low else value < low
        if not math.isfinite(value) or below or value > high:
            left = "(" if open_low else "["
            problems.append((key, f"must be a finite number in {left}{low:g}, {high:g}], got {value!r}"))
    a, wheelbase = params.get("cg_to_front_m"), params.get("wheelbase_m")
    if not problems and isinstance(a, int | float) and isinstance(wheelbase, int | float) and not a < wheelbase:
        problems.append(("cg_to_front_m", f"must be below wheelbase_m ({wheelbase:g}): the centre of gravity lies "
                                          f"between the axles, got {a:g}"))
    return problems


_UNKNOWN_LISTED = 10
"""Most unknown parameter names one error lists (a mapping of 100,000 made-up names is one mistake)."""


def parameter_problems(params: dict[str, Any]) -> list[str]:
    """What is wrong with vehicle parameter overrides: unknown names (with a suggestion) and wrong types.

    Known names are those of any preset, of the dynamic model and ``input_mode``; numbers must be numbers, the
    Pacejka coefficients four numbers (B, C, D, E), ``tyre_model`` and ``input_mode`` one of their names.
    """
    import difflib

    from core.registry import is_plugin_path

    from .models.dynamic import PARAM_DEFAULTS
    from .models.tyres import TYRE_MODELS, resolve_tyre

    builtin_tyres = TYRE_MODELS.builtin_names()
    choices = {"tyre_model": builtin_tyres,
               "input_mode": ["speed_steer", "accel_steer", "speed_yaw_rate"]}
    problems_first = []
    tyre = params.get("tyre_model")
    if isinstance(tyre, str) and tyre not in builtin_tyres and (tyre in TYRE_MODELS or is_plugin_path(tyre)):
        # a plug-in: an installed entry point or a package.module:Class
        try:
            resolve_tyre(tyre)
            choices["tyre_model"] = [tyre]
        except (KeyError, ValueError) as exc:
            choices["tyre_model"] = [tyre]  # reported here, once
            problems_first.append(f"tyre_model: {exc}; built-ins: {', '.join(builtin_tyres)}")
    known = set(PARAM_DEFAULTS) | set(choices) | {k for name in PRESETS.builtin_names() for k in preset(name)}
    problems = problems_first
    names = sorted(known)
    unknown = [key for key in params if key not in known]
    for key in unknown[:_UNKNOWN_LISTED]:  # a suggestion costs a comparison with every name: only for a few
        close = difflib.get_close_matches(key, names, n=1) if len(key) <= 100 else []
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        problems.append(f"{key}: unknown vehicle parameter{hint}")
    if len(unknown) > _UNKNOWN_LISTED:
        problems.append(f"{len(unknown) - _UNKNOWN_LISTED:,} more unknown vehicle parameters")
    for key, value in params.items():
        if key not in known:
            continue
        if key in choices:
            if value not in choices[key]:
                problems.append(f"{key}: {value!r} is not one of {', '.join(choices[key])}")
        elif key.startswith("pacejka"):
            ok = isinstance(value, list | tuple) and len(value) == 4 and all(
                isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value)
            if value is None and key != "pacejka_long":  # null would drop the preset's coefficients
                problems.append(f"{key}: expected four finite numbers [B, C, D, E], got null (leave it out to keep "
                                "the preset's)")
            elif not ok and value is not None:  # pacejka_long: null is the default (derived from the stiffness)
                problems.append(f"{key}: expected four finite numbers [B, C, D, E], got {value!r}")
        elif not isinstance(value, int | float) or isinstance(value, bool):
            problems.append(f"{key}: expected a number, got {value!r}")
    return problems
