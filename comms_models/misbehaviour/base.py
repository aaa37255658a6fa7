"""The detector interface: a detector keeps what every receiving station heard before and judges each new message
(one row per delivery, every station at once)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict


class DetectorParams(BaseModel):
    """A detector's parameters (unknown keys are errors, every number finite)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Detector:
    """Base class of detectors. Built as ``cls(params, min_interval_s)``, ``min_interval_s`` being the shortest gap
    an honest station leaves between two messages on the run's channel."""

    Params: ClassVar[type[DetectorParams]] = DetectorParams

    def __init__(self, params: DetectorParams, min_interval_s: float) -> None:
        self.params = params
        self.min_interval_s = min_interval_s

    def spawn(self, ids: np.ndarray, spawn_ns: np.ndarray, front_m: np.ndarray, rear_m: np.ndarray) -> None:
        """Stations that start receiving at ``spawn_ns``; ``front_m`` / ``rear_m``: their bumpers ahead of and behind
        the rear axle (to compare a claimed position with a range measurement)."""

    def listen(self, t_ns: int, receivers: np.ndarray, senders: np.ndarray) -> None:
        """On a channel that delivers a receiver only the senders its applications read: the (receiver, sender)
        pairs delivered from ``t_ns`` on (all of them, each time they change). A receiver cannot have heard a
        sender before it was delivered its messages (the sudden-appearance check)."""

    def despawn(self, ids: np.ndarray) -> None:
        """Stations that left: forget what they heard and what was heard from them."""

    def judge(self, t_ns: int, messages: Mapping[str, np.ndarray], own: Mapping[str, np.ndarray],
              sensor: Mapping[str, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
        """Per message (``messages``: the deliveries' columns, ``kind`` 0 CAM / 1 PM when known): the bit mask of
        the checks it failed (int64, bit k = ``checks.CHECKS[k]``) and the fused verdict (bool, True: misbehaving).
        ``own``: every station's belief about itself (``estimate``); ``sensor``: the ``range`` port, when there is
        one."""
        n = len(messages["receiver"])
        return np.zeros(n, np.int64), np.zeros(n, bool)
