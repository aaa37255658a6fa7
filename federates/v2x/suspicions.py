"""The ``suspicions`` port: which sender each receiving station judged misbehaving, for the reactions the control
federate runs (``detection.reaction`` open_gap and leave; ``federates.control.reactions``). Light on purpose: the
control federate imports it without the V2X federate's channel models."""

from core.ports import port

SUSPICIONS = port("suspicions", {"t_ns": ("int64", "ns"), "receiver": ("int64", "robot id"),
                                 "sender": ("int64", "robot id")}, index="event",
                  doc="every delivery the receiver's detector judged misbehaving (open_gap and leave reactions)")
REACTS_IN_CONTROL = ("open_gap", "leave")
"""The reactions the control federate carries out (the V2X federate then drops nothing and publishes ``SUSPICIONS``)."""
