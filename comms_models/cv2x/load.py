"""The sidelink's channel load: each station's channel busy ratio per ``cbr_window_ms`` window and, with
``congestion_control``, the limit its last CBR puts on its channel occupancy ratio (TS 36.213 14.1.1.4C)."""

from __future__ import annotations

import numpy as np

from .history import TxHistory
from .log import Cv2xLog
from .params import Cv2xParams

CR_WINDOW_MS = 1000  # a + b + 1 subframes of the channel occupancy ratio (TS 36.214 5.1.31)


class ChannelLoad:
    """The CBR windows (in slots) and each station's last CBR (rows in spawn order, NaN: none measured yet)."""

    def __init__(self, cfg: Cv2xParams, n_sub: int, noise_sub_mw: float, cbr_mw: float) -> None:
        self.n_sub = n_sub
        self.noise_busy = noise_sub_mw > cbr_mw  # the noise alone is above the CBR threshold: idle counts busy
        self.window_ms = cfg.cbr_window_ms * cfg.slots_per_ms  # in slots
        self.window_end = self.window_ms
        self.cr_window = CR_WINDOW_MS * cfg.slots_per_ms  # slots in the 1,000 ms of the channel occupancy ratio
        self.tx_subframes = 0  # subframes with a transmission in the current CBR window
        self.cbr_last = np.empty(0)  # per station: the CBR of its last closed window (NaN: none measured yet)
        self.cr_limits = np.array(cfg.cr_limits)  # (CBR upper bound, CR limit) rows

    def spawn(self, n: int) -> None:
        """``n`` stations appended, with no CBR measured yet."""
        self.cbr_last = np.concatenate([self.cbr_last, np.full(n, np.nan)])

    def despawn(self, keep: np.ndarray) -> None:
        """Keep the stations of mask ``keep``."""
        self.cbr_last = self.cbr_last[keep]

    def close_windows(self, until: int, busy: np.ndarray, meas_since: np.ndarray, ids: np.ndarray, log: Cv2xLog,
                      ns_slot: int) -> None:
        """Every CBR window ending at or before slot ``until`` closes (NaN for stations that joined within it):
        ``busy`` counts each station's busy subchannels of the window and is cleared."""
        while self.window_end <= until:
            start = self.window_end - self.window_ms
            idle_busy = self.n_sub * (self.window_ms - self.tx_subframes) if self.noise_busy else 0
            cbr = (busy + idle_busy) / (self.window_ms * self.n_sub)
            cbr = np.where(meas_since <= start, cbr, np.nan)
            self.cbr_last = cbr
            log.window(self.window_end * ns_slot, ids, cbr)
            busy[:] = 0
            self.tx_subframes = 0
            self.window_end += self.window_ms

    def over_limit(self, k: int, rows: np.ndarray, history: TxHistory, slot: np.ndarray, slots: int,
                   length: np.ndarray) -> np.ndarray:
        """Per row of ``rows``: whether a transmission of ``length`` subchannels in subframe ``k`` would take its
        channel occupancy ratio past the limit for its last CBR (TS 36.213 14.1.1.4C). CR (TS 36.214 5.1.31,
        a = 999, b = 0): the subchannels the station (history slot ``slot``) used in [k - 999, k - 1] and this
        transmission's, over every subchannel of those 1,000 subframes."""
        past = history.window(k - self.cr_window + 1, k)
        used = np.bincount(past["slot"], weights=past["length"], minlength=slots)[slot]
        cr = (used + length) / (self.cr_window * self.n_sub)
        cbr = np.nan_to_num(self.cbr_last[rows], nan=0.0)  # no window measured yet: no limit
        bounds, limits = self.cr_limits[:, 0], self.cr_limits[:, 1]
        limit = limits[np.minimum(np.searchsorted(bounds, cbr, side="left"), len(limits) - 1)]
        return cr > limit
