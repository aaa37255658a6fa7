"""Federates: adapters between models (or outside simulators) and the scheduler, looked up by ``type``."""

from core.registry import Registry

FEDERATE_KINDS = Registry(
    "federate",
    {
        "physics": "federates.physics.federate:PhysicsFederate",
        "v2x": "federates.v2x.federate:V2XFederate",
        "control": "federates.control.federate:ControlFederate",
        "helics": "federates.helics.federate:HelicsBridge",
        "ros2": "federates.ros2.federate:Ros2Bridge",
        "mqtt": "federates.mqtt.federate:MqttBridge",
        "fmu": "federates.fmu.federate:FmuFederate",
        "can": "federates.can.federate:CanBridge",
        "sumo": "federates.sumo.federate:SumoFederate",
    },
    group="coopsim.federates",
    base="core.federate:Federate",
)

__all__ = ["FEDERATE_KINDS"]
