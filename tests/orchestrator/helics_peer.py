"""Another simulator in a HELICS federation, for the tests: subscribes to coopsim's robot speeds and ids, and
publishes twice the speeds back, until ``end_s``. Writes what it received at each grant to a JSON file.

Run: python helics_peer.py BROKER_PORT PERIOD_S END_S OUT_JSON
"""

from __future__ import annotations

import json
import sys

import helics as h


def main(port: str, period_s: float, end_s: float, out: str) -> None:
    info = h.helicsCreateFederateInfo()
    h.helicsFederateInfoSetCoreTypeFromString(info, "zmq")
    h.helicsFederateInfoSetCoreInitString(info, f"--federates=1 --broker_address=tcp://127.0.0.1:{port}")
    h.helicsFederateInfoSetTimeProperty(info, h.helics_property_time_period, period_s)
    fed = h.helicsCreateValueFederate("peer", info)
    speed = h.helicsFederateRegisterSubscription(fed, "coopsim/state/v", "")
    ids = h.helicsFederateRegisterSubscription(fed, "coopsim/state/id", "")
    doubled = h.helicsFederateRegisterGlobalTypePublication(fed, "peer/probe/v2", "vector", "")
    echo = h.helicsFederateRegisterGlobalTypePublication(fed, "peer/probe/id", "vector", "")
    h.helicsFederateEnterExecutingMode(fed)
    seen, t = [], 0.0
    while t < end_s - 1e-9:
        t = h.helicsFederateRequestTime(fed, t + period_s)
        v, robots = h.helicsInputGetVector(speed), h.helicsInputGetVector(ids)
        seen.append({"t": t, "v": v, "id": robots})
        h.helicsPublicationPublishVector(doubled, [2.0 * x for x in v])
        h.helicsPublicationPublishVector(echo, robots)
    h.helicsFederateDisconnect(fed)
    h.helicsFederateFree(fed)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(seen, f)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4])
