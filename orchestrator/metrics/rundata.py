"""A run directory read back: the resolved scenario, its robots, their control laws and the recorded traces.

This is everything metrics, plots and reports may use: nothing here touches a live federate, so any of them can be
recomputed later from the directory alone (``coopsim metrics RUN_DIR``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from core.robots import RobotSpec

from ..recording.trace_schema import RunDataError, check_values, open_trace, read_group, read_whole
from .geometry import Columns, Series

DIGEST_TRACES = ("vehicles", "v2x")
"""The traces the run digest covers (``run.json`` ``digest``)."""


@dataclass
class RunData:
    """A run directory, read on demand: the scenario, robots and laws at once, traces when asked for.

    The vehicles trace is never loaded whole: ``series`` reads the rows of chosen robots in one streaming pass over
    its row groups (projected to the columns asked for, optionally thinned), so memory stays bounded however long
    the run was. Other traces are read whole on first use (``trace``) and kept; those that grow with simulated time
    (``v2x``, ``channel_load``, ``cam_triggers``) are read through ``scan`` instead: chosen columns and rows, a row
    group at a time, nothing kept.
    """

    out_dir: Path
    scenario: Any
    robots: list[RobotSpec]
    laws: dict[int, Any] = field(default_factory=dict)  # follower id -> its control law (rebuilt from the scenario)
    _traces: dict[str, dict[str, np.ndarray] | None] = field(default_factory=dict)
    cache: dict[str, Any] = field(default_factory=dict)  # what metrics derive once per run (e.g. link indices)
    notes: list[str] = field(default_factory=list)  # plug-ins of the run that could not be had here, and what instead

    @classmethod
    def load(cls, out_dir: Path) -> RunData:
        """Read ``scenario.resolved.yaml``; traces are read when a metric asks for them. The run's plug-ins need
        not be importable here (``orchestrator.metrics.readback``): ``notes`` names those that are not and what is
        used in their place."""
        from .readback import read_back, readback_notes

        out_dir = Path(out_dir)
        try:
            scenario, robots, unresolved = read_back(out_dir)
        except ValueError as exc:  # ScenarioError is a bad scenario file, reported as such by the command line
            if type(exc).__name__ == "ScenarioError" or isinstance(exc, RunDataError):
                raise
            raise RunDataError(out_dir / "scenario.resolved.yaml", f"its robots cannot be built ({exc})") from None
        return cls(out_dir, scenario, robots, build_laws(robots), notes=readback_notes(unresolved, robots))

    def path(self, name: str) -> Path:
        """``trace/<name>.parquet``."""
        return self.out_dir / "trace" / f"{name}.parquet"

    def trace(self, name: str) -> Columns | None:
        """Columns of ``trace/<name>.parquet``, strings as object arrays (None when the run did not write it)."""
        if name not in self._traces:
            self._traces[name] = read_traces(self.out_dir, [name]).get(name)
        return self._traces[name]

    def scan(self, name: str, columns: Sequence[str],
             keep: Callable[[Mapping[str, np.ndarray]], np.ndarray] | None = None) -> Columns | None:
        """``columns`` (those the trace has) of the rows of ``trace/<name>.parquet`` that ``keep`` selects (a boolean
        mask over one row group's columns; default all), strings as object arrays; None when the run did not write
        it. Read a row group at a time and not cached: what is held is what is returned."""
        path = self.path(name)
        if not os.path.lexists(path):
            return None
        parquet = open_trace(path)
        names = parquet.schema_arrow.names
        cols = [c for c in dict.fromkeys(columns) if c in names]
        parts = []
        row0 = 0
        for group in range(parquet.num_row_groups):
            table = read_group(parquet, path, group, cols)
            check_values(path, {c: table.column(c) for c in cols}, name, row0)
            row0 += table.num_rows
            data = {c: _column(table.column(c)) for c in cols}
            if keep is not None:
                rows = np.flatnonzero(keep(data))
                data = {c: values[rows] for c, values in data.items()}
            parts.append(data)
        pa.default_memory_pool().release_unused()
        if not parts:
            empty = parquet.schema_arrow.empty_table()
            return {c: _column(empty.column(c)) for c in cols}
        return {c: np.concatenate([p[c] for p in parts]) for c in cols}

    def vehicle_rows(self) -> int:
        """Rows of the vehicles trace (from its footer; 0 without one)."""
        path = self.path("vehicles")
        return open_trace(path).metadata.num_rows if path.exists() else 0

    def series(self, robot_ids: Iterable[int], columns: Iterable[str], stride: int = 1) -> dict[int, Series]:
        """The vehicles trace of ``robot_ids``, time-sorted, with ``columns`` (those the trace has), keeping every
        ``stride``-th sample of each robot. One pass over the file; memory is what is returned."""
        path = self.path("vehicles")
        if not path.exists():
            return {}
        wanted = np.asarray(sorted(set(robot_ids)), np.int64)
        parquet = open_trace(path)  # an untrusted file: schema checked here, values as they are read
        names = set(parquet.schema_arrow.names)
        cols = [c for c in dict.fromkeys(columns) if c in names and c not in ("t_ns", "robot")]
        parts: dict[int, list[dict[str, np.ndarray]]] = {int(r): [] for r in wanted}
        seen = dict.fromkeys(parts, 0)
        row0, last_t = 0, None
        for group in range(parquet.num_row_groups):  # one row group at a time: what is read is what is held
            batch = read_group(parquet, path, group, ["t_ns", "robot", *cols])
            check_values(path, {c: batch.column(c) for c in batch.column_names}, "vehicles", row0)
            last_t = _check_time_order(path, batch.column("t_ns").to_numpy(), last_t, row0)
            row0 += batch.num_rows
            robot = batch.column("robot").to_numpy()
            keep = np.isin(robot, wanted)
            if not keep.any():
                continue
            rows = np.flatnonzero(keep)
            data = {name: batch.column(name).to_numpy(zero_copy_only=False)[rows] for name in ["t_ns", *cols]}
            robot = robot[rows]
            order = np.argsort(robot, kind="stable")  # rows of one robot together, in time order
            robot = robot[order]
            starts = np.flatnonzero(np.r_[True, robot[1:] != robot[:-1]])
            for start, end in zip(starts, [*starts[1:], len(robot)], strict=True):
                rid = int(robot[start])
                pick = order[start:end]
                if stride > 1:
                    index = seen[rid] + np.arange(len(pick))
                    pick = pick[index % stride == 0]
                seen[rid] += end - start
                parts[rid].append({name: values[pick] for name, values in data.items()})
        pa.default_memory_pool().release_unused()  # Arrow's allocator keeps freed row groups otherwise
        out = {}
        for rid in list(parts):
            chunks = parts.pop(rid)  # each robot's pieces go as soon as they are merged: never twice in memory
            if chunks:
                merged = {name: np.concatenate([c[name] for c in chunks]) for name in ["t_ns", *cols]}
                out[rid] = Series(merged.pop("t_ns"), merged)
        return out


def law_of_block(block: Mapping[str, Any], classes: dict[str, Any] | None = None) -> Any:
    """A control law from a resolved controller block; None when its class cannot be had here (a plug-in that is
    not importable, or plug-ins off). ``classes`` caches the lookups by type name across calls."""
    from controllers import CONTROLLERS
    from core.registry import UnknownNameError, is_stand_in

    from ..scenario.model import BLOCK_KEYS

    classes = {} if classes is None else classes
    if block["type"] not in classes:
        try:
            law_cls = CONTROLLERS.get(block["type"])
        except UnknownNameError:
            law_cls = None
        classes[block["type"]] = None if law_cls is None or is_stand_in(law_cls) else law_cls
    law_cls = classes[block["type"]]
    if law_cls is None:
        return None
    return law_cls(law_cls.Params(**{k: v for k, v in block.items() if k not in BLOCK_KEYS}))


def build_laws(robots: Iterable[RobotSpec]) -> dict[int, Any]:
    """Each follower's control law, built from its resolved controller block exactly as the run built it. A
    follower whose law cannot be had here (a plug-in that is not importable, or plug-ins off) gets none: its
    spacing error then comes from the recorded desired gap (``RunData.notes`` says so)."""
    classes: dict[str, Any] = {}  # one lookup per law: a failed import is not cached by Python
    laws: dict[int, Any] = {}
    for robot in robots:
        if robot.predecessor is None or robot.controller is None:
            continue
        law = law_of_block(robot.controller.settings, classes)
        if law is not None:
            laws[robot.id] = law
    return laws


def read_traces(out_dir: Path, names: Iterable[str] = DIGEST_TRACES) -> dict[str, dict[str, np.ndarray]]:
    """Columns of ``trace/<name>.parquet`` for each name that exists; strings as object arrays. Each file is checked
    against its port contract as it is read (``trace_schema``): RunDataError names a damaged one."""
    traces = {}
    for name in names:
        path = Path(out_dir) / "trace" / f"{name}.parquet"
        if os.path.lexists(path):
            table = read_whole(path, name)
            traces[name] = {col: _column(table.column(col)) for col in table.column_names}
    return traces


def _check_time_order(path: Path, t_ns: np.ndarray, last: int | None, row0: int) -> int | None:
    """The vehicles trace is written time-major: its ``t_ns`` never goes back. Returns the last time seen."""
    if not len(t_ns):
        return last
    back = np.flatnonzero(np.diff(t_ns) < 0)
    if len(back) or (last is not None and t_ns[0] < last):
        row = row0 + (int(back[0]) + 1 if len(back) else 0)
        raise RunDataError(path, f"column 't_ns' goes back in time at row {row}: a trace is written in time order")
    return int(t_ns[-1])


def _column(chunked: Any) -> np.ndarray:
    if pa.types.is_dictionary(chunked.type):  # one Python string per distinct value, shared by every row
        parts = [np.asarray(chunk.dictionary.to_pylist(), dtype=object)[chunk.indices.to_numpy(zero_copy_only=False)]
                 for chunk in chunked.chunks]
        return np.concatenate(parts) if parts else np.empty(0, object)
    if pa.types.is_string(chunked.type):
        return np.asarray(chunked.to_pylist(), dtype=object)
    return chunked.to_numpy()


def file_digest(out_dir: Path, names: Iterable[str] = DIGEST_TRACES) -> str:
    """SHA-256 over every column's name and bytes of the traces ``names`` in ``out_dir`` (strings joined with
    0x1f), in a fixed order: equal digests, identical traces. Read one column of one row group at a time, so
    memory stays bounded by a row group whatever the length of the run."""
    traces = {}
    for name in names:
        path = Path(out_dir) / "trace" / f"{name}.parquet"
        if path.exists():
            parquet = pq.ParquetFile(path)
            traces[name] = (parquet.schema_arrow.names,
                            lambda col, p=parquet: (p.read_row_group(g, columns=[col]).column(col)
                                                    for g in range(p.num_row_groups)))
    return _digest(traces)


def tables_digest(tables: Mapping[str, pa.Table]) -> str:
    """``file_digest`` of traces held in memory (name -> the table its file was written from): the same digest
    as that of the files, without reading them back."""
    return _digest({name: (table.column_names, lambda col, t=table: (t.column(col),))
                    for name, table in tables.items()})


def _digest(traces: Mapping[str, tuple[Sequence[str], Callable[[str], Iterable[Any]]]]) -> str:
    """The digest over traces given as (column names, column -> its pieces in row order)."""
    h = hashlib.sha256()
    for name in sorted(traces):
        names, pieces = traces[name]
        for col in sorted(names):
            h.update(f"{name}.{col}".encode())
            strings_seen = 0
            for piece in pieces(col):
                joined = _joined_strings(piece)
                if joined is not None:
                    if len(piece):
                        h.update(b"\x1f" if strings_seen else b"")
                        h.update(joined)
                        strings_seen += len(piece)
                    continue
                values = _column(piece)
                if values.dtype == object:
                    if len(values):
                        h.update(("\x1f" if strings_seen else "").encode() + "\x1f".join(map(str, values)).encode())
                        strings_seen += len(values)
                else:
                    h.update(np.ascontiguousarray(values).tobytes())
    return h.hexdigest()


def _joined_strings(chunked: pa.ChunkedArray) -> pa.Buffer | None:
    """A string column's values joined with 0x1f, as UTF-8, built by Arrow instead of one Python string per row
    (the same bytes as ``"\x1f".join(values).encode()``); None for other columns and for strings with nulls (those
    take the Python path, where a null hashes as "None")."""
    kind = chunked.type.value_type if pa.types.is_dictionary(chunked.type) else chunked.type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)) or chunked.null_count or not len(chunked):
        return None
    import pyarrow.compute as pc

    values = pa.chunked_array([c.dictionary.take(c.indices) if pa.types.is_dictionary(c.type) else c
                               for c in chunked.chunks], kind).cast(pa.large_string()).combine_chunks()
    one_list = pa.LargeListArray.from_arrays(pa.array([0, len(values)], pa.int64()), values)
    return pc.binary_join(one_list, pa.scalar("\x1f", pa.large_string()))[0].as_buffer()
