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

    def __init__(self, names: Sequence[str], load: Callable[[str], np.ndarray],
                 source: tuple[Callable[[str], np.ndarray], np.ndarray] | None = None) -> None:
        self._names = list(names)
        self._load = load
        self._values: dict[str, np.ndarray] = {}
        self._source = source  # (column name -> whole array, rows): each column is that array at those rows
        self._set: set[str] = set()  # columns set by hand: no longer the source's

    def source_of(self, names: Sequence[str]) -> tuple[list[np.ndarray], np.ndarray] | None:
        """The whole arrays of ``names`` and the rows these columns are taken at, for compiled code that reads the
        rows in place; None when the columns have no such source or one of them was set by hand."""
        if self._source is None or not self._set.isdisjoint(names):
            return None
        whole, rows = self._source
        return [whole(name) for name in names], rows

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
        copied = LazyColumns(self._names, self.__getitem__, self._source)
        copied._set = set(self._set)
        return copied

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
        self._set.add(name)

    def __delitem__(self, name: str) -> None:
        if name not in self._names:
            raise KeyError(name)
        self._names.remove(name)
        self._values.pop(name, None)
        self._set.add(name)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names
