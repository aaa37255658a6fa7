"""Sweeps and comparisons on a Dask cluster: a real ``dask scheduler`` and two ``dask worker`` processes on
loopback, started here and stopped by pid. The cluster must give what local processes give, retry a failing point
once, and keep what finished when the batch is interrupted."""

from __future__ import annotations

import argparse
import io
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from orchestrator.batch.cli import add_sweep_parser, run_sweep_command
from orchestrator.batch.compare import compare
from orchestrator.batch.dask_runner import ClusterError
from orchestrator.batch.runner import Task, execute
from orchestrator.scenario import parse_scenario
from tests.orchestrator.processes import free_port, stop

pytestmark = pytest.mark.external  # needs a service or tool beside Python (pyproject.toml's markers; README "Tests")

REPO = Path(__file__).resolve().parents[2]
PLATOON = REPO / "scenarios" / "platoon.yaml"
QUIET = ["--set", "duration_s=3", "--set", "outputs.plots=false", "--set", "outputs.report=false"]
GRID = ["--param", "controller.time_gap_s=0.8,1.0,1.2,1.4"]


def _dask(*args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("dask")), *args]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A scheduler on 127.0.0.1 (a free port, no dashboard) and two single-threaded workers; its address."""
    yield from start_cluster(tmp_path_factory.mktemp("dask"))


def start_cluster(logs: Path) -> Iterator[str]:
    """Start ``dask scheduler`` and two ``dask worker`` processes, yield the address, stop them by pid."""
    from distributed import Client

    logs.mkdir(parents=True, exist_ok=True)
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # the workers import the test plug-ins
    procs: list[subprocess.Popen] = []

    def start(name: str, argv: list[str]) -> None:
        with (logs / f"{name}.log").open("w") as log:
            procs.append(subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT))

    try:
        start("scheduler", _dask("scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"))
        for k in range(2):
            start(f"worker{k}", _dask("worker", address, "--host", "127.0.0.1", "--nthreads", "1", "--no-nanny",
                                      "--no-dashboard", "--memory-limit", "0", "--name", f"w{k}"))
        deadline = time.monotonic() + 60
        while True:  # the scheduler may not listen yet
            try:
                with Client(address, timeout=5) as client:
                    client.wait_for_workers(2, timeout=60)
                break
            except (OSError, TimeoutError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        yield address
    finally:
        for proc in reversed(procs):  # workers first, then the scheduler
            stop(proc)
    assert all(p.poll() is not None for p in procs)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``coopsim sweep`` in this process; its exit code, summary and progress (stderr)."""
    parser = argparse.ArgumentParser()
    add_sweep_parser(parser.add_subparsers(dest="command"))
    out = io.StringIO()
    capsys.readouterr()
    code = run_sweep_command(parser.parse_args(["sweep", *argv]), Console(file=out, width=200))
    return code, out.getvalue(), capsys.readouterr().err


HOW_IT_RAN = {"wall_time_s", "batched", "batching"}
"""sweep.json's keys that say how the sweep ran (wall-clock times, the batched world that carried a run, how many
points ran batched or alone): the only values a cluster, which runs every point alone, may change."""


def without_wall_times(value: Any) -> Any:
    """sweep.json without the keys that say how it ran (``HOW_IT_RAN``): the points, runs, digests and metrics."""
    if isinstance(value, dict):
        return {k: without_wall_times(v) for k, v in value.items() if k not in HOW_IT_RAN}
    if isinstance(value, list):
        return [without_wall_times(v) for v in value]
    return value


