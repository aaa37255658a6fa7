"""Vehicle presets: geometry, limits and (for dynamic models) mass, inertia and tyre data, in SI units.

The one catalogue of vehicles: the world resolves each robot's vehicle from it once (``core.robot_blocks``), and the
scenario checks name its presets. Values are those of ``docs/vehicles.md``; where a source gives none, the chosen
value is documented there. Dynamic keys are those of ``federates.physics.models.dynamic.PARAM_DEFAULTS``: cornering
stiffness is per axle [N/rad]; Pacejka tuples are ``(B, C, D, E)`` with ``D`` a peak friction coefficient
multiplied by the axle load.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .registry import Registry

_G = 9.81  # [m/s^2]


def _axle_loads(mass_kg: float, a_m: float, b_m: float) -> tuple[float, float]:
    """Static front and rear axle loads [N]."""
    L = a_m + b_m
    return mass_kg * _G * b_m / L, mass_kg * _G * a_m / L


def _pacejka_from_stiffness(
    c_alpha_npr: float, fz_n: float, mu: float, c: float = 1.3, e: float = 0.0,
) -> tuple[float, float, float, float]:
    """Lateral magic formula with peak friction ``mu`` and initial slope ``c_alpha``: ``B = C_alpha / (C D Fz)``."""
    return (c_alpha_npr / (c * mu * fz_n), c, mu, e)


# AuNa: F1TENTH single-track identification (m 3.74 kg, lf 0.15875 m, lr 0.17145 m, Izz 0.04712 kg m^2, normalised
# cornering stiffness 4.718 / 5.4562 1/rad) scaled to AuNa's wheelbase and mass; see docs/vehicles.md.
_AUNA_M, _AUNA_L = 3.5, 0.32
_AUNA_A = round(_AUNA_L * 0.15875 / 0.33020, 3)
_AUNA_B = _AUNA_L - _AUNA_A
_AUNA_FZF, _AUNA_FZR = _axle_loads(_AUNA_M, _AUNA_A, _AUNA_B)
_AUNA_CF, _AUNA_CR = 4.718 * _AUNA_FZF, 5.4562 * _AUNA_FZR

# MIT racecar: equal wheel loads of 13.7 N (5.6 kg) mean a = b; lateral D is a friction coefficient
# (1.371 * 13.7 N = 18.8 N, the longitudinal peak of 19.06 N); longitudinal D normalised by the same 13.7 N.
_MIT_M, _MIT_L = 5.6, 0.325
_MIT_FZ_AXLE = _MIT_M * _G / 2.0
_MIT_LAT = (10.0, 1.45, 1.371, 0.97)
_MIT_LONG = (3.0, 1.45, round(19.06 / 13.7, 4), 0.52)
_MIT_C = _MIT_LAT[0] * _MIT_LAT[1] * _MIT_LAT[2] * _MIT_FZ_AXLE  # B C D Fz per axle [N/rad]

# G35: a, b, sprung mass and Izz of the handling paper; mu 0.72 so that ay saturates near 7 m/s^2 (mu g = 7.06).
_G35_M, _G35_A, _G35_B, _G35_MU = 1348.2, 1.368, 1.482, 0.72
_G35_FZF, _G35_FZR = _axle_loads(_G35_M, _G35_A, _G35_B)
_G35_CF, _G35_CR = 70_000.0, 100_000.0

_CAR_M, _CAR_A, _CAR_B, _CAR_MU = 1500.0, 1.2, 1.5, 1.0
_CAR_FZF, _CAR_FZR = _axle_loads(_CAR_M, _CAR_A, _CAR_B)
_CAR_CF, _CAR_CR = 90_000.0, 110_000.0

# AuNa 1:10 race car (AuNa framework robot description).
AUNA_RC_1TO10: Mapping[str, Any] = MappingProxyType({
    "wheelbase_m": 0.32,
    "track_m": 0.211,
    "length_m": 0.49,
    "width_m": 0.18,
    "rear_overhang_m": 0.085,  # rear bumper behind the rear axle; body centred on the wheelbase
    "mass_kg": 3.5,
    "wheel_radius_m": 0.05,
    "max_steer_rad": 0.6458,
    "max_steer_rate_radps": 6.0,  # chosen: hobby servo ~0.1 s per 60 deg
    "max_speed_mps": 3.0,
    "max_accel_mps2": 3.0,
    "max_decel_mps2": 6.0,
    "mu": 0.9,
    # dynamic single track (chosen, docs/vehicles.md)
    "cg_to_front_m": _AUNA_A,
    "yaw_inertia_kgm2": 0.0414,
    "cg_height_m": 0.07,
    "cornering_stiffness_front_npr": round(_AUNA_CF, 2),
    "cornering_stiffness_rear_npr": round(_AUNA_CR, 2),
    "pacejka_lat_front": _pacejka_from_stiffness(_AUNA_CF, _AUNA_FZF, 0.9),
    "pacejka_lat_rear": _pacejka_from_stiffness(_AUNA_CR, _AUNA_FZR, 0.9),
    "long_stiffness_per_load": 10.0,
    "tyre_model": "fiala",
    "steer_tau_s": 0.0,
    "accel_tau_s": 0.1,
    "drive_split_rear": 0.5,
    "rolling_resistance": 0.02,
    "drag_area_m2": 0.01,
    "speed_gain_1ps": 2.0,
})

# MIT RACECAR 1:10 with the Pacejka tables fitted on a figure eight (4 wheels, 13.7 N each).
MIT_RACECAR_1TO10: Mapping[str, Any] = MappingProxyType({
    "wheelbase_m": _MIT_L,
    "track_m": 0.25,
    "length_m": 0.55,
    "width_m": 0.30,
    "rear_overhang_m": 0.1125,
    "mass_kg": _MIT_M,
    "wheel_radius_m": 0.05,
    "max_steer_rad": 0.34,
    "max_steer_rate_radps": 6.0,
    "max_speed_mps": 5.0,
    "max_accel_mps2": 4.0,
    "max_decel_mps2": 8.0,
    "mu": _MIT_LAT[2],
    "cg_to_front_m": _MIT_L / 2.0,
    "yaw_inertia_kgm2": 0.068,
    "cg_height_m": 0.08,
    "cornering_stiffness_front_npr": round(_MIT_C, 2),
    "cornering_stiffness_rear_npr": round(_MIT_C, 2),
    "pacejka_lat_front": _MIT_LAT,
    "pacejka_lat_rear": _MIT_LAT,
    "pacejka_long": _MIT_LONG,
    "tyre_model": "pacejka",
    "accel_tau_s": 0.1,
    "drive_split_rear": 0.5,
    "rolling_resistance": 0.02,
    "drag_area_m2": 0.015,
    "speed_gain_1ps": 2.0,
})

# Infiniti G35 sedan of the handling comparison paper.
G35_SEDAN: Mapping[str, Any] = MappingProxyType({
    "wheelbase_m": _G35_A + _G35_B,
    "track_m": 1.5062,
    "length_m": 4.74,
    "width_m": 1.815,
    "rear_overhang_m": 0.95,
    "mass_kg": _G35_M,
    "wheel_radius_m": 0.33,
    "max_steer_rad": 0.6,
    "max_steer_rate_radps": 1.0,
    "max_speed_mps": 60.0,
    "max_accel_mps2": 3.0,
    "max_decel_mps2": 9.0,
    "mu": _G35_MU,
    "cg_to_front_m": _G35_A,
    "yaw_inertia_kgm2": 2698.9,
    "cg_height_m": 0.55,
    "cornering_stiffness_front_npr": _G35_CF,
    "cornering_stiffness_rear_npr": _G35_CR,
    "pacejka_lat_front": _pacejka_from_stiffness(_G35_CF, _G35_FZF, _G35_MU),
    "pacejka_lat_rear": _pacejka_from_stiffness(_G35_CR, _G35_FZR, _G35_MU),
    "long_stiffness_per_load": 20.0,
    "tyre_model": "fiala",
    "accel_tau_s": 0.3,
    "max_drive_force_n": 6000.0,
    "max_power_w": 210_000.0,
    "drive_split_rear": 1.0,
    "rolling_resistance": 0.012,
    "drag_area_m2": 0.66,
    "speed_gain_1ps": 0.8,
})

# Generic passenger car (Plexe-like limits).
PASSENGER_CAR: Mapping[str, Any] = MappingProxyType({
    "wheelbase_m": 2.7,
    "track_m": 1.6,
    "length_m": 4.5,
    "width_m": 1.8,
    "rear_overhang_m": 0.9,
    "mass_kg": 1500.0,
    "wheel_radius_m": 0.31,
    "max_steer_rad": 0.6,
    "max_steer_rate_radps": 1.0,
    "max_speed_mps": 55.0,
    "max_accel_mps2": 2.5,
    "max_decel_mps2": 9.0,
    "mu": 1.0,
    "cg_to_front_m": _CAR_A,
    "yaw_inertia_kgm2": 2500.0,
    "cg_height_m": 0.55,
    "cornering_stiffness_front_npr": _CAR_CF,
    "cornering_stiffness_rear_npr": _CAR_CR,
    "pacejka_lat_front": _pacejka_from_stiffness(_CAR_CF, _CAR_FZF, _CAR_MU),
    "pacejka_lat_rear": _pacejka_from_stiffness(_CAR_CR, _CAR_FZR, _CAR_MU),
    "long_stiffness_per_load": 20.0,
    "tyre_model": "fiala",
    "accel_tau_s": 0.5,  # Plexe's default engine lag
    "max_drive_force_n": 6000.0,
    "max_power_w": 110_000.0,
    "drive_split_rear": 0.0,  # front-wheel drive
    "rolling_resistance": 0.012,
    "drag_area_m2": 0.7,
    "speed_gain_1ps": 0.5,
})

PRESETS = Registry(
    "vehicle preset",
    {"auna_rc_1to10": f"{__name__}:AUNA_RC_1TO10",
     "mit_racecar_1to10": f"{__name__}:MIT_RACECAR_1TO10",
     "g35_sedan": f"{__name__}:G35_SEDAN",
     "passenger_car": f"{__name__}:PASSENGER_CAR"},
    group="coopsim.vehicle_presets",
    path_form="package.module:NAME",
)
"""Vehicle presets by name: the built-ins above, installed ``coopsim.vehicle_presets`` entry points and
``package.module:NAME`` paths, each a mapping of vehicle parameters (read-only: ``preset`` gives a copy)."""


def preset(name: str) -> dict[str, Any]:
    """A copy of a preset's parameters; an unknown name raises ``KeyError`` listing the valid ones, a plug-in that
    is no mapping ``ValueError``."""
    params = PRESETS.get(name)
    if not isinstance(params, Mapping):
        raise ValueError(f"vehicle preset '{name}' is not a mapping of vehicle parameters (it is a "
                         f"{type(params).__name__})")
    return dict(params)
