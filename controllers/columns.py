"""Columns computed on first read: inputs a control law may or may not use (range sensing, the leader's sample).

A law that never reads the leader's sample or the sensor columns (the look-ahead CACC reads neither) should not pay
for gathering them for thousands of rows at every control step. ``LazyColumns`` is a mutable mapping whose values
are computed when first read and kept; what it computes is exactly what an eager dict would have held.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence

import numpy as np


class LazyColumns(MutableMapping[str, np.ndarray]):
    """Named arrays, each made by ``load(name)`` on first read (then kept); set or deleted like a dict.

    ``load`` must not depend on anything that changes before the columns are read: the control federate builds
    them from the inputs of the current step and reads them within that step.
    """

    def __init__(self, names: Sequence[str], load: Callable[[str], np.ndarray]) -> None:
        self._names = list(names)
        self._load = load
        self._values: dict[str, np.ndarray] = {}

    @classmethod
    def all_at_once(cls, names: Sequence[str], make: Callable[[], Mapping[str, np.ndarray]]) -> LazyColumns:
        """Columns that are computed together (``make`` returns all of them) on the first read of any."""
        made: list[Mapping[str, np.ndarray]] = []

        def load(name: str) -> np.ndarray:
            if not made:
                made.append(make())
            return made[0][name]

        return cls(names, load)

    def take(self, rows: np.ndarray) -> LazyColumns:
        """The same columns at ``rows`` (each gathered when first read)."""
        return LazyColumns(self._names, lambda name: self[name][rows])

    def copy(self) -> LazyColumns:
        """A shallow copy that stays lazy: columns not read yet are read through this mapping when needed."""
        return LazyColumns(self._names, self.__getitem__)

    def __getitem__(self, name: str) -> np.ndarray:
        values = self._values
        if name not in values:
            if name not in self._names:
                raise KeyError(name)
            values[name] = self._load(name)
        return values[name]

    def __setitem__(self, name: str, value: np.ndarray) -> None:
        if name not in self._names:
            self._names.append(name)
        self._values[name] = value

    def __delitem__(self, name: str) -> None:
        if name not in self._names:
            raise KeyError(name)
        self._names.remove(name)
        self._values.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names
