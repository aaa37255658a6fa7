"""Dropped frames, counted by reason and logged at a bounded rate (a flood of bad frames must not flood the log)."""

from __future__ import annotations

import logging
import time

LOG = logging.getLogger("coopsim.can")

REASONS = ("unreadable", "not_data", "unknown_id", "not_driven", "bad_length", "bad_checksum", "counter_jump",
           "counter_repeat", "counter_mismatch", "duplicate", "out_of_range", "nothing_given")
"""Why a received frame was ignored (``docs/bridges.md``, CAN: bad frames)."""


class Tally:
    """Counts per reason; logs the first frame of each reason, then at most one line per reason per interval."""

    def __init__(self, bridge: str, interval_s: float = 5.0) -> None:
        self.bridge = bridge
        self.interval_s = interval_s
        self.counts: dict[str, int] = {}
        self._logged_at: dict[str, float] = {}
        self._since: dict[str, int] = {}

    def drop(self, reason: str, frame_id: int, data: bytes) -> None:
        """Count one ignored frame; maybe log it."""
        self.counts[reason] = self.counts.get(reason, 0) + 1
        self._since[reason] = self._since.get(reason, 0) + 1
        now = time.monotonic()
        if now - self._logged_at.get(reason, -1e18) >= self.interval_s:
            more = self._since[reason] - 1
            LOG.warning("CAN bridge '%s': ignored frame 0x%X [%s] (%s)%s", self.bridge, frame_id, data.hex(" "),
                        reason, f"; {more} more of this kind since the last line" if more else "")
            self._logged_at[reason] = now
            self._since[reason] = 0
