"""Decentralised congestion control (ETSI TS 102 687): from each station's channel busy ratio to the gap T_off it
must keep between its frames, which the CA basic service uses as ``T_GenCam_DCC``.

Reactive DCC (TS 102 687, annex A): a state machine Relaxed / Active 1..3 / Restrictive over the CBR of the last
window; the state moves at most one step per evaluation towards the state the CBR asks for. Table A.1 suits
frames up to 1 ms on air, table A.2 frames up to 500 us.

Adaptive DCC (LIMERIC): ``delta <- (1 - a) delta + clip(b (CBR_target - CBR), g-, g+)``, bounded to
[delta_min, delta_max], every ``period``; ``T_off = T_on / delta`` with ``T_on`` the station's airtime.
"""

from __future__ import annotations

import numpy as np

from core.rowtable import RowTable

from .params import DccParams

REACTIVE_TABLES: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    # (CBR lower limits of Active 1, Active 2, Active 3, Restrictive), (T_off per state in s)
    "A.1": ((0.30, 0.40, 0.50, 0.60), (0.100, 0.200, 0.400, 0.500, 1.000)),
    "A.2": ((0.30, 0.40, 0.50, 0.65), (0.050, 0.100, 0.200, 0.250, 1.000)),
}
STATE_NAMES = ("relaxed", "active_1", "active_2", "active_3", "restrictive")


class Dcc(RowTable):
    """Per-station DCC state (rows in spawn order). ``update`` is called once per closed CBR window."""

    ROW_COLUMNS = ("state", "delta", "cbr", "_cbr_sum", "_cbr_count")

    def __init__(self, params: DccParams) -> None:
        self.params = params
        limits, t_off = REACTIVE_TABLES[params.table]
        self._limits = np.asarray(limits)
        self._t_off_ns = np.round(np.asarray(t_off) * 1e9).astype(np.int64)
        self.state = np.empty(0, np.int64)
        """Reactive state index (0 relaxed ... 4 restrictive)."""
        self.delta = np.empty(0, np.float64)
        """LIMERIC duty cycle."""
        self.cbr = np.empty(0, np.float64)
        """CBR of the last closed window (NaN before the first)."""
        self._cbr_sum = np.empty(0, np.float64)
        self._cbr_count = np.empty(0, np.int64)
        self._windows = 0
        lim = params.limeric
        self._limeric_every = max(1, round(lim.period_s / params.cbr_window_s))

    def __len__(self) -> int:
        return len(self.state)

    def spawn(self, n: int) -> None:
        """Append ``n`` stations, starting relaxed."""
        self.append_rows(state=np.zeros(n, np.int64), delta=np.full(n, self.params.limeric.delta_max),
                         cbr=np.full(n, np.nan), _cbr_sum=np.zeros(n), _cbr_count=np.zeros(n, np.int64))

    def despawn(self, keep: np.ndarray) -> None:
        """Keep only the rows where ``keep`` is True."""
        self.keep_rows(keep)

    def update(self, cbr: np.ndarray) -> None:
        """Take one window's CBR per station (NaN: not measured, state kept)."""
        cbr = np.asarray(cbr, np.float64)
        measured = ~np.isnan(cbr)
        self.cbr = np.where(measured, cbr, self.cbr)
        self._windows += 1
        if self.params.mode == "reactive":
            target = np.searchsorted(self._limits, np.where(measured, cbr, 0.0), side="right")
            step = np.sign(target - self.state)  # at most one state per evaluation
            self.state = np.where(measured, self.state + step, self.state)
        elif self.params.mode == "adaptive":
            self._cbr_sum += np.where(measured, cbr, 0.0)
            self._cbr_count += measured
            if self._windows % self._limeric_every == 0:
                lim = self.params.limeric
                have = self._cbr_count > 0
                mean = np.where(have, self._cbr_sum / np.maximum(self._cbr_count, 1), lim.cbr_target)
                step = np.clip(lim.beta * (lim.cbr_target - mean), lim.g_minus, lim.g_plus)
                new = np.clip((1.0 - lim.alpha) * self.delta + step, lim.delta_min, lim.delta_max)
                self.delta = np.where(have, new, self.delta)
                self._cbr_sum[:] = 0.0
                self._cbr_count[:] = 0

    def t_off_ns(self, airtime_ns: np.ndarray | int) -> np.ndarray:
        """The minimum gap between two frames of each station (0 when DCC is off)."""
        n = len(self)
        if self.params.mode == "reactive":
            return self._t_off_ns[self.state]
        if self.params.mode == "adaptive":
            return np.round(np.broadcast_to(np.asarray(airtime_ns, np.float64), (n,)) / self.delta).astype(np.int64)
        return np.zeros(n, np.int64)
