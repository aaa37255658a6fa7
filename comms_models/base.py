"""The channel-model interface.

A model owns one station per robot (created on ``spawn``, removed on ``despawn``). Each step it receives what every
station's vehicle believes about itself (the ``estimate`` port: SI units, local frame, roster order) and returns the
receptions that complete by now, as a struct of arrays (see ``core.ports.DELIVERY_FIELDS``; ``u_des``
only from a model that carries the platooning message).

``Interest`` names the (receiver, sender) pairs the applications read (predecessor, leader). An ideal channel only
needs those; a realistic one simulates every station's broadcast and may return all receptions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.ports import V2X_EVENTS, V2X_OUTCOMES
from core.robots import RobotSpec

Deliveries = dict[str, np.ndarray]
"""Columns ``receiver, sender, generated_ns, received_ns, x, y, yaw, v, a, yaw_rate`` of equal length."""


@dataclass(frozen=True)
class Interest:
    """(receiver, sender) robot-id pairs whose messages the applications use."""

    receivers: np.ndarray
    senders: np.ndarray


OUTCOMES = V2X_OUTCOMES
"""Outcome codes of ``trace/v2x.parquet`` rows ("sent" on tx rows)."""


def with_names(records: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A model's log with ``event`` and ``outcome`` as their names instead of codes (for analysis and tests)."""
    out = dict(records)
    for column, names in (("event", V2X_EVENTS), ("outcome", OUTCOMES)):
        values = np.asarray(out[column])
        if values.dtype == np.uint8:
            out[column] = np.asarray(names, dtype=object)[values]
    return out


def empty_deliveries() -> Deliveries:
    """A delivery table with no rows."""
    table: Deliveries = {
        "receiver": np.empty(0, np.int64),
        "sender": np.empty(0, np.int64),
        "generated_ns": np.empty(0, np.int64),
        "received_ns": np.empty(0, np.int64),
    }
    for name in ("x", "y", "yaw", "v", "a", "yaw_rate"):
        table[name] = np.empty(0, np.float64)
    return table


class CommsModel(ABC):
    """Base class of channel models. ``params`` is the scenario's ``channel`` block minus ``type``."""

    carries_platooning_message: bool = False
    """True when deliveries carry the senders' desired acceleration (``u_des``): the V2X federate then hands the
    model ``estimate["u_des"]``, built from the previous instant's commands."""

    logs_every_transmission: bool = False
    """True when ``drain_records`` has a "sent" (or "dcc_dropped") row for every message generated, heard or not;
    the run's outcomes then check that every station sent."""

    keep_log: bool = True
    """False when the run records nothing: ``drain_records`` / ``drain_load`` are then not called, and a model
    that logs as it goes may skip building the rows."""

    def __init__(self, params: Mapping[str, Any], seed: int, out_dir: Any = None) -> None:
        self.params = dict(params)
        self.seed = seed
        self.out_dir = out_dir

    def spawn(self, robots: Sequence[RobotSpec]) -> None:  # noqa: B027 - optional hook
        """Create a station per robot, appended in this order."""

    def despawn(self, robot_ids: Sequence[int]) -> None:  # noqa: B027 - optional hook
        """Remove the stations of these robots."""

    @abstractmethod
    def step(self, t_ns: int, estimate: Mapping[str, np.ndarray], interest: Interest) -> Deliveries:
        """Advance the channel to ``t_ns`` and return the receptions completed in (previous step, t_ns]."""

    def drain_records(self) -> dict[str, np.ndarray] | None:
        """Events since the last call for ``trace/v2x.parquet``: columns ``t_ns`` (event time), ``event``
        ("tx" or "rx"), ``sender``, ``receiver`` (-1 on tx rows), ``generated_ns``, ``latency_s`` (rx: reception
        time minus generation time), ``rx_power_dbm`` (NaN when not modelled), ``outcome`` (one of
        ``OUTCOMES``). ``event`` and ``outcome`` are uint8 codes into ``V2X_EVENTS`` and ``OUTCOMES`` (strings
        are accepted too, and turned into codes). None when the model records nothing (the federate then logs
        deliveries itself)."""
        return None

    def drain_load(self) -> dict[str, np.ndarray] | None:
        """Channel load measured since the last call: columns ``t_ns`` (end of the measurement window), ``robot``
        and ``cbr`` (channel busy ratio, 0..1), one row per station and window, and optionally ``dcc_t_off_s`` (the
        DCC gap the window leaves; NaN when absent). None when not modelled."""
        return None

    def drain_triggers(self) -> dict[str, np.ndarray] | None:
        """CAMs generated since the last call: columns ``t_ns``, ``robot`` and ``cause`` (uint8 codes into
        ``core.ports.CAM_TRIGGERS``). None when the model has no generation rules."""
        return None

    def metrics(self) -> dict[str, Any]:
        """Run-level channel metrics (e.g. channel busy ratio) for metrics.json."""
        return {}

    def finalize(self) -> None:  # noqa: B027 - optional hook
        """Flush traces and captures."""
