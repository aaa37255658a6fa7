"""Federates: adapters between models (or outside simulators) and the scheduler, looked up by ``type``."""

from orchestrator.core.registry import Registry

FEDERATE_KINDS = Registry(
    "federate",
    {
        "physics": "federates.physics.federate:PhysicsFederate",
        "v2x": "federates.v2x.federate:V2XFederate",
        "control": "federates.control.federate:ControlFederate",
        "helics": "federates.helics_bridge:HelicsBridge",
        "ros2": "federates.ros2_bridge:Ros2Bridge",
        "mqtt": "federates.mqtt_bridge:MqttBridge",
        "fmu": "federates.fmu_federate:FmuFederate",
        "can": "federates.can_bridge:CanBridge",
        "sumo": "federates.sumo.federate:SumoFederate",
    },
    group="coopsim.federates",
    base="orchestrator.core.federate:Federate",
)

__all__ = ["FEDERATE_KINDS"]
