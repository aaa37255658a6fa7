"""Per-row state for stateful laws, so followers can join and leave a running controller.

A law that remembers something per follower (an integrator, a breadcrumb buffer, a mode) declares each state
array once with ``_declare_state``; the array's first axis is the row. The hosting federate then calls

- ``add_rows(n)``: n new followers are appended as the last rows, their state set to the declared fill value;
- ``remove_rows(rows)``: the given rows (indices in the current numbering) are dropped; the remaining rows
  keep their order and are renumbered 0..n-1.

A law that has never held rows sizes itself on its first ``compute`` call (``_ensure_rows``); afterwards a
row-count mismatch is an error, so a missed add/remove never passes silently.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class RowStateMixin:
    """Row-aligned state arrays with ``add_rows`` / ``remove_rows``; see the module docstring."""

    _state: dict[str, np.ndarray]
    _state_fill: dict[str, float | int | bool]

    def _declare_state(
        self,
        name: str,
        trailing_shape: tuple[int, ...] = (),
        fill: float | int | bool = 0.0,
        dtype: type = float,
    ) -> None:
        """Register a state array of shape (rows, *trailing_shape), new rows filled with ``fill``."""
        if not hasattr(self, "_state"):
            self._state = {}
            self._state_fill = {}
            self._rows_sized = False
        self._state[name] = np.full((0, *trailing_shape), fill, dtype=dtype)
        self._state_fill[name] = fill

    @property
    def n_rows(self) -> int:
        """Number of rows the state currently holds."""
        first = next(iter(self._state.values()), None)
        return 0 if first is None else int(first.shape[0])

    def add_rows(self, n: int) -> None:
        """Append ``n`` fresh rows at the end of every state array."""
        if n < 0:
            raise ValueError(f"add_rows: n must be >= 0, got {n}")
        for name, arr in self._state.items():
            fresh = np.full((n, *arr.shape[1:]), self._state_fill[name], dtype=arr.dtype)
            self._state[name] = np.concatenate([arr, fresh], axis=0)
        self._rows_sized = True

    def remove_rows(self, rows: Sequence[int] | np.ndarray) -> None:
        """Drop ``rows`` (current indices, or a boolean mask over rows); the others keep their order."""
        idx = np.asarray(rows)
        n = self.n_rows
        if idx.dtype == bool:
            if idx.shape != (n,):
                raise ValueError(f"remove_rows: mask of shape {idx.shape} for {n} rows")
            idx = np.flatnonzero(idx)
        idx = idx.astype(np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise ValueError(f"remove_rows: rows {idx.tolist()} out of range for {n} rows")
        for name, arr in self._state.items():
            self._state[name] = np.delete(arr, idx, axis=0)

    def _ensure_rows(self, n: int) -> None:
        """Size the state on first use; afterwards the caller's row count must match the state's."""
        if not self._rows_sized and self.n_rows == 0:
            self.add_rows(n)
        elif n != self.n_rows:
            raise ValueError(
                f"{type(self).__name__}: compute called with {n} rows but the state holds {self.n_rows}; "
                "call add_rows(n) / remove_rows(rows) when followers join or leave"
            )
