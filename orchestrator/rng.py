"""Seeded random streams: one independent numpy Generator per (seed, federate, robot, purpose).

Streams are derived with numpy's SeedSequence from integer keys, so adding a robot or a federate never shifts the
draws of another one, and nothing ever touches global random state.
"""

from __future__ import annotations

import zlib

import numpy as np


def _key(label: str | int) -> int:
    if isinstance(label, int):
        return label
    return zlib.crc32(label.encode("utf-8"))


def stream(seed: int, *labels: str | int) -> np.random.Generator:
    """A Generator determined only by the scenario seed and the labels (federate name, robot id, purpose)."""
    entropy = [int(seed) & 0xFFFFFFFF, *(_key(label) for label in labels)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))
