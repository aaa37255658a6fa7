"""Faults inside the process: a hung plug-in, broken outputs, a plug-in writing into its inputs, an output directory
that cannot be written, a disk that fills up. Each stops the run naming who and when, with the traces kept."""

from __future__ import annotations

import errno
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator import runner
from orchestrator.metrics import read_traces
from orchestrator.recording.recorder import VehicleRecorder
from orchestrator.runner import run_scenario
from orchestrator.scenario import ScenarioError, parse_scenario

REPO = Path(__file__).resolve().parents[2]
PLATOON = (REPO / "scenarios" / "platoon.yaml").read_text()
QUIET = ["outputs.plots=false", "outputs.report=false", "duration_s=3"]


def _with(kind: str, **params) -> list[str]:
    entry = {"name": "bad", "type": f"tests.orchestrator.fault_plugins:{kind}", "params": params}
    return [*QUIET, f"federates={[entry]}".replace("'", '"')]


def _readable(run_dir: Path) -> dict[str, int]:
    return {p.name: pq.read_table(p).num_rows for p in sorted((run_dir / "trace").glob("*.parquet"))}


@pytest.mark.parametrize("kind", ["Sleeper", "Spinner"])
@pytest.mark.timeout(180)  # the hang guard: without the watchdog the step sleeps an hour, or spins for ever
def test_a_hung_step_is_stopped_by_the_watchdog_naming_the_federate(tmp_path, kind):
    scenario = parse_scenario(PLATOON, overrides=_with(kind, at_s=0.5))
    result = run_scenario(scenario, tmp_path, step_timeout_s=0.5)
    assert result.error is not None and result.error.federate == "bad"
    assert result.error.t_ns == 500_000_000 and "step_timeout_s = 0.5 s" in str(result.error)
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["status"] == "failed" and info["error"]["federate"] == "bad"
    rows = _readable(tmp_path)
    assert rows["vehicles.parquet"] == 4 * 50  # every instant completed before the hung one: t = 0 .. 0.49 s


@pytest.mark.parametrize(("kind", "message"), [
    ("NotAMapping", "step() returned a list, not a mapping of port -> data"),
    ("NanSpeeds", "field 'v_kmh' has NaN or infinite values"),
    ("ShortRows", "port 'speeds' is robot-indexed but its rows (ids [1, 2, 3]) are not the live robots"),
    ("InputMutator", "read-only"),
])
def test_broken_outputs_and_written_inputs_stop_the_run_naming_the_plugin(tmp_path, kind, message):
    scenario = parse_scenario(PLATOON, overrides=_with(kind, at_s=0.5))
    result = run_scenario(scenario, tmp_path)
    assert result.error is not None and result.error.federate == "bad" and result.error.t_ns == 500_000_000
    assert message in str(result.error)
    vehicles = read_traces(tmp_path, ["vehicles"])["vehicles"]
    assert np.isfinite(vehicles["x"]).all()  # nothing the plug-in did reached the recorded trace


def test_a_plugin_claiming_a_builtin_port_is_bad_input(tmp_path):
    scenario = parse_scenario(PLATOON, overrides=[*QUIET, 'federates=[{"name": "bad", "type": '
                                                  '"tests.orchestrator.fault_plugins:ClaimsState"}]'])
    with pytest.raises(ScenarioError, match="port 'state' is written by both 'physics' and 'bad'"):
        run_scenario(scenario, tmp_path)


@pytest.mark.slow
def test_an_unwritable_output_directory_is_bad_input_before_the_run(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for out in (blocker / "run", Path("/proc/coopsim-run")):
        done = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", "scenarios/platoon.yaml", "--out",
                               str(out), "--quiet"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        assert f"--out: cannot write the run directory {out}" in done.stderr and "Traceback" not in done.stderr


def test_a_full_disk_stops_the_run_and_keeps_what_was_written(tmp_path, monkeypatch):
    """The third row group of any trace fails with ENOSPC (as a full disk does): the run stops with a clear
    message, every trace is readable up to its last complete row group, and run.json says what happened."""
    real = pq.ParquetWriter.write_table
    calls = {"n": 0}

    def write_table(self, table, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] >= 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)
    # row groups of 100 instants, so that groups are written while the run goes
    monkeypatch.setattr(runner, "VehicleRecorder", functools.partial(VehicleRecorder, chunk_rows=4_000))
    overrides = [*QUIET, "duration_s=30", "vehicles.count=40", "platoon.size=8"]
    result = run_scenario(parse_scenario(PLATOON, overrides=overrides), tmp_path)
    assert result.error is not None and result.error.federate == "recorder"
    assert "No space left on device" in str(result.error)
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["status"] == "failed" and "No space left on device" in info["error"]["message"]
    assert info["sim_time_s"] < 30  # stopped early, not simulated into nothing
    rows = _readable(tmp_path)
    assert rows["vehicles.parquet"] == 2 * 4_000  # the two complete groups written before the disk was full


