"""A CAN bus bridge: the robots' motion as DBC-defined frames, and commands from an outside ECU.

Scenario entry (``type: can``)::

    federates:
      - name: can
        type: can
        params: {interface: udp_multicast, channel: 'ff11::c0:5e', period_s: 0.02, mode: free}
    drivers:
      - {federate: can, robots: [robot1]}

``coopsim.dbc`` (next to this file) defines the frames; ``docs/bridges.md`` (CAN) has the ids, scaling, counter,
checksum, interfaces, the log and a walk-through.
"""

from .codec import DBC_PATH, Codec, load_dbc
from .federate import CanBridge, LockstepTimeoutError

__all__ = ["DBC_PATH", "CanBridge", "Codec", "LockstepTimeoutError", "load_dbc"]
