"""What happened on the sidelink lately: every transmission of the last sensing window, and where every station
was at each channel step, so a station selecting a resource can reconstruct what it sensed (``sensing``) with the
very powers its receptions had."""

from __future__ import annotations

import numpy as np

TX_INT_COLUMNS = ("sf", "sender", "slot", "x0", "length", "rri", "snap")
TX_FLOAT_COLUMNS = ("sx", "sy")


class TxHistory:
    """Transmissions in subframe order (columns of ``TX_INT_COLUMNS`` and ``TX_FLOAT_COLUMNS``); ``window`` reads a
    range of subframes, ``prune`` forgets the old ones."""

    def __init__(self) -> None:
        self.ints = np.empty((1024, len(TX_INT_COLUMNS)), np.int64)
        self.floats = np.empty((1024, len(TX_FLOAT_COLUMNS)), np.float64)
        self.start = 0  # first live row
        self.end = 0  # one past the last row

    def add(self, sf: int, sender: np.ndarray, slot: np.ndarray, x0: np.ndarray, length: np.ndarray, rri: np.ndarray,
            snap: int, sx: np.ndarray, sy: np.ndarray) -> None:
        """Transmissions of subframe ``sf`` (not earlier than any added before); ``slot`` numbers each sender among
        every station the channel ever had."""
        k = len(sender)
        if self.end + k > len(self.ints):
            self._make_room(k)
        rows = slice(self.end, self.end + k)
        self.ints[rows] = np.column_stack([np.full(k, sf), sender, slot, x0, length, rri, np.full(k, snap)])
        self.floats[rows] = np.column_stack([sx, sy])
        self.end += k

    def _make_room(self, k: int) -> None:
        live = self.end - self.start
        size = len(self.ints)
        if live + k > size // 2:
            size = max(2 * size, 2 * (live + k))
        ints = np.empty((size, self.ints.shape[1]), np.int64)
        floats = np.empty((size, self.floats.shape[1]), np.float64)
        ints[:live] = self.ints[self.start:self.end]
        floats[:live] = self.floats[self.start:self.end]
        self.ints, self.floats, self.start, self.end = ints, floats, 0, live

    def prune(self, first_sf: int) -> None:
        """Forget transmissions before subframe ``first_sf``."""
        self.start += int(np.searchsorted(self.ints[self.start:self.end, 0], first_sf, side="left"))

    def window(self, first_sf: int, end_sf: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows (int columns, float columns) of the transmissions in subframes [first_sf, end_sf)."""
        sf = self.ints[self.start:self.end, 0]
        a = self.start + int(np.searchsorted(sf, first_sf, side="left"))
        b = self.start + int(np.searchsorted(sf, end_sf, side="left"))
        return self.ints[a:b], self.floats[a:b]


class PositionSnapshots:
    """The stations' positions at the channel steps of the last ``keep_ns``, one column per current station row: a
    snapshot is found by its serial number (slot ``serial % depth``) while it is kept; the ring grows when steps are
    short. Stations that joined later have NaN in older snapshots."""

    def __init__(self, keep_ns: int, depth: int = 128) -> None:
        self.keep_ns = keep_ns
        self.depth = depth
        self.x = np.full((depth, 0), np.nan)
        self.y = np.full((depth, 0), np.nan)
        self.t_ns = np.full(depth, np.iinfo(np.int64).min, np.int64)  # time of the snapshot in each slot
        self.serial = -1  # serial of the newest snapshot

    def take(self, t_ns: int, x: np.ndarray, y: np.ndarray) -> int:
        """Record the positions at ``t_ns``; returns the snapshot's serial."""
        if self.t_ns[(self.serial + 1) % self.depth] > t_ns - self.keep_ns:
            self._grow()  # the oldest snapshot is still needed
        self.serial += 1
        slot = self.serial % self.depth
        self.x[slot], self.y[slot], self.t_ns[slot] = x, y, t_ns
        return self.serial

    def _grow(self) -> None:
        old = self.depth
        self.depth = 2 * old
        serials = np.arange(self.serial - old + 1, self.serial + 1)
        src, dst = serials % old, serials % self.depth
        for name, fill in (("x", np.nan), ("y", np.nan)):
            table = np.full((self.depth, getattr(self, name).shape[1]), fill)
            table[dst] = getattr(self, name)[src]
            setattr(self, name, table)
        t = np.full(self.depth, np.iinfo(np.int64).min, np.int64)
        t[dst] = self.t_ns[src]
        self.t_ns = t

    def spawn(self, n: int) -> None:
        """Columns for ``n`` new stations (unknown positions in the kept snapshots)."""
        self.x = np.concatenate([self.x, np.full((self.depth, n), np.nan)], axis=1)
        self.y = np.concatenate([self.y, np.full((self.depth, n), np.nan)], axis=1)

    def despawn(self, keep: np.ndarray) -> None:
        """Keep the columns of mask ``keep``."""
        self.x, self.y = self.x[:, keep], self.y[:, keep]
