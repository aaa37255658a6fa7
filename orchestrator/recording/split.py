"""Traces of a batched world split into its points' run directories (``orchestrator.batch.batched``).

Many batch points can run as independent copies in one world: point ``p``'s robot ``i`` is robot ``p * stride + i``
there. ``SplitAppender`` stands in for the recorders' ``ParquetAppender``: it sorts every chunk's rows by point (stable,
so each point keeps its time and row order), turns the robot ids of every ``robot id`` column back into the point's
own, and at the end writes each point's ``trace/<name>.parquet`` through a ``ParquetAppender`` with the same units,
metadata and empty schema. A point's file thus holds the rows, columns and types a run of that point alone writes.
The tables written stay in ``PointSplit.tables`` for the point's digest and metrics (``trace_schema.held``), so
these need not decode the files again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from .tables import Categorical, ParquetAppender

ROBOT_ID = "robot id"
"""The unit of columns that name robots."""


@dataclass(frozen=True)
class PointSplit:
    """Where each point of a batched world writes: robot ``id`` belongs to point ``id // stride`` (its own id there
    ``id % stride``), whose run directory is ``dirs[point]``."""

    stride: int
    dirs: Sequence[Path]
    tables: list[dict[str, pa.Table]] = field(default_factory=list)
    """Per point, what each of its files holds (file name -> table), filled as the appenders close; whoever
    finishes a point takes its tables out (``take``)."""

    def __post_init__(self) -> None:
        self.tables.extend({} for _ in range(len(self.dirs) - len(self.tables)))

    def take(self, point: int) -> dict[str, pa.Table]:
        """The tables of ``point``'s files (file name -> table), no longer held here."""
        tables, self.tables[point] = self.tables[point], {}
        return tables

    def own_ids(self, ids: np.ndarray) -> np.ndarray:
        """The points' own robot ids (negative ones, "no robot", stay)."""
        if ids.dtype.kind == "f":
            found = np.isfinite(ids) & (ids >= 0)
            return np.where(found, np.where(found, ids, 0) % self.stride, ids)
        return np.where(ids >= 0, ids % self.stride, ids)


class SplitAppender:
    """A ``ParquetAppender`` for a batched world's trace ``path`` that writes each point's rows into its own run
    directory (``split``) when closed. Rows go to the point of their first ``robot id`` column."""

    def __init__(self, path: Path, flush_rows: int = 200_000, units: Mapping[str, str] | None = None,
                 metadata: Mapping[str, str] | None = None, empty_schema: pa.Schema | None = None, *,
                 split: PointSplit) -> None:
        self.name = Path(path).name
        self.units = dict(units or {})
        self.metadata = dict(metadata or {})
        self.empty_schema = empty_schema
        self.split = split
        self._ids = [name for name, unit in self.units.items() if unit == ROBOT_ID]
        self._parts: list[list[dict[str, Any]]] = [[] for _ in split.dirs]
        self.rows_written = 0

    def append(self, columns: Mapping[str, Any]) -> None:
        """Sort one chunk's rows into the points' parts."""
        n = len(next(iter(columns.values()))) if columns else 0
        if n == 0:
            return
        key = next((name for name in self._ids if name in columns), None)
        if key is None:
            raise ValueError(f"trace {self.name}: no robot id column, its rows cannot be told apart by point")
        point = np.asarray(columns[key], np.int64) // self.split.stride
        order = np.argsort(point, kind="stable")
        bounds = np.searchsorted(point[order], np.arange(len(self._parts) + 1))
        ordered = {name: _take(column, order, name in self._ids, self.split) for name, column in columns.items()}
        for p in np.flatnonzero(np.diff(bounds)).tolist():
            a, b = int(bounds[p]), int(bounds[p + 1])
            self._parts[p].append({name: _slice(column, a, b) for name, column in ordered.items()})
        self.rows_written += n

    @property
    def failed(self) -> bool:
        """Nothing is written before ``close``."""
        return False

    def check(self) -> None:
        """Nothing is written before ``close``: nothing can have failed."""

    def flush(self) -> None:
        """Rows are kept until ``close``."""

    def close(self) -> None:
        """Write every point's file (or its empty schema, as a run of it alone would) in this thread, one row group
        each, and keep the table each file holds in ``split.tables``."""
        for point, directory in enumerate(self.split.dirs):
            parts, self._parts[point] = self._parts[point], []  # each point's rows go once its file has them
            appender = ParquetAppender(Path(directory) / "trace" / self.name, flush_rows=1 << 62, units=self.units,
                                       metadata=self.metadata, empty_schema=self.empty_schema)
            for part in parts:
                appender.append(part)
            del parts
            table = appender.write_whole()
            if table is not None:
                self.split.tables[point][self.name] = table


def _take(column: Any, order: np.ndarray, robot_ids: bool, split: PointSplit) -> Any:
    if isinstance(column, Categorical):
        return Categorical(column.codes[order], column.names)
    taken = np.asarray(column)[order]
    return split.own_ids(taken) if robot_ids else taken


def _slice(column: Any, a: int, b: int) -> Any:
    if isinstance(column, Categorical):
        return Categorical(column.codes[a:b], column.names)
    return column[a:b]
