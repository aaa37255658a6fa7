"""Every registry the conformance suite covers, with the built-in names it expects each to ship.

The expected names are written out here on purpose: a registration removed by mistake (or renamed) makes
``test_registries.py`` fail, instead of silently dropping that entry from the parametrised tests.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from comms_models import COMMS_MODELS
from controllers import CONTROLLERS, LEADER_PROFILES
from core.registry import Registry
from core.vehicle_presets import PRESETS
from federates import FEDERATE_KINDS
from federates.physics.models import VEHICLE_MODELS
from federates.physics.models.tyres import TYRE_MODELS
from orchestrator.metrics import METRICS

from . import doubles, mqtt_double, ros2_double

REGISTRIES: dict[str, tuple[Registry, tuple[str, ...]]] = {
    "controllers": (CONTROLLERS, ("acc", "cacc_fallback", "cruise", "ela_cacc", "path_cacc", "ploeg_cacc")),
    "channels": (COMMS_MODELS, ("cv2x", "ideal", "itsg5")),
    "vehicle_models": (VEHICLE_MODELS, ("dynamic", "kinematic", "unicycle")),
    "profiles": (LEADER_PROFILES, ("braking", "circle", "circle_speed_change", "constant", "s_curve", "sinusoid",
                                   "weave")),
    "federates": (FEDERATE_KINDS, ("can", "control", "fmu", "helics", "mqtt", "physics", "ros2", "sumo", "v2x")),
    "tyre_models": (TYRE_MODELS, ("fiala", "fiala_unsaturated", "linear", "pacejka")),
    "vehicle_presets": (PRESETS, ("auna_rc_1to10", "g35_sedan", "mit_racecar_1to10", "passenger_car")),
    "metrics": (METRICS, ("aoi", "channel", "collisions", "cut_ins", "degradation", "detection", "gamma", "l2_norms",
                          "lateral_deviation", "leader_path", "link", "maneuvers", "min_gap", "min_ttc", "misbehaviour",
                          "spacing_error", "string_stability", "summary", "transition")),
}
"""registry key -> (registry, its expected built-in names). Its entry-point group is ``registry.group``."""

STEP_NS = 10_000_000


def _physics(name: str) -> Any:
    from federates.physics.config import PhysicsConfig

    return FEDERATE_KINDS.get("physics")(name, STEP_NS, PhysicsConfig())


FEDERATE_FACTORIES: dict[str, Callable[[str], Any]] = {
    "physics": _physics,
    "v2x": lambda name: FEDERATE_KINDS.get("v2x")(name, STEP_NS, {"type": "ideal"}),
    "control": lambda name: FEDERATE_KINDS.get("control")(name, 2 * STEP_NS),
    "can": lambda name: FEDERATE_KINDS.get("can")(name),  # python-can's in-process virtual bus by default
    "sumo": lambda name: FEDERATE_KINDS.get("sumo")(  # libsumo in process, on the shipped motorway
        name, net="sumo/highway.net.xml", scenario_dir=Path(__file__).resolve().parents[2] / "scenarios"),
    "helics": doubles.helics_bridge,  # an in-process double of the federation
    "fmu": doubles.fmu_federate,  # the tests' odometer FMU, built with pythonfmu
    "mqtt": mqtt_double.mqtt_bridge,  # paho's client doubled: an in-process broker and commander
    "ros2": ros2_double.ros2_bridge,  # rclpy and the message packages doubled: an in-process graph and driver
}
"""How to build each federate kind that needs no outside service (a plug-in kind taking only a name needs none)."""

FEDERATES_NEEDING_SERVICES: dict[str, str] = {}
"""Federate kinds skipped here, with what they need (none: every built-in kind has a factory above, the bridges to
outside services with in-process doubles; their own tests run them with the real services)."""


def missing_builtins(registry: Registry, expected: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(expected names the registry lacks, built-in names the suite does not expect)."""
    have = set(registry.builtin_names())
    return sorted(set(expected) - have), sorted(have - set(expected))
