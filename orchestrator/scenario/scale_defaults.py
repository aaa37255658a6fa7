"""Defaults that follow the scale of the vehicles: a pure-pursuit look-ahead that suits 1:10 robots at 1 m/s
(1 m) makes cars at motorway speed weave and lose each other (it is 0.04 s of travel at 25 m/s), so road vehicles
get a look-ahead that grows with speed instead.

The class is read from the longest vehicle in the scenario (its preset's length, or a ``length_m`` override):
from ``ROAD_VEHICLE_LENGTH_M`` up it is a road vehicle. Only defaults change; whatever the file sets stays, and
``scenario.resolved.yaml`` writes the values used.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

ROAD_VEHICLE_LENGTH_M = 2.5
"""Longer than any robot preset (0.5 m) and shorter than any car (4.5 m)."""
ROAD_LOOKAHEAD = {"lookahead_m": 5.0, "lookahead_time_s": 0.8}
"""L = 5 m + 0.8 s x v: about 25 m at 25 m/s (the rule of thumb of pure pursuit at road speeds is a look-ahead
of 1 to 2 s of travel; Snider, CMU-RI-TR-09-08, 2009, sec. 2.2, finds L growing with speed necessary for
stability), and 5 m at a standstill."""


def _vehicles(data: Any) -> Iterator[dict[str, Any]]:
    """Every vehicle block (a mapping with a ``preset``) anywhere in the scenario's data."""
    if isinstance(data, dict):
        if "preset" in data and isinstance(data.get("preset"), str):
            yield data
        for value in data.values():
            yield from _vehicles(value)
    elif isinstance(data, list):
        for value in data:
            yield from _vehicles(value)


def longest_vehicle_m(scenario_data: dict[str, Any]) -> float:
    """The longest vehicle of a scenario (as ``model_dump`` gives it); 0 when it names none."""
    from federates.physics.presets import preset as preset_of

    lengths = []
    for vehicle in _vehicles(scenario_data):
        params = vehicle.get("params") or {}
        try:
            preset = preset_of(vehicle["preset"])
        except (KeyError, ValueError):  # reported by the scenario checks
            preset = {}
        length = params.get("length_m", preset.get("length_m"))
        if isinstance(length, int | float):
            lengths.append(float(length))
    return max(lengths, default=0.0)


def default_lateral(scenario_data: dict[str, Any]) -> dict[str, float] | None:
    """The pure-pursuit parameters a scenario's controller block gets when it sets none: the road look-ahead
    for road vehicles, None (the law's own default) for robots."""
    return dict(ROAD_LOOKAHEAD) if longest_vehicle_m(scenario_data) >= ROAD_VEHICLE_LENGTH_M else None
