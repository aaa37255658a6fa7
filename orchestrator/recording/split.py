"""Traces of a batched world split into its points' run directories (``orchestrator.batch.batched``).

Many batch points can run as independent copies in one world: point ``p``'s robot ``i`` is robot ``p * stride + i``
there. ``SplitAppender`` stands in for the recorders' ``ParquetAppender``: it sorts every chunk's rows by point (stable,
so each point keeps its time and row order), turns the robot ids of every ``robot id`` column back into the point's
own, and once the run has ended writes each point's ``trace/<name>.parquet`` (``PointSplit.write``, a point at a
time) through a ``ParquetAppender`` with the same units, metadata and empty schema. A point's file thus holds the
rows, columns and types a run of that point alone writes. ``write`` returns the tables written, for the point's
digest and metrics (``trace_schema.held``), so these need not decode the files again.
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
    closed: list[SplitAppender] = field(default_factory=list)
    """The appenders closed so far: each holds every point's rows until ``write`` writes that point's file."""

    def write(self, point: int) -> dict[str, pa.Table]:
        """Write ``point``'s file of every closed trace (or its empty schema, as a run of it alone would) in this
        thread, one row group each, and return what each file holds (file name -> table): the point's digest and
        metrics read these instead of decoding the files again. Its rows are then no longer held."""
        tables = {}
        for appender in self.closed:
            table = appender.write_point(point)
            if table is not None:
                tables[appender.name] = table
        return tables

    def own_ids(self, ids: np.ndarray) -> np.ndarray:
        """The points' own robot ids (negative ones, "no robot", stay)."""
        if ids.dtype.kind == "f":
            found = np.isfinite(ids) & (ids >= 0)
            return np.where(found, np.where(found, ids, 0) % self.stride, ids)
        return np.where(ids >= 0, ids % self.stride, ids)


class SplitAppender:
    """A ``ParquetAppender`` for a batched world's trace ``path`` that writes each point's rows into its own run
    directory (``split``) after the run. Rows go to the point of their first ``robot id`` column."""

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
        if point.min() < 0 or point.max() >= len(self._parts):  # a row no point owns would be lost, not written
            raise ValueError(f"trace {self.name}: column {key} holds ids outside this world's points "
                             f"(0 to {len(self._parts) * self.split.stride - 1})")
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
        """The run has ended: the points' files are written one point at a time (``PointSplit.write``), each
        point's post-processing right after its own, so the tables written need not all be held at once."""
        if self not in self.split.closed:
            self.split.closed.append(self)

    def write_point(self, point: int) -> pa.Table | None:
        """Write ``point``'s file; return the table it holds (None: no rows and no empty schema, no file)."""
        parts, self._parts[point] = self._parts[point], []  # the point's rows go once its file has them
        appender = ParquetAppender(Path(self.split.dirs[point]) / "trace" / self.name, flush_rows=1 << 62,
                                   units=self.units, metadata=self.metadata, empty_schema=self.empty_schema)
        for part in parts:
            appender.append(part)
        del parts
        return appender.write_whole()


def _take(column: Any, order: np.ndarray, robot_ids: bool, split: PointSplit) -> Any:
    if isinstance(column, Categorical):
        return Categorical(column.codes[order], column.names)
    taken = np.asarray(column)[order]
    return split.own_ids(taken) if robot_ids else taken


def _slice(column: Any, a: int, b: int) -> Any:
    if isinstance(column, Categorical):
        return Categorical(column.codes[a:b], column.names)
    return column[a:b]