def test_a_sweep_on_the_cluster_equals_the_local_one(tmp_path, cluster, capsys):
    code, _, _ = cli(capsys, str(PLATOON), *GRID, *QUIET, "--jobs", "2", "--quiet", "--out", str(tmp_path / "local"))
    assert code == 0
    code, _, _ = cli(capsys, str(PLATOON), *GRID, *QUIET, "--scheduler", cluster, "--quiet",
                     "--out", str(tmp_path / "dask"))
    assert code == 0
    local = json.loads((tmp_path / "local" / "sweep.json").read_text())
    remote = json.loads((tmp_path / "dask" / "sweep.json").read_text())
    digests = [[r["digest"] for r in p["runs"]] for p in local["points"]]
    assert len(digests) == 4 and all(len(d) == 1 and len(d[0]) == 64 for d in digests)
    assert len({d[0] for d in digests}) == 4  # four different points, four different traces
    assert [[r["digest"] for r in p["runs"]] for p in remote["points"]] == digests
    # the local points ran as copies in one world, the cluster's each alone: the same digests and metrics
    assert local["batching"]["batched_runs"] == 4 and remote["batching"]["batched_runs"] == 0
    assert without_wall_times(remote) == without_wall_times(local)
    # every run directory came back from the workers with the same files
    for point in local["points"]:
        here = sorted(p.relative_to(tmp_path / "local").as_posix() for p in (tmp_path / "local" / point["dir"])
                      .rglob("*") if p.is_file())
        there = sorted(p.relative_to(tmp_path / "dask").as_posix() for p in (tmp_path / "dask" / point["dir"])
                       .rglob("*") if p.is_file())
        assert here == there and any(f.endswith("trace/vehicles.parquet") for f in here)
    assert not (tmp_path / "dask" / "sweep.partial.json").exists()


def flaky(marker: Path) -> list[str]:
    entry = {"name": "flaky", "type": "tests.orchestrator.flaky_plugins:Flaky", "params": {"marker": str(marker)}}
    return ["--set", f"federates={json.dumps([entry])}", "--param", "federates[0].params.mode=ok,once,always"]


def test_a_failing_point_is_retried_once_then_reported_and_the_others_complete(tmp_path, cluster, capsys):
    code, _, err = cli(capsys, str(PLATOON), *QUIET, *flaky(tmp_path / "marker"), "--scheduler", cluster,
                         "--out", str(tmp_path / "dask"))
    assert code == 1  # a point failed
    result = json.loads((tmp_path / "dask" / "sweep.json").read_text())
    runs = {p["params"]["federates[0].params.mode"]: p["runs"][0] for p in result["points"]}
    assert runs["ok"]["status"] == "ok" and "attempts" not in runs["ok"]
    # failed on its first attempt (the marker says so), succeeded on the second
    assert (tmp_path / "marker").read_text() == "failed once"
    assert runs["once"]["status"] == "ok" and runs["once"]["attempts"] == 2
    assert runs["always"]["status"] == "failed" and runs["always"]["attempts"] == 2
    assert runs["always"]["error"]["federate"] == "flaky"
    assert "flaky federate failed (always)" in runs["always"]["error"]["message"]
    # the point that recovered gives the trace of a run that never failed
    assert runs["once"]["digest"] == runs["ok"]["digest"]
    assert "retrying point 1" in err and "retrying point 2" in err and "[3/3]" in err
    assert (tmp_path / "dask" / "mode=always" / "trace" / "vehicles.parquet").is_file()  # kept up to the failure


def tasks_of(tmp_path: Path, n: int) -> list[Task]:
    text = PLATOON.read_text()
    out = []
    for i in range(n):
        sc = parse_scenario(text, str(PLATOON), [*QUIET[1::2], f"controller.time_gap_s={0.8 + 0.2 * i}"])
        out.append(Task(i, 0, sc, tmp_path / f"p{i}", sc.seed, str(PLATOON)))
    return out


@pytest.mark.parametrize("where", ["local", "dask"])
def test_an_interrupt_keeps_the_finished_runs_and_writes_a_partial_record(tmp_path, cluster, where):
    """Ctrl-C after the first run ends (raised from the progress callback, where a real one would land): the
    finished run keeps its directory, the partial record names it, and the interrupt goes on."""
    seen: list[dict] = []

    def on_done(record: dict) -> None:
        seen.append(record)
        raise KeyboardInterrupt

    partial = tmp_path / "sweep.partial.json"
    with pytest.raises(KeyboardInterrupt):
        execute(tasks_of(tmp_path, 4), 2, on_done, scheduler=cluster if where == "dask" else None, partial=partial)
    record = json.loads(partial.read_text())
    assert record["interrupted"] is True and record["total"] == 4 and len(record["finished"]) == 1
    first = record["finished"][0]
    assert first["status"] == "ok" and first["dir"] == f"p{first['point']}" == Path(seen[0]["dir"]).name
    assert (tmp_path / first["dir"] / "run.json").is_file()
    assert json.loads((tmp_path / first["dir"] / "run.json").read_text())["digest"] == first["digest"]


