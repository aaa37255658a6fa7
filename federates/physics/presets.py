"""Vehicle presets: geometry, limits and (for dynamic models) mass, inertia and tyre data, in SI units.

Values are those of ``docs/vehicles.md``; where a source gives none, the chosen value is documented there.
"""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    # AuNa 1:10 race car (AuNa framework robot description).
    "auna_rc_1to10": {
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
    },
    # Generic passenger car (Plexe-like limits).
    "passenger_car": {
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
    },
}


def preset(name: str) -> dict[str, Any]:
    """A copy of a preset's parameters; unknown names list the valid ones."""
    try:
        return dict(PRESETS[name])
    except KeyError:
        raise KeyError(f"unknown vehicle preset '{name}'; allowed: {', '.join(sorted(PRESETS))}") from None
