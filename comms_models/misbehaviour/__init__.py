"""Misbehaviour detection at the receiving stations: detectors looked up by the scenario's ``detection.type`` (a
built-in name, a ``coopsim.detectors`` entry point or a ``package.module:Class`` path), each judging every message
a station receives (``Detector.judge``) with the checks of ``checks.CHECKS``."""

from core.registry import Registry

DETECTORS = Registry(
    "detector",
    {"plausibility": "comms_models.misbehaviour.plausibility:PlausibilityDetector",
     "kalman": "comms_models.misbehaviour.kalman:KalmanDetector"},
    group="coopsim.detectors",
    base="comms_models.misbehaviour.base:Detector",
)

__all__ = ["DETECTORS"]