def test_compare_runs_on_the_cluster_with_the_local_digests(tmp_path, cluster):
    common = {"overrides": QUIET[1::2], "source": str(PLATOON)}
    local = compare(PLATOON, "channel", ["ideal", "itsg5"], tmp_path / "local", jobs=2, **common)
    remote = compare(PLATOON, "channel", ["ideal", "itsg5"], tmp_path / "dask", scheduler=cluster, **common)
    assert remote["ok"] and local["ok"]
    digests = {name: r["run"]["digest"] for name, r in local["runs"].items()}
    assert {name: r["run"]["digest"] for name, r in remote["runs"].items()} == digests
    assert digests["ideal"] != digests["itsg5"]
    assert remote["summary"] == local["summary"]


def test_a_scheduler_that_does_not_answer_is_a_clear_error_before_any_run(tmp_path, capsys):
    code, _, err = cli(capsys, str(PLATOON), *GRID, *QUIET, "--scheduler", f"tcp://127.0.0.1:{free_port()}",
                       "--out", str(tmp_path / "x"))
    assert code == 2 and "--scheduler tcp://127.0.0.1:" in err and "no Dask scheduler answers" in err
    assert not list((tmp_path / "x").glob("*/run.json"))
    with pytest.raises(ClusterError, match="tcp://host:8786"):
        execute(tasks_of(tmp_path, 1), scheduler="127.0.0.1:8786")


@pytest.mark.parametrize("how", [["--jobs", "1"], ["--jobs", "2"], ["--scheduler", "CLUSTER"]])
def test_ctrl_c_on_the_command_keeps_what_finished(tmp_path, cluster, how):
    """A real Ctrl-C (SIGINT to the command's process group, as a terminal sends it) once the first run has
    ended: exit code 130, no sweep.json, and sweep.partial.json naming the finished runs, whose directories are
    complete."""
    how = [cluster if a == "CLUSTER" else a for a in how]
    out = tmp_path / "out"
    slow = [{"name": "slow", "type": "tests.orchestrator.flaky_plugins:Slow", "params": {"delay_s": 0.05}}]
    argv = [sys.executable, "-m", "orchestrator.cli", "sweep", str(PLATOON), "--param",
            "controller.time_gap_s=0.6,0.8,1.0,1.2,1.4,1.6", "--set", "duration_s=4", *QUIET[2:], *how,
            "--set", f"federates={json.dumps(slow)}", "--out", str(out)]  # each run lasts about 2 s
    proc = subprocess.Popen(argv, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            # a terminal's Ctrl-C reaches a command whose SIGINT is not ignored; a test run started
                            # in the background of a shell inherits SIG_IGN, so give the command the default back
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True)
    reader.start()  # every line as it comes (select on a buffered pipe would lag behind the lines)
    seen: list[str] = []
    try:
        # interrupt once the command has *recorded* a finished run (its progress line), not merely once a worker
        # wrote run.json: the result may still be on its way back to the command then
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                continue
            if re.search(r"\[\d+/6\] .*: ok", seen[-1]):
                break
        assert proc.poll() is None, "the sweep ended before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=120)
        reader.join(timeout=30)
        while not lines.empty():
            seen.append(lines.get())
        err = "".join(seen)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert _processes_naming(out) == [], "worker processes outlived the interrupted command"
    assert not (out / "sweep.json").exists()
    record = json.loads((out / "sweep.partial.json").read_text())
    assert record["interrupted"] and record["total"] == 6 and 1 <= len(record["finished"]) < 6
    ok = [r for r in record["finished"] if r["status"] == "ok"]
    assert ok
    for r in ok:
        info = json.loads((out / r["dir"] / "run.json").read_text())
        assert info["digest"] == r["digest"] and info["sim_time_s"] == 4.0


