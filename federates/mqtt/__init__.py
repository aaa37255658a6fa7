"""An MQTT bridge in both directions: the run's robots as JSON on a broker (for dashboards, digital twins and
other programs that speak MQTT), and robots driven by commands from ``<prefix>/<robot>/cmd``.

Scenario entry (``type: mqtt``)::

    federates:
      - name: mqtt
        type: mqtt
        params: {broker: 127.0.0.1:1883, period_s: 0.05, ports: [state, cam_rx], qos: 1}
    drivers:
      - {federate: mqtt, robots: [robot1], command_timeout_s: 0.5, on_timeout: brake}

Every ``period_s`` of simulation time the bridge publishes, per robot and listed port, ``<prefix>/<robot>/<port>``
(``{"t": s, "<field>": value, ...}``, SI, null for NaN), ``<prefix>/<robot>/cam_rx`` (the V2X messages the robot
received since the last period) and ``<prefix>/clock`` last. Each robot the scenario gives to the bridge listens to
``<prefix>/<robot>/cmd``: ``{"speed": m/s, "steering": rad}`` or ``{"acceleration": m/s^2, "yaw_rate": rad/s}``,
optionally with ``"t"``. In ``mode: free`` each period takes the newest command per robot that arrived, so the run
depends on wall-clock timing (pair it with ``execution.realtime``); in ``mode: lockstep`` each period waits for a
command whose ``t`` is the period's time (reruns are bit-identical). Bad payloads are counted by reason in
``run.json`` and ignored. The user name and password come from ``COOPSIM_MQTT_USERNAME`` / ``COOPSIM_MQTT_PASSWORD``
(never a password in the scenario), TLS from ``tls:`` or the environment; a lost broker is reconnected with
bounded exponential backoff. ``docs/bridges.md`` (MQTT) has the topics, the command schema and a walk-through.
"""

from .commands import REASONS, BadCommandError, LockstepTimeoutError, parse_command
from .federate import MqttBridge
from .link import BrokerRefusedError, BrokerUnavailableError
from .params import MqttParams

__all__ = ["REASONS", "BadCommandError", "BrokerRefusedError", "BrokerUnavailableError", "LockstepTimeoutError",
           "MqttBridge", "MqttParams", "parse_command"]
