"""Append-only Parquet tables written in row groups by a background thread.

Columns are assembled, compressed and written off the simulation thread (numpy concatenation and Arrow's
compression release the GIL), so on a machine with a spare core recording costs the run little wall time. The
queue is bounded, which bounds memory; ``close`` drains it and re-raises any writer error.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


class TraceWriteError(RuntimeError):
    """A trace file could not be written (a full disk, a vanished directory ...); what was written before stays
    readable up to its last complete row group."""

    def __init__(self, path: Path, cause: BaseException) -> None:
        self.path = path
        self.cause = cause
        reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(cause)
        super().__init__(f"writing {path} failed: {reason}")


class ParquetAppender:
    """Collects column chunks; ``flush`` hands them to the writer thread as one row group."""

    def __init__(self, path: Path, flush_rows: int = 200_000, units: Mapping[str, str] | None = None,
                 metadata: Mapping[str, str] | None = None, empty_schema: pa.Schema | None = None) -> None:
        """``units`` (column -> unit) go into each column's field metadata (``unit``); ``metadata`` into the
        schema's, so a reader of the file alone knows what it holds. ``empty_schema``: the columns of the file
        written when nothing was appended (none: no file)."""
        self.empty_schema = empty_schema
        self.path = Path(path)
        self.units = dict(units or {})
        self.metadata = dict(metadata or {})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.flush_rows = flush_rows
        self._chunks: list[Mapping[str, np.ndarray]] = []
        self._pending = 0
        self._queue: queue.Queue[list[Mapping[str, np.ndarray]] | None] = queue.Queue(maxsize=2)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
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
        """Hand what is queued to the writer thread as one row group; raise as soon as a write has failed (so a run
        on a full disk stops instead of simulating into nothing)."""
        if self._error is not None:
            raise TraceWriteError(self.path, self._error)
        if not self._chunks:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._write_loop, name=f"parquet:{self.path.name}", daemon=True)
            self._thread.start()
        chunks, self._chunks, self._pending = self._chunks, [], 0
        self._queue.put(chunks)

    def _write_loop(self) -> None:
        writer: pq.ParquetWriter | None = None
        schema: pa.Schema | None = None
        while True:
            chunks = self._queue.get()
            if chunks is None:
                break
            if self._error is not None:
                continue  # keep draining so the producer never blocks
            try:
                names = list(chunks[0])
                table = pa.table({name: _to_arrow(_concat([c[name] for c in chunks])) for name in names})
                if writer is None:
                    schema = self._schema(table.schema)
                    writer = pq.ParquetWriter(self.path, schema, compression="zstd")
                writer.write_table(table.cast(schema))
                self.rows_written += table.num_rows
            except BaseException as exc:  # reported by flush() and close()
                self._error = exc
        if writer is not None:
            try:
                writer.close()  # the footer: the row groups written so far become readable
            except BaseException as exc:
                self._error = self._error or exc

    def _schema(self, schema: pa.Schema) -> pa.Schema:
        fields = [f.with_metadata({"unit": self.units[f.name]}) if f.name in self.units else f for f in schema]
        return pa.schema(fields, metadata=self.metadata or None)

    def close(self) -> None:
        """Flush, wait for the writer and close the file (its footer makes it readable); raise a writer error."""
        if self._error is None:
            self.flush()
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise TraceWriteError(self.path, self._error) from self._error
        if self.rows_written == 0 and self.empty_schema is not None:
            pq.write_table(self._schema(self.empty_schema).empty_table(), self.path, compression="zstd")


class Categorical:
    """A string column held as small integer codes into a fixed list of names (cheap to build per step)."""

    def __init__(self, codes: np.ndarray, names: tuple[str, ...]) -> None:
        self.codes = codes
        self.names = names

    def __len__(self) -> int:
        return len(self.codes)


def categorical(codes: np.ndarray, names: tuple[str, ...]) -> Categorical:
    """A string column from codes: ``categorical(np.array([0, 1, 1]), ("tx", "rx"))``."""
    return Categorical(codes, names)


def _concat(parts: list) -> np.ndarray | Categorical:
    if isinstance(parts[0], Categorical):
        names = parts[0].names
        if any(p.names != names for p in parts):
            raise ValueError("categorical chunks of one column must share their names")
        return Categorical(np.concatenate([p.codes for p in parts]), names)
    return np.concatenate([np.asarray(p) for p in parts])


def _to_arrow(column: np.ndarray | Categorical) -> pa.Array:
    if isinstance(column, Categorical):
        return pa.DictionaryArray.from_arrays(pa.array(column.codes, pa.int8()), pa.array(column.names, pa.string()))
    if column.dtype == object:
        return pa.array(column.tolist(), type=pa.string()).dictionary_encode()
    return pa.array(column)
