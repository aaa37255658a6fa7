"""A run directory given to ``coopsim metrics`` (or ``mcap``, ``compare``) is untrusted input.

- Links are never followed for writing: a ``plots`` link to another directory, a ``report.html`` or
  ``metrics.json`` link to another file are refused with exit 2, and nothing outside the directory changes.
- A damaged directory (a trace cut short, a column of the wrong type or missing, NaN where the port contract
  forbids it, something else behind a trace's name, a broken ``run.json`` ...) is exit 2 naming the file and what
  is wrong, never a traceback.
- A fuzz: mutated copies of one small real run directory through ``orchestrator.cli.main.main`` end in exit 0 or 2
  (1 only for ``--check`` finding a difference), without a traceback. By default a fixed subset of the cases runs;
  ``COOPSIM_FULL_FUZZ=1`` (set by ``make test``) runs all 2,000.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import shutil
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from orchestrator.cli.main import main
from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario

REPO = Path(__file__).resolve().parents[2]
PLATOON = (REPO / "scenarios" / "platoon.yaml").read_text()
SMALL = ["duration_s=2", "vehicles.count=3", "platoon.size=3", "channel.type=itsg5"]
FUZZ_CASES = 2000 if os.environ.get("COOPSIM_FULL_FUZZ") == "1" else 100
FUZZ_SEED = 20240623


@pytest.fixture(scope="session")
def base_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small real run directory (3 robots, 2 s, ITS-G5: vehicles, v2x, channel load, range, collisions and CAM
    trigger traces, a report with its plots)."""
    out = tmp_path_factory.mktemp("base") / "run"
    result = run_scenario(parse_scenario(PLATOON, overrides=SMALL), out)
    assert result.ok
    return out


