"""What happened on the sidelink lately: every transmission of the last sensing window, and where every station
was at each channel step, so a station selecting a resource can reconstruct what it sensed (``sensing``) with the
very powers its receptions had."""

from __future__ import annotations

import numpy as np

TX_INT_COLUMNS = ("sf", "sender", "slot", "x0", "length", "rri", "snap")
TX_FLOAT_COLUMNS = ("sx", "sy")


class TxHistory:
    """Transmissions in subframe order, one array per column (``TX_INT_COLUMNS``, ``TX_FLOAT_COLUMNS``), so a
    window of them is a set of contiguous slices; ``window`` reads a range of subframes, ``prune`` forgets the old
    ones."""

    def __init__(self) -> None:
        self.cols: dict[str, np.ndarray] = {name: np.empty(1024, np.int64) for name in TX_INT_COLUMNS}
        self.cols.update({name: np.empty(1024, np.float64) for name in TX_FLOAT_COLUMNS})
        self.start = 0  # first live row
        self.end = 0  # one past the last row

    def add(self, sf: int, sender: np.ndarray, slot: np.ndarray, x0: np.ndarray, length: np.ndarray, rri: np.ndarray,
            snap: int, sx: np.ndarray, sy: np.ndarray) -> None:
        """Transmissions of subframe ``sf`` (not earlier than any added before); ``slot`` numbers each sender among
        every station the channel ever had."""
        k = len(sender)
        if self.end + k > len(self.cols["sf"]):
            self._make_room(k)
        rows = slice(self.end, self.end + k)
        for name, value in (("sf", sf), ("sender", sender), ("slot", slot), ("x0", x0), ("length", length),
                            ("rri", rri), ("snap", snap), ("sx", sx), ("sy", sy)):
            self.cols[name][rows] = value
        self.end += k

    def _make_room(self, k: int) -> None:
        live = self.end - self.start
        size = len(self.cols["sf"])
        if live + k > size // 2:
            size = max(2 * size, 2 * (live + k))
        for name, col in self.cols.items():
            grown = np.empty(size, col.dtype)
            grown[:live] = col[self.start:self.end]
            self.cols[name] = grown
        self.start, self.end = 0, live

    def prune(self, first_sf: int) -> None:
        """Forget transmissions before subframe ``first_sf``."""
        self.start += int(np.searchsorted(self.cols["sf"][self.start:self.end], first_sf, side="left"))

    def window(self, first_sf: int, end_sf: int) -> dict[str, np.ndarray]:
        """The columns of the transmissions in subframes [first_sf, end_sf) (views)."""
        sf = self.cols["sf"][self.start:self.end]
        a = self.start + int(np.searchsorted(sf, first_sf, side="left"))
        b = self.start + int(np.searchsorted(sf, end_sf, side="left"))
        return {name: col[a:b] for name, col in self.cols.items()}


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
