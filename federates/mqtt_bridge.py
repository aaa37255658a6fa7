"""The ``mqtt`` federate kind (``federates.mqtt_bridge:MqttBridge`` in the registry); the bridge lives in
``federates/mqtt/``, whose docstring and ``docs/bridges.md`` (MQTT) describe it."""

from federates.mqtt import MqttBridge

__all__ = ["MqttBridge"]
