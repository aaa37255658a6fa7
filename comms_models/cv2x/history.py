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


MAX_SLOTS = kn.OWN_SLOT  # stations a channel may ever have (22 bits of a ring entry)
MAX_SF = 1 << 31  # subframes a run may last (32 bits of a ring entry: 24 days of 1 ms subframes)


class Heard:
    """Per station row, a ring of what it heard, oldest first: every link the reception kernel resolved to it and a
    mark (slot ``kernels.OWN_SLOT``) for each subframe it transmitted in. An entry is 16 bytes, so appending one
    touches one cache line: ``ring[r, i, 0]`` packs the subframe (bits 32..63), the sender's slot (10..31), its first
    subchannel (5..9) and subchannel count (0..4); ``ring_p[r, i, 1]`` (a float view of the same memory) is the
    received power [dBm]. ``kernels.receive_subframe`` appends and forgets entries older than the sensing window;
    ``reserve`` makes room for a subframe's links before it runs."""

    def __init__(self, window: int, capacity: int = 64) -> None:
        self.window = window  # [slots] how far back a station senses
        self.ring = np.zeros((0, capacity, 2), np.int64)
        self.head = np.empty(0, np.int64)  # ring position of each row's oldest entry
        self.count = np.empty(0, np.int64)

    @property
    def arrays(self) -> tuple[np.ndarray, ...]:
        """``(ring, ring_p, head, count)`` as the kernels take them."""
        return self.ring, self.ring.view(np.float64), self.head, self.count

    def spawn(self, n: int, slots: int) -> None:
        """Empty rings for ``n`` new stations (``slots`` ever spawned, new ones included)."""
        if slots >= MAX_SLOTS:
            raise ValueError(f"cv2x: at most {MAX_SLOTS - 1} stations per run")
        self.ring = np.concatenate([self.ring, np.zeros((n, *self.ring.shape[1:]), np.int64)])
        self.head = np.concatenate([self.head, np.zeros(n, np.int64)])
        self.count = np.concatenate([self.count, np.zeros(n, np.int64)])

    def despawn(self, keep: np.ndarray) -> None:
        """Keep the rows of mask ``keep``."""
        self.ring, self.head, self.count = self.ring[keep], self.head[keep], self.count[keep]

    def reserve(self, sf: int, entries: int) -> None:
        """Room for ``entries`` more in every ring at subframe ``sf``: forget what is older than the window, and
        double the rings while the fullest one would be more than three quarters full (so forgetting stays rare)."""
        if sf >= MAX_SF:
            raise ValueError(f"cv2x: a run lasts at most {MAX_SF} slots")
        cap = self.ring.shape[1]
        if len(self.count) == 0 or int(self.count.max()) + entries <= cap:
            return
        kn.forget_heard(self.ring, self.head, self.count, sf - self.window)
        while int(self.count.max()) + entries > cap * 3 // 4:
            cap *= 2
        if cap == self.ring.shape[1]:
            return
        old = self.ring.shape[1]
        at = (self.head[:, None] + np.arange(old)[None, :]) % old
        grown = np.zeros((len(self.count), cap, 2), np.int64)
        grown[:, :old] = np.take_along_axis(self.ring, at[:, :, None], axis=1)  # oldest first from position 0
        self.ring = grown
        self.head[:] = 0
