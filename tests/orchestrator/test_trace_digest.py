"""The run digest hashed from tables in memory (a batched point's) is the digest of the files written from them, and
both follow the documented layout: per trace and column in name order, the column's name, then its values' bytes
(strings as UTF-8 joined with 0x1f across row groups)."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from orchestrator.metrics import file_digest
from orchestrator.metrics.rundata import tables_digest
from orchestrator.recording.trace_schema import HeldTrace, held, open_trace, read_group


def _table() -> pa.Table:
    event = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int8()), pa.array(["tx", "rx"]))
    return pa.table({"t_ns": pa.array([10, 20, 30], pa.int64()), "event": event,
                     "note": pa.array(["a", "bé", ""], pa.string())})


def _expected() -> str:
    h = hashlib.sha256()
    h.update(b"v2x.event" + b"tx\x1frx" + b"\x1ftx")  # two row groups: rows 0-1, then row 2
    h.update(b"v2x.note" + "a\x1fbé".encode() + b"\x1f")  # the last value is the empty string
    h.update(b"v2x.t_ns" + np.array([10, 20, 30], np.int64).tobytes())
    return h.hexdigest()


def test_digest_of_files_and_of_tables_in_memory_is_the_documented_hash(tmp_path):
    table = _table()
    (tmp_path / "trace").mkdir()
    pq.write_table(table, tmp_path / "trace" / "v2x.parquet", row_group_size=2)
    assert pq.ParquetFile(tmp_path / "trace" / "v2x.parquet").num_row_groups == 2
    assert file_digest(tmp_path, ["v2x"]) == _expected()
    assert tables_digest({"v2x": table}) == _expected()
    # a null string hashes as "None" on both paths (the Python fallback)
    nulls = table.set_column(2, "note", pa.array(["a", None, "c"], pa.string()))
    pq.write_table(nulls, tmp_path / "trace" / "v2x.parquet")
    assert file_digest(tmp_path, ["v2x"]) == tables_digest({"v2x": nulls}) != _expected()
    h = hashlib.sha256(b"v2x.event" + b"tx\x1frx\x1ftx" + b"v2x.note" + b"a\x1fNone\x1fc" + b"v2x.t_ns"
                       + np.array([10, 20, 30], np.int64).tobytes())
    assert tables_digest({"v2x": nulls}) == h.hexdigest()


def test_held_traces_are_read_from_memory_only_within_the_block(tmp_path):
    path = tmp_path / "trace" / "collisions.parquet"
    path.parent.mkdir()
    on_disk = pa.table({"t_ns": pa.array([5], pa.int64()), "a": pa.array([1], pa.int64()),
                        "b": pa.array([2], pa.int64())})
    pq.write_table(on_disk, path)
    in_memory = on_disk.set_column(0, "t_ns", pa.array([7], pa.int64()))  # tells the two sources apart
    with held({path: in_memory}):
        parquet = open_trace(path)
        assert isinstance(parquet, HeldTrace) and parquet.metadata.num_rows == 1
        assert read_group(parquet, path, 0, ["b", "t_ns"]).to_pydict() == {"b": [2], "t_ns": [7]}
    assert open_trace(path).read().column("t_ns").to_pylist() == [5]