def metrics_cli(*args: str) -> tuple[object, str, str]:
    """``coopsim metrics ...`` in process, as the console script runs it (warnings printed, not raised)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("default")
        try:
            code: object = main(["metrics", *args])
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def _copy(base: Path, dest: Path) -> Path:
    shutil.copytree(base, dest, symlinks=True)
    return dest


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


# -- links ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("link", ["plots", "report.html", "metrics.json", "plots/speeds.png"])
def test_metrics_never_writes_through_a_link(base_run: Path, tmp_path: Path, link: str) -> None:
    run = _copy(base_run, tmp_path / "run")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    target = outside if link == "plots" else outside / "precious.txt"
    victim = run / link
    shutil.rmtree(victim) if victim.is_dir() else victim.unlink()
    victim.symlink_to(target)
    before = _snapshot(outside)
    code, _, err = metrics_cli(str(run))
    assert code == 2, err
    assert f"{victim} is a symbolic link" in err and "Traceback" not in err
    assert _snapshot(outside) == before  # nothing written there, nothing replaced
    assert victim.is_symlink()


def test_metrics_without_the_report_only_cares_about_metrics_json(base_run: Path, tmp_path: Path) -> None:
    run = _copy(base_run, tmp_path / "run")
    shutil.rmtree(run / "plots")
    (run / "plots").symlink_to(tmp_path)
    code, _, err = metrics_cli(str(run), "--no-report")
    assert code == 0, err


def test_mcap_refuses_a_linked_output(base_run: Path, tmp_path: Path) -> None:
    pytest.importorskip("mcap")
    run = _copy(base_run, tmp_path / "run")
    (tmp_path / "precious.txt").write_text("keep me")
    (run / "run.mcap").symlink_to(tmp_path / "precious.txt")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["mcap", str(run)])
    assert code == 2 and "is a symbolic link" in err.getvalue(), err.getvalue()
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_compare_refuses_a_linked_plots_directory(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "plots").symlink_to(elsewhere)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["compare", "scenarios/platoon.yaml", "--channels", "ideal", "--out", str(out), "--quiet",
                     "--jobs", "1", *(f"--set={s}" for s in SMALL[:3])])
    assert code == 2 and f"{out / 'plots'} is a symbolic link" in err.getvalue(), err.getvalue()
    assert not any(elsewhere.iterdir())


# -- damaged run directories --------------------------------------------------------------------------------------
def _rewrite(path: Path, change) -> None:
    table = pq.read_table(path)
    pq.write_table(change(table), path)


def _set_column(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, values)


def _nan_in(table: pa.Table, name: str) -> pa.Table:
    values = table.column(name).to_numpy().copy()
    values[len(values) // 2] = np.nan
    return _set_column(table, name, pa.array(values))


DAMAGES = {
    "truncated vehicles": ("trace/vehicles.parquet", lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
                           "not a readable Parquet file"),
    "truncated v2x": ("trace/v2x.parquet", lambda p: p.write_bytes(p.read_bytes()[:-9]), "not a readable Parquet"),
    "empty vehicles": ("trace/vehicles.parquet", lambda p: p.write_bytes(b""), "not a readable Parquet file"),
    "text behind a trace": ("trace/collisions.parquet", lambda p: p.write_text("a,b\n1,2\n"),
                            "not a readable Parquet file"),
    "vehicles x as text": ("trace/vehicles.parquet", lambda p: _rewrite(p, lambda t: _set_column(
        t, "x", pa.array(t.column("x").to_numpy().astype(str)))), "column 'x' is string, expected double"),
    "robot as float": ("trace/vehicles.parquet", lambda p: _rewrite(p, lambda t: _set_column(
        t, "robot", pa.array(t.column("robot").to_numpy().astype(float)))), "column 'robot' is double, expected int64"),
    "v2x latency as int": ("trace/v2x.parquet", lambda p: _rewrite(p, lambda t: _set_column(
        t, "latency_s", pa.array(np.zeros(t.num_rows, np.int64)))), "column 'latency_s' is int64"),
    "missing column": ("trace/vehicles.parquet", lambda p: _rewrite(p, lambda t: t.drop_columns(["yaw"])),
                       "lacks the column yaw"),
    "missing v2x column": ("trace/v2x.parquet", lambda p: _rewrite(p, lambda t: t.drop_columns(["outcome"])),
                           "lacks the column outcome"),
    "NaN in x": ("trace/vehicles.parquet", lambda p: _rewrite(p, lambda t: _nan_in(t, "x")),
                 "column 'x' has NaN or infinite values"),
    "time goes back": ("trace/vehicles.parquet", lambda p: _rewrite(p, lambda t: t.take(
        pa.array(np.arange(t.num_rows)[::-1]))), "goes back in time"),
    "run.json broken": ("run.json", lambda p: p.write_text('{"scenario": "platoon", '), "is not valid JSON"),
    "run.json a list": ("run.json", lambda p: p.write_text("[1, 2]"), "holds a JSON list"),
    "run.json notes": ("run.json", lambda p: p.write_text('{"notes": 5}'), "'notes' is 5"),
    "a directory behind a trace": ("trace/range.parquet", lambda p: (p.unlink(), p.mkdir()), "not a regular file"),
    "a FIFO behind a trace": ("trace/channel_load.parquet", lambda p: (p.unlink(), os.mkfifo(p)),
                              "not a regular file"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_run_directory_is_bad_input_naming_the_file(base_run: Path, tmp_path: Path, damage: str) -> None:
    run = _copy(base_run, tmp_path / "run")
    name, change, message = DAMAGES[damage]
    change(run / name)
    code, _, err = metrics_cli(str(run))
    assert code == 2, err
    assert "Traceback" not in err
    assert str(run / name) in err and message in err, err


# -- the fuzz -------------------------------------------------------------------------------------------------------
TRACES = ["vehicles", "v2x", "channel_load", "range", "collisions", "cam_triggers"]
JUNK = [b"", b"PAR1", b"PAR1PAR1", b"PAR1" + bytes(range(256)) + b"PAR1", b"\x89PNG\r\n\x1a\n", b"not parquet\n",
        b"\x00" * 4096]
RUN_JSON = [b"", b"{", b"[]", b"null", b"3", b'"x"', b'{"notes": 5}', b'{"notes": [1]}', b'{"outcomes": []}',
            b'{"outcomes": {"first_contact": {"robots": ["a"]}}}', b'{"outcomes": {"silent_stations": "x"}}',
            b'{"sim_time_s": "long"}', b'{"seed": true}', b"[" * 100_000, b"\xff\xfe", b'{"a": 1e999}',
            b'{"status": null, "digest": 7}', b'{"controllers": "ela"}', b'{"real_time_factor": "fast"}']
ODD_VALUES = [np.nan, np.inf, -np.inf, 1e300, -1e300, 0.0, -0.0, 1e-300]


def _mutate_table(table: pa.Table, rng: random.Random) -> pa.Table:
    names = table.column_names
    col = rng.choice(names)
    kind = rng.choice(["drop", "cast", "odd", "shuffle", "reverse", "duplicate", "empty", "head", "ids", "nulls",
                       "rename", "extra", "int_odd"])
    n = table.num_rows
    if kind == "drop":
        return table.drop_columns([col])
    if kind == "cast":
        target = rng.choice([pa.string(), pa.float32(), pa.int32(), pa.float64(), pa.int64(), pa.bool_()])
        try:
            values = table.column(col).cast(target, safe=False)
        except (pa.ArrowException, ValueError):
            values = pa.array([str(v) for v in table.column(col).to_pylist()])
        return _set_column(table, col, values)
    if kind == "odd" and n:
        float_cols = [c for c in names if pa.types.is_floating(table.schema.field(c).type)]
        if float_cols:
            col = rng.choice(float_cols)
            values = table.column(col).to_numpy().copy()
            for _ in range(rng.randint(1, 5)):
                values[rng.randrange(n)] = rng.choice(ODD_VALUES)
            return _set_column(table, col, pa.array(values))
    if kind == "int_odd" and n:
        int_cols = [c for c in names if pa.types.is_integer(table.schema.field(c).type)]
        if int_cols:
            col = rng.choice(int_cols)
            values = table.column(col).to_numpy().copy()
            for _ in range(rng.randint(1, 5)):
                values[rng.randrange(n)] = rng.choice([-1, 0, 2**62, -(2**62), 99, 2**31])
            return _set_column(table, col, pa.array(values))
    if kind == "shuffle" and n:
        order = list(range(n))
        rng.shuffle(order)
        return table.take(pa.array(order))
    if kind == "reverse":
        return table.take(pa.array(np.arange(n)[::-1]))
    if kind == "duplicate":
        return pa.concat_tables([table, table])
    if kind == "empty":
        return table.slice(0, 0)
    if kind == "head":
        return table.slice(0, rng.randint(0, max(n - 1, 0)))
    if kind == "ids" and "robot" in names:
        values = table.column("robot").to_numpy().copy()
        if n:
            values[rng.randrange(n)] = rng.choice([7, 12345, -5, 0])
        return _set_column(table, "robot", pa.array(values))
    if kind == "nulls" and n:
        values = table.column(col).to_pylist()
        values[rng.randrange(n)] = None
        return _set_column(table, col, pa.array(values, type=table.schema.field(col).type))
    if kind == "rename":
        return table.rename_columns([c if c != col else col + "_x" for c in names])
    if kind == "extra":
        return table.append_column("extra", pa.array(np.arange(n, dtype=np.float64)))
    return table.slice(0, max(n // 2, 0))


def _mutate(run: Path, rng: random.Random) -> str:
    """One mutation of ``run``; returns what it did."""
    what = rng.choice(["trace_bytes", "trace_table", "trace_table", "trace_table", "trace_junk", "trace_gone",
                       "run_json", "scenario", "metrics_json", "odd_entry"])
    trace = run / "trace" / f"{rng.choice(TRACES)}.parquet"
    if what == "trace_bytes" and trace.is_file():
        data = bytearray(trace.read_bytes())
        if rng.random() < 0.5:
            data = data[: rng.randrange(len(data) + 1)]
        else:
            for _ in range(rng.randint(1, 8)):
                if data:
                    data[rng.randrange(len(data))] = rng.randrange(256)
        trace.write_bytes(bytes(data))
    elif what == "trace_table" and trace.is_file():
        try:  # an earlier mutation of this case may have damaged it already
            pq.write_table(_mutate_table(pq.read_table(trace), rng), trace)
        except (pa.ArrowException, ValueError, OSError):
            return "trace_table (not readable or not writable)"
    elif what == "trace_junk":
        trace.write_bytes(rng.choice(JUNK))
    elif what == "trace_gone":
        trace.unlink(missing_ok=True)
    elif what == "run_json":
        if rng.random() < 0.3:
            data = bytearray((run / "run.json").read_bytes())
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            (run / "run.json").write_bytes(bytes(data))
        else:
            (run / "run.json").write_bytes(rng.choice(RUN_JSON))
    elif what == "scenario":
        path = run / "scenario.resolved.yaml"
        data = bytearray(path.read_bytes())
        if rng.random() < 0.5:
            data = data[: rng.randrange(len(data) + 1)]
        else:
            data[rng.randrange(len(data))] = rng.randrange(256)
        path.write_bytes(bytes(data))
    elif what == "metrics_json":
        (run / "metrics.json").write_bytes(rng.choice([b"", b"{}", (run / "metrics.json").read_bytes()[:-3]]))
    elif what == "odd_entry":
        target = rng.choice([trace, run / "run.json", run / "scenario.resolved.yaml"])
        if target.is_file():
            target.unlink()
            rng.choice([target.mkdir, lambda: os.mkfifo(target), lambda: target.symlink_to("/dev/null"),
                        lambda: target.symlink_to(run / "nowhere")])()
    return what


def test_fuzz_metrics_on_mutated_run_directories(base_run: Path, tmp_path: Path) -> None:
    rng = random.Random(FUZZ_SEED)
    outcomes: Counter[int] = Counter()
    for case in range(FUZZ_CASES):
        run = _copy(base_run, tmp_path / f"case{case}")
        done = []
        for _ in range(rng.choice([1, 1, 1, 2])):
            try:
                done.append(_mutate(run, rng))
            except OSError:  # an earlier mutation of this case put a directory or a FIFO there
                done.append("(not applicable)")
        roll = rng.random()
        args = ["--check"] if roll < 0.1 else [] if roll < 0.11 else ["--no-report"]
        code, _, err = metrics_cli(str(run), *args)
        assert "Traceback" not in err, (case, done, err)
        allowed = {0, 1, 2} if args == ["--check"] else {0, 2}
        assert code in allowed, (case, done, code, err)
        if code == 2:
            assert str(run) in err, (case, done, err)  # the message names the file
        outcomes[code] += 1
        shutil.rmtree(run)
    assert outcomes[2] >= FUZZ_CASES // 3, outcomes  # the mutations do damage
    assert outcomes[0] >= FUZZ_CASES // 20, outcomes  # and some leave a run that reads back
