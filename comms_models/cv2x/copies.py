"""Blind retransmissions (NR-V2X mode 2): a packet goes on air in up to three slots, and a receiver has it when it
decodes any copy. The outcome of each copy at each receiver is held until the packet's last copy, then one outcome
per receiver is reported: the earliest copy decoded (its slot, power), or, when none was, the last copy's loss.
Copies are not soft-combined (chase combining would lower the SINR a packet needs; not modelled)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .reception import RECEIVED

MAX_COPIES = 3  # a packet and up to two blind retransmissions (one SCI indicates up to three resources)


@dataclass
class Outcomes:
    """One packet's outcome per receiver row (sorted by receiver)."""

    rx: np.ndarray  # int64 receiver rows
    cause: np.ndarray  # int64 loss cause codes
    power_dbm: np.ndarray  # float64
    sf: np.ndarray  # int64 slot of the copy the outcome is from

    def merged(self, later: Outcomes) -> Outcomes:
        """This packet's outcomes combined with those of a later copy: where this one decoded, it stays; elsewhere
        the later copy's outcome replaces it (receivers only one of them reached keep theirs)."""
        rx = np.union1d(self.rx, later.rx)
        out = Outcomes(rx, np.empty(len(rx), np.int64), np.empty(len(rx)), np.empty(len(rx), np.int64))
        at = np.searchsorted(rx, self.rx)
        out.cause[at], out.power_dbm[at], out.sf[at] = self.cause, self.power_dbm, self.sf
        decoded = np.zeros(len(rx), bool)
        decoded[at] = self.cause == RECEIVED
        at = np.searchsorted(rx, later.rx)
        take = ~decoded[at]
        out.cause[at[take]], out.power_dbm[at[take]], out.sf[at[take]] = (later.cause[take], later.power_dbm[take],
                                                                          later.sf[take])
        return out


class CopyHolder:
    """Each station's planned copies (slots and first subchannels, -1 where none) and the outcomes so far of the
    packets whose copies are still to come (by sender id)."""

    def __init__(self) -> None:
        self.held: dict[int, Outcomes] = {}
        self.sf = np.empty((0, MAX_COPIES), np.int64)
        self.x0 = np.empty((0, MAX_COPIES), np.int64)

    def spawn(self, n: int) -> None:
        """Rows for ``n`` new stations, nothing planned."""
        self.sf = np.concatenate([self.sf, np.full((n, MAX_COPIES), -1, np.int64)])
        self.x0 = np.concatenate([self.x0, np.full((n, MAX_COPIES), -1, np.int64)])

    def despawn(self, keep: np.ndarray, gone_ids: np.ndarray) -> None:
        """Keep the rows of mask ``keep``; forget what the stations ``gone_ids`` had in the air."""
        self.sf, self.x0 = self.sf[keep], self.x0[keep]
        self.forget(gone_ids)

    def plan(self, row: int, slots: list[int], x0: list[int]) -> None:
        """Station ``row``'s next packet goes in ``slots`` (time order) from subchannels ``x0``."""
        self.sf[row], self.x0[row] = -1, -1
        self.sf[row, :len(slots)], self.x0[row, :len(x0)] = slots, x0

    def add(self, sender: int, outcomes: Outcomes, final: bool) -> Outcomes | None:
        """Record a copy's outcomes; returns the packet's combined outcomes when this was its last copy."""
        prior = self.held.pop(sender, None)
        merged = outcomes if prior is None else prior.merged(outcomes)
        if final:
            return merged
        self.held[sender] = merged
        return None

    def forget(self, senders: np.ndarray) -> None:
        """Drop what is held for ``senders`` (their packet was replaced, dropped or they left)."""
        for s in np.asarray(senders).tolist():
            self.held.pop(int(s), None)
