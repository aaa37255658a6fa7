"""What happened on the sidelink lately: every transmission of the last second (for the channel occupancy ratio), and
what each station heard over its sensing window, so a station selecting a resource reads what it sensed
(``sensing``) with the very powers its receptions had."""

from __future__ import annotations

import numpy as np

from . import kernels as kn

TX_INT_COLUMNS = ("sf", "sender", "slot", "x0", "length")


class TxHistory:
    """Transmissions in subframe order, one array per column (``TX_INT_COLUMNS``), so a window of them is a set of
    contiguous slices; ``window`` reads a range of subframes, ``prune`` forgets the old ones."""

    def __init__(self) -> None:
        self.cols: dict[str, np.ndarray] = {name: np.empty(1024, np.int64) for name in TX_INT_COLUMNS}
        self.start = 0  # first live row
        self.end = 0  # one past the last row

    def add(self, sf: int, sender: np.ndarray, slot: np.ndarray, x0: np.ndarray, length: np.ndarray) -> None:
        """Transmissions of subframe ``sf`` (not earlier than any added before); ``slot`` numbers each sender among
        every station the channel ever had."""
        k = len(sender)
        if self.end + k > len(self.cols["sf"]):
            self._make_room(k)
        rows = slice(self.end, self.end + k)
        for name, value in (("sf", sf), ("sender", sender), ("slot", slot), ("x0", x0), ("length", length)):
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


class Heard:
    """Per station row, a ring of what it heard, oldest first: every link the reception kernel resolved to it (the
    subframe, the sender's slot, first subchannel, subchannel count and received power) and a mark (slot -1) for
    each subframe it transmitted in. ``kernels.receive_subframe`` appends and forgets entries older than the sensing
    window; ``reserve`` makes room for a subframe's links before it runs."""

    def __init__(self, window: int, capacity: int = 64) -> None:
        self.window = window  # [slots] how far back a station senses
        self.sf = np.empty((0, capacity), np.int64)
        self.slot = np.empty((0, capacity), np.int32)
        self.x0 = np.empty((0, capacity), np.int16)
        self.length = np.empty((0, capacity), np.int16)
        self.power_dbm = np.empty((0, capacity))
        self.head = np.empty(0, np.int64)  # ring position of each row's oldest entry
        self.count = np.empty(0, np.int64)

    @property
    def arrays(self) -> tuple[np.ndarray, ...]:
        """``(sf, slot, x0, length, power_dbm, head, count)`` as the kernels take them."""
        return self.sf, self.slot, self.x0, self.length, self.power_dbm, self.head, self.count

    def spawn(self, n: int) -> None:
        """Empty rings for ``n`` new stations."""
        cap = self.sf.shape[1]
        for name in ("sf", "slot", "x0", "length", "power_dbm"):
            old = getattr(self, name)
            setattr(self, name, np.concatenate([old, np.zeros((n, cap), old.dtype)]))
        self.head = np.concatenate([self.head, np.zeros(n, np.int64)])
        self.count = np.concatenate([self.count, np.zeros(n, np.int64)])

    def despawn(self, keep: np.ndarray) -> None:
        """Keep the rows of mask ``keep``."""
        for name in ("sf", "slot", "x0", "length", "power_dbm", "head", "count"):
            setattr(self, name, getattr(self, name)[keep])

    def reserve(self, sf: int, entries: int) -> None:
        """Room for ``entries`` more in every ring at subframe ``sf``: forget what is older than the window, and
        double the rings while the fullest one still lacks room."""
        cap = self.sf.shape[1]
        if len(self.count) == 0 or int(self.count.max()) + entries <= cap:
            return
        kn.forget_heard(self.sf, self.head, self.count, sf - self.window)
        while int(self.count.max()) + entries > cap:
            cap *= 2
        if cap == self.sf.shape[1]:
            return
        rows = np.arange(len(self.count))[:, None]
        at = (self.head[:, None] + np.arange(self.sf.shape[1])[None, :]) % self.sf.shape[1]
        for name in ("sf", "slot", "x0", "length", "power_dbm"):
            old = getattr(self, name)
            grown = np.zeros((len(self.count), cap), old.dtype)
            grown[:, :old.shape[1]] = old[rows, at]  # oldest first from position 0
            setattr(self, name, grown)
        self.head[:] = 0
