"""The ideal channel: every interested receiver gets its sender's exact state (float64), no delay, no loss."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .base import CommsModel, Deliveries, Interest

_FIELDS = ("x", "y", "yaw", "v", "a", "yaw_rate")


class IdealChannel(CommsModel):
    """Delivers the senders' current state to the interested receivers at every step."""

    def step(self, t_ns: int, estimate: Mapping[str, np.ndarray], interest: Interest) -> Deliveries:
        ids = estimate["id"]
        # Rows of the senders in the roster order; ids are sorted only for the lookup.
        order = np.argsort(ids, kind="stable")
        pos = np.searchsorted(ids, interest.senders, sorter=order)
        pos = np.minimum(pos, len(ids) - 1) if len(ids) else pos
        rows = order[pos] if len(ids) else pos
        alive = (ids[rows] == interest.senders) if len(ids) else np.zeros(0, bool)
        rows = rows[alive]
        n = len(rows)
        now = np.full(n, t_ns, dtype=np.int64)
        out: Deliveries = {
            "receiver": interest.receivers[alive],
            "sender": interest.senders[alive],
            "generated_ns": now,
            "received_ns": now,
        }
        for name in _FIELDS:
            out[name] = estimate[name][rows]
        return out
