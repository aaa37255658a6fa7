"""An "ECU" in a HELICS federation, for the tests: commands robot 1's speed, 1.0 m/s then 1.5 m/s from 1 s on,
at every grant until ``end_s``.

Run: python helics_commander.py BROKER_PORT PERIOD_S END_S
"""

from __future__ import annotations

import sys

import helics as h


def main(port: str, period_s: float, end_s: float) -> None:
    info = h.helicsCreateFederateInfo()
    h.helicsFederateInfoSetCoreTypeFromString(info, "zmq")
    h.helicsFederateInfoSetCoreInitString(info, f"--federates=1 --broker_address=tcp://127.0.0.1:{port}")
    h.helicsFederateInfoSetTimeProperty(info, h.helics_property_time_period, period_s)
    fed = h.helicsCreateValueFederate("ecu", info)
    robot = h.helicsFederateRegisterGlobalTypePublication(fed, "ecu/cmd/robot", "vector", "")
    speed = h.helicsFederateRegisterGlobalTypePublication(fed, "ecu/cmd/speed", "vector", "")
    h.helicsFederateEnterExecutingMode(fed)
    t = 0.0
    while t < end_s - 1e-9:
        h.helicsPublicationPublishVector(robot, [1.0])
        h.helicsPublicationPublishVector(speed, [1.5 if t >= 1.0 - 1e-9 else 1.0])
        t = h.helicsFederateRequestTime(fed, t + period_s)
    h.helicsFederateDisconnect(fed)
    h.helicsFederateFree(fed)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), float(sys.argv[3]))
