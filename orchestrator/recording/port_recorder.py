"""Records every declared output port of every federate, each to ``trace/<port>.parquet``, as a scheduler observer.

Built-in and extra federates, in process or remote, are recorded the same way: the recorder reads the port contracts
the scheduler collected at setup (``Scheduler.ports``) and, after each instant, the ports written at that instant.

- Robot-indexed ports: one row per robot per sample, columns ``t_ns``, ``robot`` and the declared fields, sampled
  no more often than the trace period.
- Event ports: every row of every publication (nothing is sampled away); ``t_ns`` is the port's own field when it
  declares one, else the instant of publication.

Each column carries its SI unit in its Parquet field metadata (``unit``) and the schema metadata names the port,
its producer and its index kind. Ports whose every column is already in ``trace/vehicles.parquet`` (``state``,
``estimate``, ``commands``, ``control_diag``) are not written twice; ``cam_rx`` (every decoded reception) is left
out by default because ``trace/v2x.parquet`` already holds every reception with its outcome.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from core.federate import FederateError
from core.ports import PortSpec
from orchestrator.engine.scheduler import BaseObserver, Scheduler

from .tables import ParquetAppender, categorical

VEHICLE_VIEW_PORTS = frozenset({"state", "estimate", "commands", "control_diag"})
"""Ports recorded in ``trace/vehicles.parquet`` (see ``recorder.COLUMNS``)."""
DEFAULT_SKIP = VEHICLE_VIEW_PORTS | {"cam_rx"}

_NUMPY_DTYPE = {"float64": np.float64, "int64": np.int64, "bool": np.bool_, "uint8": np.uint8, "str": object}


class PortRecorder(BaseObserver):
    """Writes ``trace_dir/<port>.parquet`` for every output port except those in ``skip``."""

    def __init__(self, trace_dir: Path, period_ns: int, skip: Iterable[str] = DEFAULT_SKIP,
                 appender: Callable[..., Any] = ParquetAppender) -> None:
        """``appender``: what takes each file's columns (a ``ParquetAppender``'s signature; a batched world's
        ``split.SplitAppender``)."""
        self.appender = appender
        self.trace_dir = Path(trace_dir)
        self.period_ns = period_ns
        self.skip = frozenset(skip)
        self._scheduler: Scheduler | None = None
        self._tables: dict[str, _PortTable] = {}
        self._failures = ParquetAppender.failures

    @property
    def ports(self) -> list[str]:
        """The ports being recorded."""
        return sorted(self._tables)

    def on_start(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        for port, (producer, spec) in scheduler.ports.items():
            if port not in self.skip:
                self._tables[port] = _PortTable(self.trace_dir / f"{port}.parquet", spec, producer, self.period_ns,
                                                self.appender)

    def on_instant(self, t_ns: int, bus: dict, stepped: Sequence[str]) -> None:
        if ParquetAppender.failures != self._failures:  # a write failed somewhere: stop now if it was one of ours
            self._failures = ParquetAppender.failures
            for table in self._tables.values():
                table.check()
        if self._scheduler is None:
            return
        for port in self._scheduler.written_now:
            table = self._tables.get(port)
            if table is not None:
                table.add(t_ns, bus[port])

    def on_end(self, t_ns: int, error: BaseException | None) -> None:
        failure: BaseException | None = None
        for table in self._tables.values():
            try:
                table.close()
            except Exception as exc:  # close every file first: each keeps what it has
                failure = failure or exc
        if failure is not None:
            raise failure


class _PortTable:
    """One port's Parquet file."""

    def __init__(self, path: Path, spec: PortSpec, producer: str, period_ns: int,
                 appender: Callable[..., Any] = ParquetAppender) -> None:
        self.spec = spec
        self.producer = producer
        self.period_ns = period_ns if spec.index == "robot" else 0
        self._next_ns = 0
        self._fields: list[str] | None = None  # untyped ports: the columns found at the first publication
        self._by_id = spec.index == "robot"
        self._own_time = spec.field("t_ns") is not None
        units = {"t_ns": "ns", **({"robot": "robot id"} if spec.index == "robot" else {}), **spec.units}
        metadata = {"coopsim.port": json.dumps({"name": spec.name, "producer": producer, "index": spec.index,
                                                "typed": spec.typed, "doc": spec.doc, "units": spec.units})}
        self._table = appender(path, units=units, metadata=metadata, empty_schema=self._schema())
        # typed ports: (time, value) references kept until a row group's worth is there, then assembled with one
        # concatenation per column (published values are immutable, see the scheduler): an instant costs an append
        self._pending: list[tuple[int, Mapping[str, Any]]] = []
        self._pending_rows = 0
        self.flush_rows = 200_000

    def _schema(self) -> pa.Schema | None:
        """The file's columns when no row was ever published (typed ports only)."""
        if not self.spec.typed:
            return None
        arrow = {"float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_(), "uint8": pa.uint8(),
                 "str": pa.dictionary(pa.int32(), pa.string())}
        head = [("t_ns", pa.int64())]
        if self.spec.index == "robot":
            head.append(("robot", pa.int64()))
        elif self._own_time:
            head = []
        return pa.schema(head + [(f.name, pa.dictionary(pa.int8(), pa.string()) if f.categories else arrow[f.dtype])
                                 for f in self.spec.fields])

    def add(self, t_ns: int, data: Mapping[str, Any] | None) -> None:
        if data is None or t_ns < self._next_ns:
            return
        self._next_ns = t_ns + self.period_ns
        if not self.spec.typed:
            try:
                columns = self._untyped_columns(t_ns, data)
            except (KeyError, TypeError, ValueError) as exc:
                raise FederateError(self.producer, t_ns, ValueError(f"port '{self.spec.name}': {exc}")) from exc
            self._table.append(columns)
            return
        first = "id" if self.spec.index == "robot" else self.spec.fields[0].name
        n = len(data[first]) if first in data else 0  # the port guard checked the contract
        if n:
            self._pending.append((t_ns, data))
            self._pending_rows += n
            if self._pending_rows >= self.flush_rows:
                self.flush()

    def flush(self) -> None:
        """Assemble the pending publications into one chunk of the file."""
        if not self._pending:
            return
        pending, self._pending, self._pending_rows = self._pending, [], 0
        first = "id" if self.spec.index == "robot" else self.spec.fields[0].name
        counts = [len(value[first]) for _, value in pending]
        out: dict[str, np.ndarray] = {}
        if self.spec.index == "robot" or not self._own_time:
            out["t_ns"] = np.repeat(np.asarray([t for t, _ in pending], np.int64), counts)
        if self.spec.index == "robot":
            out["robot"] = np.concatenate([value["id"] for _, value in pending]).astype(np.int64, copy=False)
        for field in self.spec.fields:
            column = np.concatenate([np.asarray(value[field.name]) for _, value in pending])
            column = column.astype(_NUMPY_DTYPE[field.dtype], copy=False)
            # codes with their names: a string column in the file, built without a string per row
            out[field.name] = categorical(column, field.categories) if field.categories else column
        self._table.append(out)

    def _untyped_columns(self, t_ns: int, data: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """A port declared by name only: one row per element of its ``id`` column (or of its first numeric
        column), with the numeric columns of that length as float64. The first publication fixes the columns; a
        column missing or of another length later is NaN (recording never fails a run for an untyped port)."""
        if self._fields is None:
            self._fields = []
            self._by_id = "id" in data
            n = len(np.atleast_1d(data["id"])) if self._by_id else None
            for key, value in data.items():
                column = np.asarray(value)
                if key == "id" or column.ndim != 1 or column.dtype.kind not in "biuf":
                    continue
                if n is None:
                    n = len(column)
                if len(column) == n:
                    self._fields.append(key)
        if self._by_id:
            ids = np.asarray(data["id"], np.int64).ravel()
            n = len(ids)
        else:
            n = len(np.asarray(data[self._fields[0]])) if self._fields and self._fields[0] in data else 0
        out: dict[str, np.ndarray] = {"t_ns": np.full(n, t_ns, np.int64)}
        if self._by_id:
            out["robot"] = ids
        for name in self._fields:
            column = np.asarray(data.get(name, ()), dtype=np.float64).ravel()
            out[name] = column if column.shape == (n,) else np.full(n, np.nan)
        return out

    def check(self) -> None:
        """Raise TraceWriteError when a write of this port's file has failed."""
        self._table.check()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._table.close()
