"""The newest CAM each receiving station holds from each sender, in a sorted key array (receiver id << 32 | sender
id) so that a step's messages are matched with one ``searchsorted``."""

from __future__ import annotations

import numpy as np

_FIELDS = ("gen", "x", "y", "yaw", "v")


def pair_keys(receiver: np.ndarray, sender: np.ndarray) -> np.ndarray:
    """One int64 key per (receiver, sender) pair (ids below 2**31)."""
    return (np.asarray(receiver, np.int64) << 32) | (np.asarray(sender, np.int64) & 0xFFFFFFFF)


class PairHistory:
    """Per pair: generation time [ns], claimed position [m], heading [rad] and speed [m/s] of its newest CAM."""

    def __init__(self) -> None:
        self.keys = np.empty(0, np.int64)
        self.cols = {"gen": np.empty(0, np.int64), **{name: np.empty(0) for name in _FIELDS[1:]}}

    def find(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per key: its position in the table and whether it is there."""
        pos = np.searchsorted(self.keys, keys)
        found = pos < len(self.keys)
        found[found] = self.keys[pos[found]] == keys[found]
        return pos, found

    def store(self, keys: np.ndarray, values: dict[str, np.ndarray]) -> None:
        """Set the newest CAM of each of ``keys`` (unique) to ``values``."""
        pos, found = self.find(keys)
        for name in _FIELDS:
            self.cols[name][pos[found]] = values[name][found]
        if (~found).any():
            merged = np.concatenate([self.keys, keys[~found]])
            order = np.argsort(merged, kind="stable")
            self.keys = merged[order]
            self.cols = {name: np.concatenate([self.cols[name], values[name][~found]])[order] for name in _FIELDS}

    def forget(self, ids: np.ndarray) -> None:
        """Drop the pairs of which a station of ``ids`` is either end."""
        keep = ~(np.isin(self.keys >> 32, ids) | np.isin(self.keys & 0xFFFFFFFF, ids))
        self.keys = self.keys[keep]
        self.cols = {name: col[keep] for name, col in self.cols.items()}
