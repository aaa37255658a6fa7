"""A channel model plug-in: periodic beacons with a fixed latency and independent (Bernoulli) losses.

Every ``period_s`` each station broadcasts its ``estimate``; each interested receiver gets it ``latency_s`` later
unless the draw loses it. Draws come from a generator seeded by the run's seed, so a seed fixes the losses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from comms_models.base import CommsModel, Deliveries, Interest, empty_deliveries
from core.robots import RobotSpec

_FIELDS = ("x", "y", "yaw", "v", "a", "yaw_rate")


class LossyParams(BaseModel):
    """The ``channel:`` keys besides ``type``."""

    model_config = ConfigDict(extra="forbid")

    loss: float = Field(0.1, ge=0, le=1, description="probability that a beacon is lost at a receiver")
    period_s: float = Field(0.1, gt=0, description="beacon interval [s]")
    latency_s: float = Field(0.02, ge=0, description="delay from generation to reception [s]")


class LossyBeacons(CommsModel):
    """Bernoulli losses and a fixed latency on periodic beacons."""

    Params = LossyParams

    def __init__(self, params: Mapping[str, Any], seed: int, out_dir: Any = None) -> None:
        super().__init__(params, seed, out_dir)
        self.cfg = LossyParams.model_validate(dict(params))
        self._rng = np.random.default_rng([seed, 0xC0FFEE])
        self._ids: list[int] = []
        self._period_ns = round(self.cfg.period_s * 1e9)
        self._latency_ns = round(self.cfg.latency_s * 1e9)
        self._next_ns = 0
        self._in_flight: list[Deliveries] = []

    def spawn(self, robots: Sequence[RobotSpec]) -> None:
        self._ids += [r.id for r in robots]

    def despawn(self, robot_ids: Sequence[int]) -> None:
        gone = {int(r) for r in robot_ids}
        self._ids = [i for i in self._ids if i not in gone]
        # a beacon still in the air to a station that is gone is never received
        self._in_flight = [{k: v[~np.isin(d["receiver"], list(gone))] for k, v in d.items()}
                           for d in self._in_flight]

    def step(self, t_ns: int, estimate: Mapping[str, np.ndarray], interest: Interest) -> Deliveries:
        """Send when a beacon is due, then deliver what arrives by ``t_ns``."""
        if t_ns >= self._next_ns:
            self._next_ns = t_ns + self._period_ns
            row_of = {rid: row for row, rid in enumerate(np.asarray(estimate["id"]).tolist())}
            senders = np.array([row_of.get(int(s), -1) for s in interest.senders], np.int64)
            heard = (senders >= 0) & (self._rng.random(len(senders)) >= self.cfg.loss)
            rows = senders[heard]
            sent: Deliveries = {"receiver": interest.receivers[heard], "sender": interest.senders[heard],
                                "generated_ns": np.full(len(rows), t_ns, np.int64),
                                "received_ns": np.full(len(rows), t_ns + self._latency_ns, np.int64)}
            sent.update({name: np.asarray(estimate[name], np.float64)[rows] for name in _FIELDS})
            self._in_flight.append(sent)
        # every batch shares one reception time; empty batches (all lost) are dropped with the arrived ones
        due = [d for d in self._in_flight if len(d["received_ns"]) and d["received_ns"][0] <= t_ns]
        self._in_flight = [d for d in self._in_flight if len(d["received_ns"]) and d["received_ns"][0] > t_ns]
        if not due:
            return empty_deliveries()
        return {key: np.concatenate([d[key] for d in due]) for key in due[0]}
