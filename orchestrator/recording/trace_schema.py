"""A run directory read back is untrusted input: every trace the metrics read is checked as it is opened.

``coopsim metrics RUN_DIR`` may be given a directory that was cut short, edited, or made to hurt. Each trace is
opened through ``open_trace``: it must be a regular file (not a FIFO or a device that would block or never end), a
readable Parquet file (its footer), and carry the columns its port contract declares (``core/ports.py``;
``recorder.COLUMNS`` for ``trace/vehicles.parquet``) with the declared types. The values are checked as they are
read (``check_values``): no NaN or infinity where the contract says ``finite``, time that never goes back in the
vehicles trace. Anything else is a ``RunDataError`` naming the file and what is wrong (exit 2, no traceback).

Columns a contract declares but older runs did not write are optional (``OPTIONAL``); columns beyond the contract
are allowed and left alone.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from core.ports import BUILTIN_PORTS, STATE_FIELDS, PortSpec


class RunDataError(ValueError):
    """A file of a run directory is missing, unreadable or not what ``coopsim run`` writes there."""

    def __init__(self, path: Path | str, what: str) -> None:
        self.path = Path(path)
        self.what = what
        verb = what.split(" ", 1)[0] in ("is", "lacks", "has", "holds", "cannot")  # "x.parquet is not ..."
        super().__init__(f"{path}{' ' if verb else ': '}{what}")


# A column's kind: the Arrow types that hold it.
_FLOAT, _INT, _BOOL, _TEXT = "float64", "int64", "bool", "text"
_CATEGORY_KINDS = {"float64": _FLOAT, "int64": _INT, "bool": _BOOL, "uint8": _INT, "str": _TEXT}

OPTIONAL: dict[str, frozenset[str]] = {
    "vehicles": frozenset({"t_s", "est_x", "est_y", "est_yaw", "est_v", "est_a", "est_yaw_rate", "est_steer",
                           "cmd_speed", "cmd_accel", "cmd_steer", "cmd_yaw_rate", "pred_age_s", "desired_gap_m",
                           "pred_x", "pred_y", "pred_v", "degraded", "range_m"}),
    "v2x": frozenset({"message"}),  # runs from before platooning messages
    "traffic": frozenset({"sumo_id"}),
}
"""Declared columns a run directory may lack (written by later versions only)."""


@cache
def expected_columns(name: str) -> dict[str, tuple[str, bool]] | None:
    """``{column: (kind, finite)}`` of ``trace/<name>.parquet``, or None for a trace the metrics do not read."""
    if name == "vehicles":
        from ..recording.recorder import COLUMNS

        columns = {"t_ns": (_INT, False), "robot": (_INT, False), "t_s": (_FLOAT, False)}
        # the true state is finite in every row; the rest is NaN where a robot has none (no law, no estimate)
        columns.update({col: (_FLOAT, port == "state" and field in STATE_FIELDS) for col, port, field in COLUMNS})
        return columns
    spec = _port_specs().get(name)
    if spec is None:
        return None
    columns = {}
    if spec.index == "robot":
        columns.update({"t_ns": (_INT, False), "robot": (_INT, False)})
    elif spec.field("t_ns") is None:
        columns["t_ns"] = (_INT, False)
    for field in spec.fields:
        kind = _TEXT if field.categories else _CATEGORY_KINDS[field.dtype]
        columns[field.name] = (kind, field.finite)
    return columns


@cache
def _port_specs() -> dict[str, PortSpec]:
    from core.ports import port

    specs = {spec.name: spec for spec in BUILTIN_PORTS}
    specs["cam_rx"] = next(s for s in BUILTIN_PORTS if s.name == "cam_rx")  # the platooning fields are extra
    # SUMO's traffic events (federates/sumo): the columns the metrics read, without importing the federate
    specs["traffic"] = port("traffic", {"t_ns": ("int64", "ns"), "robot": ("int64", "robot id"),
                                        "event": ("str", "-"), "sumo_id": ("str", "-")}, index="event")
    return specs


def _kind_of(arrow_type: pa.DataType) -> str | None:
    if pa.types.is_dictionary(arrow_type):
        return _TEXT if pa.types.is_string(arrow_type.value_type) or pa.types.is_large_string(arrow_type.value_type) \
            else None
    if pa.types.is_float64(arrow_type):
        return _FLOAT
    if pa.types.is_int64(arrow_type):
        return _INT
    if pa.types.is_boolean(arrow_type):
        return _BOOL
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return _TEXT
    return None


def _describe(arrow_type: pa.DataType) -> str:
    return f"dictionary of {arrow_type.value_type}" if pa.types.is_dictionary(arrow_type) else str(arrow_type)


class HeldTrace:
    """A trace just written, still in memory as the table its file holds: read like a ``pq.ParquetFile`` of one
    row group, without decoding the file again (``held``)."""

    num_row_groups = 1

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.schema_arrow = table.schema
        self.metadata = table  # ``metadata.num_rows``, as a ParquetFile's footer

    def read_row_group(self, group: int, columns: list[str] | None = None) -> pa.Table:
        """The whole table (projected to ``columns``): it is the only row group."""
        if group != 0:
            raise IndexError(f"row group {group} of 1")
        return self.table if columns is None else self.table.select(columns)

    def read(self) -> pa.Table:
        """Every row."""
        return self.table


_HELD: dict[Path, HeldTrace] = {}


@contextmanager
def held(tables: Mapping[Path, pa.Table]) -> Iterator[None]:
    """Within the block, ``open_trace`` of one of these paths reads its table from memory instead of the file. For
    traces this process has just written with exactly these tables (a batched point's, ``recording.split``): the
    metrics then read the values the file holds without decoding it again."""
    paths = [Path(path).absolute() for path in tables]
    _HELD.update({path: HeldTrace(table) for path, table in zip(paths, tables.values(), strict=True)})
    try:
        yield
    finally:
        for path in paths:
            _HELD.pop(path, None)


def open_trace(path: Path, name: str | None = None) -> pq.ParquetFile | HeldTrace:
    """``path`` opened as a Parquet file whose schema fits the contract of trace ``name`` (its stem by default);
    raise RunDataError otherwise. A trace ``held`` in memory is read from there."""
    path = Path(path)
    name = name or path.name.removesuffix(".parquet")
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise RunDataError(path, f"cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        raise RunDataError(path, "is not a regular file")
    try:
        parquet = _HELD.get(path.absolute()) if _HELD else None
        parquet = parquet or pq.ParquetFile(path)
        schema = parquet.schema_arrow
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise RunDataError(path, f"is not a readable Parquet file ({_first_line(exc)}); a trace cut short has no "
                                 "footer") from None
    expected = expected_columns(name)
    if expected is None:
        return parquet
    optional = OPTIONAL.get(name, frozenset())
    names = schema.names
    if len(set(names)) != len(names):
        raise RunDataError(path, "has a column twice")
    missing = [col for col in expected if col not in names and col not in optional]
    if missing:
        raise RunDataError(path, f"lacks the column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                                 f"(trace '{name}' has {', '.join(expected)})")
    for col, (kind, _) in expected.items():
        if col not in names:
            continue
        have = schema.field(col).type
        if _kind_of(have) != kind:
            raise RunDataError(path, f"column '{col}' is {_describe(have)}, expected {_KIND_NAMES[kind]}")
    return parquet


_KIND_NAMES = {_FLOAT: "double (float64)", _INT: "int64", _BOOL: "bool", _TEXT: "string (or a dictionary of strings)"}


def read_group(parquet: pq.ParquetFile | HeldTrace, path: Path, group: int,
               columns: list[str] | None = None) -> pa.Table:
    """One row group of an opened trace; a damaged one (bad pages, bad compression) is a RunDataError."""
    try:
        return parquet.read_row_group(group, columns=columns)
    except (pa.ArrowException, OSError, ValueError, IndexError) as exc:
        raise RunDataError(path, f"row group {group} cannot be read ({_first_line(exc)})") from None


def read_whole(path: Path, name: str | None = None) -> pa.Table:
    """Every row of a trace, schema checked, values checked (``check_values``)."""
    parquet = open_trace(path, name)
    try:
        table = parquet.read()
    except (pa.ArrowException, OSError, ValueError, IndexError) as exc:
        raise RunDataError(path, f"cannot be read ({_first_line(exc)})") from None
    check_values(path, {col: table.column(col) for col in table.column_names}, name)
    return table


def check_values(path: Path, columns: Mapping[str, Any], name: str | None = None, row0: int = 0) -> None:
    """No NaN or infinity in a ``finite`` column, no null anywhere (``coopsim run`` writes none)."""
    expected = expected_columns(name or Path(path).name.removesuffix(".parquet")) or {}
    for col, values in columns.items():
        if isinstance(values, pa.ChunkedArray | pa.Array) and values.null_count:
            raise RunDataError(path, f"column '{col}' has {values.null_count} missing (null) values")
        if expected.get(col, (None, False))[1]:
            array = values.to_numpy() if isinstance(values, pa.ChunkedArray | pa.Array) else np.asarray(values)
            bad = ~np.isfinite(array)
            if bad.any():
                row = row0 + int(np.argmax(bad))
                raise RunDataError(path, f"column '{col}' has NaN or infinite values (first at row {row}), which "
                                         "its port contract forbids")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
