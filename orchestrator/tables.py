"""Append-only Parquet tables written in row groups, so a crash loses at most the rows not yet flushed."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


class ParquetAppender:
    """Collects column chunks and writes a row group every ``flush_rows`` rows (and on ``flush``/``close``)."""

    def __init__(self, path: Path, flush_rows: int = 200_000) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.flush_rows = flush_rows
        self._chunks: list[Mapping[str, np.ndarray]] = []
        self._pending = 0
        self._writer: pq.ParquetWriter | None = None
        self._schema: pa.Schema | None = None
        self.rows_written = 0

    def append(self, columns: Mapping[str, np.ndarray]) -> None:
        """Queue one chunk (equal-length columns, same names every time)."""
        n = len(next(iter(columns.values()))) if columns else 0
        if n == 0:
            return
        self._chunks.append(columns)
        self._pending += n
        if self._pending >= self.flush_rows:
            self.flush()

    def flush(self) -> None:
        """Write what is queued as one row group (the footer follows on ``close``, which runs also after a
        failed run)."""
        if not self._chunks:
            return
        names = list(self._chunks[0])
        arrays = {name: np.concatenate([np.asarray(c[name]) for c in self._chunks]) for name in names}
        table = pa.table({name: _to_arrow(col) for name, col in arrays.items()})
        if self._writer is None:
            self._schema = table.schema
            self._writer = pq.ParquetWriter(self.path, self._schema, compression="zstd")
        self._writer.write_table(table.cast(self._schema))
        self.rows_written += table.num_rows
        self._chunks.clear()
        self._pending = 0

    def close(self) -> None:
        """Flush and close; an empty table still leaves no file behind."""
        self.flush()
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _to_arrow(column: np.ndarray) -> pa.Array:
    if column.dtype == object:
        return pa.array(column.tolist(), type=pa.string()).dictionary_encode()
    return pa.array(column)