def _processes_naming(path: Path) -> list[int]:
    """Pids of live processes whose command line names ``path`` (the command's pool workers carry its argv)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(path).encode() in cmdline.read_bytes():  # a zombie's command line is empty
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def test_compare_takes_the_scheduler_option_on_the_command_line(tmp_path, cluster):
    base = [sys.executable, "-m", "orchestrator.cli", "compare", str(PLATOON), "--channels", "ideal,itsg5", *QUIET]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    bad = subprocess.run([*base, "--scheduler", "localhost", "--out", str(tmp_path / "bad")], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "--scheduler must be 'local' or an address like tcp://host:8786" in bad.stderr
    assert "Traceback" not in bad.stderr
    good = subprocess.run([*base, "--scheduler", cluster, "--out", str(tmp_path / "good")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert good.returncode == 0, good.stderr
    result = json.loads((tmp_path / "good" / "comparison.json").read_text())
    assert result["ok"] and sorted(result["runs"]) == ["ideal", "itsg5"]
    assert "Dask scheduler tcp://127.0.0.1:" in good.stderr and "2 workers, 2 threads" in good.stderr


def test_with_a_shared_dir_workers_write_in_place_with_the_same_results(tmp_path, cluster, capsys):
    code, _, _ = cli(capsys, str(PLATOON), *GRID, *QUIET, "--jobs", "2", "--quiet", "--out", str(tmp_path / "local"))
    assert code == 0
    shared = tmp_path / "shared"
    code, _, err = cli(capsys, str(PLATOON), *GRID, *QUIET, "--scheduler", cluster, "--shared-dir", str(shared),
                       "--out", str(shared / "sweep"))
    assert code == 0, err
    local = json.loads((tmp_path / "local" / "sweep.json").read_text())
    remote = json.loads((shared / "sweep" / "sweep.json").read_text())
    assert without_wall_times(remote) == without_wall_times(local)
    for point in remote["points"]:
        assert (shared / "sweep" / point["dir"] / "trace" / "vehicles.parquet").is_file()
    # --out outside the shared directory, and a shared directory without a cluster, are refused before any run
    code, _, err = cli(capsys, str(PLATOON), *GRID, *QUIET, "--scheduler", cluster, "--shared-dir", str(shared),
                       "--out", str(tmp_path / "elsewhere"))
    assert code == 2 and "is not inside it; put --out in the shared directory" in err
    assert not list((tmp_path / "elsewhere").glob("*/run.json"))
    code, _, err = cli(capsys, str(PLATOON), *GRID, *QUIET, "--shared-dir", str(shared), "--out", str(shared / "x"))
    assert code == 2 and "--shared-dir is for workers elsewhere: it needs --scheduler" in err


def test_a_worker_that_dies_mid_run_loses_no_point(tmp_path_factory, capsys):
    """One of two workers ends its process in the middle of a run (a crash, an out-of-memory kill); the point
    runs again elsewhere and every point completes with the digest of a run that never crashed. The cluster is this
    test's own, since it loses a worker."""
    tmp = tmp_path_factory.mktemp("dying")
    marker = tmp / "killed"
    entry = {"name": "kill", "type": "tests.orchestrator.flaky_plugins:KillProcess", "params": {"marker": str(marker)}}
    # the first point's run ends its worker at t = 1 s; run again, it finds the marker and completes
    argv = [str(PLATOON), "--param", "federates[0].params.kill=true,false", *QUIET,
            "--set", f"federates={json.dumps([entry])}"]
    clusters = start_cluster(tmp / "logs")
    address = next(clusters)
    try:
        code, _, err = cli(capsys, *argv, "--scheduler", address, "--out", str(tmp / "dask"))
    finally:
        clusters.close()  # stops the scheduler and the surviving worker
    assert marker.is_file(), "no worker was killed"
    assert code == 0, err
    result = json.loads((tmp / "dask" / "sweep.json").read_text())
    assert [p["status"] for p in result["points"]] == ["ok", "ok"]
    # the reference in this process: the marker stays, so nothing is killed here
    code, _, _ = cli(capsys, *argv, "--jobs", "1", "--quiet", "--out", str(tmp / "local"))
    assert code == 0
    local = json.loads((tmp / "local" / "sweep.json").read_text())
    assert without_wall_times(result) == without_wall_times(local)
