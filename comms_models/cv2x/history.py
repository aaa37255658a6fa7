"""What happened on the sidelink lately: every transmission of the last second (for the channel occupancy ratio), and
what each station heard over its sensing window, so a station selecting a resource reads what it sensed
(``sensing``) with the very powers its receptions had."""

from __future__ import annotations

import numpy as np

from . import kernels as kn

TX_INT_COLUMNS = ("sf", "sender", "slot", "x0", "length", "snap")
TX_FLOAT_COLUMNS = ("sx", "sy")


class TxHistory:
    """Transmissions in subframe order, one array per column (``TX_INT_COLUMNS``, ``TX_FLOAT_COLUMNS``: the sender's
    position and the snapshot of the step), so a window of them is a set of contiguous slices; ``window`` reads a
    range of subframes, ``prune`` forgets the old ones."""

    def __init__(self) -> None:
        self.cols: dict[str, np.ndarray] = {name: np.empty(1024, np.int64) for name in TX_INT_COLUMNS}
        self.cols.update({name: np.empty(1024, np.float64) for name in TX_FLOAT_COLUMNS})
        self.start = 0  # first live row
        self.end = 0  # one past the last row

    def add(self, sf: int, sender: np.ndarray, slot: np.ndarray, x0: np.ndarray, length: np.ndarray, snap: int,
            sx: np.ndarray, sy: np.ndarray) -> None:
        """Transmissions of subframe ``sf`` (not earlier than any added before); ``slot`` numbers each sender among
        every station the channel ever had; ``snap`` the position snapshot of the step, ``sx, sy`` the senders'
        positions."""
        k = len(sender)
        if self.end + k > len(self.cols["sf"]):
            self._make_room(k)
        rows = slice(self.end, self.end + k)
        for name, value in (("sf", sf), ("sender", sender), ("slot", slot), ("x0", x0), ("length", length),
                            ("snap", snap), ("sx", sx), ("sy", sy)):
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


MAX_SLOTS = kn.OWN_SLOT  # stations a channel may ever have (22 bits of a ring entry)
MAX_SF = 1 << 31  # subframes a run may last (32 bits of a ring entry: 24 days of 1 ms subframes)
RING_BUDGET_BYTES = 256 << 20  # rings larger than this are dropped and the sensing recomputed (``Heard.reserve``)


class Heard:
    """Per station row, a ring of what it heard, oldest first: every link the reception kernel resolved to it and a
    mark (slot ``kernels.OWN_SLOT``) for each subframe it transmitted in. An entry is 16 bytes, so appending one
    touches one cache line: ``ring[r, i, 0]`` packs the subframe (bits 32..63), the sender's slot (10..31), its first
    subchannel (5..9) and subchannel count (0..4); ``ring_p[r, i, 1]`` (a float view of the same memory) is the
    received power [dBm]. ``kernels.receive_subframe`` appends and forgets entries older than the sensing window;
    ``reserve`` makes room for a subframe's links before it runs."""

    def __init__(self, window: int, capacity: int = 64) -> None:
        self.window = window  # [slots] how far back a station senses
        self._kept = True
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
        if not self.kept:
            return
        self.ring = np.concatenate([self.ring, np.zeros((n, *self.ring.shape[1:]), np.int64)])
        self.head = np.concatenate([self.head, np.zeros(n, np.int64)])
        self.count = np.concatenate([self.count, np.zeros(n, np.int64)])

    def despawn(self, keep: np.ndarray) -> None:
        """Keep the rows of mask ``keep``."""
        if self.kept:
            self.ring, self.head, self.count = self.ring[keep], self.head[keep], self.count[keep]

    @property
    def kept(self) -> bool:
        """Whether the rings are kept (False once they outgrew ``RING_BUDGET_BYTES``)."""
        return self._kept

    def reserve(self, sf: int, entries: int) -> None:
        """Room for ``entries`` more in every ring at subframe ``sf``: forget what is older than the window, and
        double the rings while the fullest one would be more than three quarters full (so forgetting stays rare).
        Rings that would outgrow ``RING_BUDGET_BYTES`` are dropped for good (``kept`` turns False): each station
        then hears thousands of links a second, and its sensing is recomputed from the history instead."""
        if sf >= MAX_SF:
            raise ValueError(f"cv2x: a run lasts at most {MAX_SF} slots")
        cap = self.ring.shape[1]
        if not self.kept or len(self.count) == 0 or int(self.count.max()) + entries <= cap:
            return
        kn.forget_heard(self.ring, self.head, self.count, sf - self.window)
        while int(self.count.max()) + entries > cap * 3 // 4:
            cap *= 2
        if cap == self.ring.shape[1]:
            return
        if len(self.count) * cap * 16 > RING_BUDGET_BYTES:
            self._kept = False
            self.ring = np.zeros((0, 1, 2), np.int64)
            self.head = self.count = np.zeros(0, np.int64)
            return
        old = self.ring.shape[1]
        at = (self.head[:, None] + np.arange(old)[None, :]) % old
        grown = np.zeros((len(self.count), cap, 2), np.int64)
        grown[:, :old] = np.take_along_axis(self.ring, at[:, :, None], axis=1)  # oldest first from position 0
        self.ring = grown
        self.head[:] = 0
