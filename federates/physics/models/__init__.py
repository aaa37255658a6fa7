"""Vehicle models behind one interface (``VehicleModel``), looked up by the scenario's ``vehicle.model``."""

from core.registry import Registry

VEHICLE_MODELS = Registry(
    "vehicle model",
    {
        "kinematic": "federates.physics.models.kinematic:KinematicBicycle",
        "dynamic": "federates.physics.models.dynamic:DynamicSingleTrack",
        "unicycle": "federates.physics.models.unicycle:Unicycle",
    },
    group="coopsim.vehicle_models",
    base="federates.physics.models.base:VehicleModel",
)

__all__ = ["VEHICLE_MODELS"]
