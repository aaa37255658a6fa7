"""Per-robot arrays that grow and shrink together: one row per robot in spawn order, appended when robots spawn
and filtered when they despawn.

The physics, control and V2X federates and their parts each keep such columns (body sizes, command sources, held
samples ...). ``RowTable`` keeps them as plain attributes (read as fast as any attribute at every step) and names
them once, so that a column added later cannot be forgotten on despawn.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np


class RowTable:
    """A base for classes whose ``ROW_COLUMNS`` attributes are arrays with the robot's row on the first axis."""

    ROW_COLUMNS: ClassVar[tuple[str, ...]] = ()

    def append_rows(self, **columns: np.ndarray) -> None:
        """Append the new robots' rows: one array per name of ``ROW_COLUMNS``, each with the same number of rows."""
        if set(columns) != set(self.ROW_COLUMNS):
            raise ValueError(f"{type(self).__name__}: rows need {sorted(self.ROW_COLUMNS)}, got {sorted(columns)}")
        for name, new in columns.items():
            setattr(self, name, np.concatenate([getattr(self, name), new]))

    def keep_rows(self, keep: np.ndarray) -> None:
        """Keep the rows where the mask ``keep`` is True (the others' robots left), in their order."""
        for name in self.ROW_COLUMNS:
            setattr(self, name, getattr(self, name)[keep])

    def drop_rows(self, rows: np.ndarray) -> None:
        """Remove the rows at the indices ``rows``; the others keep their order."""
        keep = np.ones(len(getattr(self, self.ROW_COLUMNS[0])), bool)
        keep[np.asarray(rows, np.int64)] = False
        self.keep_rows(keep)
