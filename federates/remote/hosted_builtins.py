"""Proxies of the built-in physics and V2X federates when a ``coopsim host`` runs them (``execution.remote``).

The run's record reads two facts from these federates' objects rather than from their ports: the physics
federate's ``collisions`` (for the run's outcome, ``collided``) and whether the V2X channel model logs every
transmission (for ``silent_stations``). Over gRPC only ports cross, so the proxies rebuild both here: collisions
from the rows the physics federate publishes on its ``collisions`` port, the logging flag from the channel model's
class. Everything else is the plain :class:`RemoteFederate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.federate import PortData
from core.registry import Registry

from .client import RemoteFederate


class HostedPhysics(RemoteFederate):
    """A hosted physics federate that keeps ``collisions`` (t_ns, a, b) like the one in process."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.collisions: list[tuple[int, int, int]] = []

    def step(self, t_ns: int, inputs: Mapping[str, PortData]) -> Mapping[str, PortData]:
        out = super().step(t_ns, inputs)
        rows = (out or {}).get("collisions")
        if rows is not None and len(rows["t_ns"]):
            self.collisions.extend(zip(rows["t_ns"].tolist(), rows["a"].tolist(), rows["b"].tolist(), strict=True))
        return out


class HostedV2X(RemoteFederate):
    """A hosted V2X federate that knows whether its channel model logs every transmission."""

    @property
    def logs_transmissions(self) -> bool:
        from comms_models import COMMS_MODELS

        try:
            model = COMMS_MODELS.get(str(self.params["channel"]["type"]))
        except Exception:  # a model only the host has: no claim about its log
            return False
        return bool(getattr(model, "logs_every_transmission", False))


HOSTED = Registry(
    "hosted built-in federate",
    {"physics": "federates.remote.hosted_builtins:HostedPhysics", "v2x": "federates.remote.hosted_builtins:HostedV2X",
     "control": "federates.remote.client:RemoteFederate"},
    base="federates.remote.client:RemoteFederate",
)
"""The proxy class of each built-in kind a ``coopsim host`` can run (``HOSTED.get(kind)``; an unknown kind lists
the valid ones)."""

__all__ = ["HOSTED", "HostedPhysics", "HostedV2X"]