# -- a small file system: the disk really fills up ----------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A factory of tmpfs mounts of a given size under ``tmp_path``, unmounted afterwards (root only)."""
    mounts: list[Path] = []

    def mount(size: str) -> Path:
        where = tmp_path / f"disk{len(mounts)}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a {size} tmpfs here (needs root and mount): {done.stderr.strip()}")
        mounts.append(where)
        return where

    yield mount
    for where in reversed(mounts):
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _cli(*args: str) -> tuple[int, str]:
    import contextlib
    import io

    from orchestrator.cli.main import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(list(args))
    return code, err.getvalue()


def _complete_or_absent(run_dir: Path) -> None:
    """Every trace readable, run.json whole JSON, report.html ending its page: nothing cut short, nothing empty."""
    for trace in (run_dir / "trace").glob("*.parquet"):
        pq.read_table(trace)  # a footer and every row group
    for name in ("run.json", "metrics.json"):
        if (run_dir / name).exists():
            json.loads((run_dir / name).read_text())
    if (run_dir / "report.html").exists():
        assert (run_dir / "report.html").read_text().rstrip().endswith("</html>")
    assert not [p for p in run_dir.rglob("*") if p.is_file() and p.stat().st_size == 0]
    assert not list(run_dir.rglob(".*.part"))  # no temporary file left behind


@pytest.mark.slow
# the whole run directory takes about 2,000 KB (traces 1,190, report 510, plots 280): the disk fills in the traces
# or in the plots and report
@pytest.mark.parametrize("size", ["400k", "1500k"])
def test_a_nearly_full_disk_ends_the_run_with_exit_4_and_complete_files(small_disk, size):
    out = small_disk(size) / "run"
    code, err = _cli("run", str(REPO / "scenarios" / "platoon.yaml"), "--out", str(out), "--quiet")
    assert code == 4, err
    assert "error: the disk is full" in err and "Traceback" not in err
    _complete_or_absent(out)
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "failed" and "No space left on device" in info["error"]["message"]


def test_the_first_failed_write_stops_the_run_at_once(small_disk, monkeypatch):
    """Row groups of 100 instants of 40 robots: the disk fills while the run goes, and the run stops there."""
    monkeypatch.setattr(runner, "VehicleRecorder", functools.partial(VehicleRecorder, chunk_rows=4_000))
    out = small_disk("1m") / "run"
    overrides = [*QUIET, "duration_s=30", "vehicles.count=40", "platoon.size=8"]
    result = run_scenario(parse_scenario(PLATOON, overrides=overrides), out)
    assert result.disk_full and result.error is not None and result.error.federate == "recorder"
    info = json.loads((out / "run.json").read_text())
    # about 11 one-second row groups fit beside the kept reserve: stopped there, not simulated on to 30 s
    assert info["sim_time_s"] < 15
    _complete_or_absent(out)
    assert _readable(out)["vehicles.parquet"] > 0  # the groups written before the disk was full


def test_run_json_that_cannot_be_written_is_said_and_exit_4(tmp_path, monkeypatch):
    real = runner.write_atomic

    def write_atomic(path, data):
        if Path(path).name == "run.json":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(runner, "write_atomic", write_atomic)
    out = tmp_path / "run"
    code, err = _cli("run", str(REPO / "scenarios" / "platoon.yaml"), "--out", str(out), "--quiet",
                     *(f"--set={s}" for s in QUIET))
    assert code == 4, err
    assert f"{out / 'run.json'} could not be written" in err
    assert not (out / "run.json").exists()


@pytest.mark.slow
def test_metrics_on_a_full_disk_leaves_no_file_cut_short(small_disk, tmp_path):
    source = tmp_path / "source"
    run_scenario(parse_scenario(PLATOON, overrides=["duration_s=3"]), source)
    disk = small_disk("1m")
    run = disk / "run"
    shutil.copytree(source, run, ignore=shutil.ignore_patterns("plots", "report.html", "metrics.json", "run.json"))
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    (disk / "filler").write_bytes(b"\0" * (free - 20_000))  # room for metrics.json, not for the report
    code, err = _cli("metrics", str(run))
    assert code == 4, err
    assert "error: the disk is full" in err and "Traceback" not in err
    _complete_or_absent(run)
