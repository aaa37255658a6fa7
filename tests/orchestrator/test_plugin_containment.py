"""A plug-in decides its own outputs and nothing else: it cannot write into what others read (by force either), its
wrong shapes stop at the port boundary, and whatever it raises or calls ends as "federate X failed at t" with
``run.json``, never as the run's exit, a hang or a deaf Ctrl-C (plug-ins in ``hostile_plugins.py``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from orchestrator.metrics import read_traces
from orchestrator.runner import run_scenario
from orchestrator.scenario import parse_scenario

pytestmark = pytest.mark.slow  # each case a run in a process of its own

REPO = Path(__file__).resolve().parents[2]
PLATOON = (REPO / "scenarios" / "platoon.yaml").read_text()
QUIET = ["outputs.plots=false", "outputs.report=false", "duration_s=2"]


def _federate(kind: str, **params) -> str:
    entry = {"name": "bad", "type": f"tests.orchestrator.hostile_plugins:{kind}", "params": params}
    return f"federates={[entry]}".replace("'", '"')


def _run(tmp_path: Path, kind: str, **params):
    scenario = parse_scenario(PLATOON, overrides=[*QUIET, _federate(kind, **params)])
    return run_scenario(scenario, tmp_path)


def _coopsim(out: Path, *sets: str, plots: bool = False, log: Path | None = None) -> subprocess.Popen:
    """``coopsim run`` with ``--set``s; its output in pipes, or in ``log`` (a process the plug-in forks holds what
    it inherits: waiting for the end of a pipe would wait for that process)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    outputs = [] if plots else ["--set", "outputs.plots=false", "--set", "outputs.report=false"]
    sink = subprocess.PIPE if log is None else log.open("w")
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", "scenarios/platoon.yaml", "--out",
                             str(out), "--quiet", *outputs, *(a for s in sets for a in ("--set", s))], cwd=REPO,
                            env=env, stdout=sink, stderr=sink if log is None else subprocess.STDOUT, text=True)


def _finished(proc: subprocess.Popen, timeout: float = 120) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    """Until the plug-in wrote ``path`` (or the run ended without it)."""
    fd = os.pidfd_open(proc.pid)
    try:
        import select

        while not path.exists():
            if select.select([fd], [], [], 0.01)[0]:
                raise AssertionError(f"the run ended before {path.name} appeared: {proc.communicate()}")
    finally:
        os.close(fd)


# -- item 1: read-only inputs that stay read-only ----------------------------------------------------------------
@pytest.mark.parametrize(("kind", "message"), [
    ("Unfreezer", "cannot set WRITEABLE flag to True"),
    ("BaseWriter", "read-only"),
])
def test_a_plugin_cannot_make_its_inputs_writable(tmp_path, kind, message):
    result = _run(tmp_path, kind)
    assert result.error is not None and result.error.federate == "bad" and result.error.t_ns == 500_000_000
    assert message in str(result.error)
    vehicles = read_traces(tmp_path, ["vehicles"])["vehicles"]
    assert np.isfinite(vehicles["x"]).all() and np.abs(vehicles["x"]).max() < 10  # nothing reached the trace
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["status"] == "failed" and info["error"]["federate"] == "bad"


def test_arrays_a_plugin_published_and_kept_cannot_change_the_record(tmp_path):
    result = _run(tmp_path, "Hoarder")
    assert result.ok, result.error
    speeds = pq.read_table(tmp_path / "trace" / "speeds.parquet").column("v_kmh").to_numpy()
    assert len(speeds) == 4 * 41 and np.isfinite(speeds).all()  # it wrote NaN into every array it had published


def test_frozen_inputs_share_one_copy_and_stay_read_only():
    from orchestrator.engine.port_guard import frozen_inputs

    bus_value = {"id": np.arange(3), "x": np.zeros(3)}
    loose = {"names": ["a", "b"]}  # a port declared by name only may carry lists
    cache: dict = {}
    first = frozen_inputs({"state": bus_value, "loose": loose}, cache)
    second = frozen_inputs({"state": bus_value, "loose": loose}, cache)
    assert first["state"]["x"] is second["state"]["x"]  # copied once per published value
    assert first["state"] is not second["state"]  # each reader its own mapping
    first["loose"]["names"].append("c")  # a list is each reader's own copy
    assert loose["names"] == ["a", "b"] and second["loose"]["names"] == ["a", "b"]
    x = first["state"]["x"]
    with pytest.raises(ValueError):
        x.flags.writeable = True
    assert isinstance(x.base, bytes) or not x.base.flags.writeable
    bus_value["x"][0] = 1.0  # a built-in's arrays themselves stay writable (its compiled kernels' fast path)


# -- item 2: shapes at the port boundary --------------------------------------------------------------------------
@pytest.mark.parametrize(("kind", "message"), [
    ("ExtraRows", "port 'speeds' field 'id' has shape (7,), expected (4,)"),
    ("WideField", "port 'speeds' field 'v_kmh' has shape (4, 2), expected (4,)"),
    ("ColumnIds", "port 'speeds' field 'id' has shape (4, 1), expected (4,)"),
    ("WideEvents", "port 'blips' field 'level' has shape (4, 2), expected (4,)"),
    ("UntypedWide", "port 'loose' field 'v' has shape (4, 2), expected a 1-d array"),
])
def test_wrong_shapes_are_refused_naming_port_field_and_shape(tmp_path, kind, message):
    result = _run(tmp_path, kind)
    assert result.error is not None and result.error.federate == "bad" and result.error.t_ns == 500_000_000
    assert str(result.error).startswith("federate 'bad' failed at t = 0.500 s: PortError: ")
    assert message in str(result.error)
    for path in (tmp_path / "trace").glob("*.parquet"):  # nothing of the wrong value was recorded
        table = pq.read_table(path)
        if "t_ns" in table.column_names and table.num_rows:
            assert table.column("t_ns").to_numpy().max() < 500_000_000, path.name


# -- item 3: a plug-in does not decide the exit ------------------------------------------------------------------
@pytest.mark.parametrize(("kind", "t_s", "message"), [
    ("Exits", 0.5, "called sys.exit(3); a federate cannot end the run"),
    ("ExitsInSetup", 0.0, "called sys.exit(0)"),
    ("ExitsInInit", 0.0, "called sys.exit(0)"),
    ("ExitsInFinalize", 2.0, "called sys.exit(4)"),
    ("RaisesBase", 0.5, "raised _Custom: not an Exception"),
    ("RaisesInterrupt", 0.5, "raised KeyboardInterrupt itself (no interrupt signal came)"),
])
def test_whatever_a_plugin_raises_is_its_failure_with_run_json(tmp_path, kind, t_s, message):
    done = _finished(_coopsim(tmp_path / "run", "duration_s=2", _federate(kind)))
    code, _, err = done
    assert code == 1, done
    assert f"error: run failed: federate 'bad' failed at t = {t_s:.3f} s: PluginExitError: " in err
    assert message in err and "Traceback" not in err and "interrupted" not in err
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["status"] == "failed" and info["error"]["federate"] == "bad"
    assert info["error"]["sim_time_s"] == t_s


def test_a_thread_a_plugin_leaves_running_does_not_hold_the_process(tmp_path):
    marker = tmp_path / "thread-started"
    code, _, err = _finished(_coopsim(tmp_path / "run", "duration_s=1",
                                        _federate("LeavesThread", marker=str(marker))))
    assert code == 0, err
    assert marker.exists()  # the thread ran, and waits forever for an event nobody sets
    assert "note: exiting without waiting for 1 thread still running (plugin-leftover), left by a plug-in" in err
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "ok"


def test_a_plugin_cannot_make_the_run_deaf_to_ctrl_c(tmp_path):
    marker = tmp_path / "ignoring"
    proc = _coopsim(tmp_path / "run", "duration_s=120", _federate("IgnoresSigint", marker=str(marker), at_s=0.2))
    _wait_for(marker, proc)  # written one step after it set SIGINT and SIGTERM to ignored
    proc.send_signal(signal.SIGINT)
    code, _, err = _finished(proc)
    assert code == 130, err
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["status"] == "interrupted" and info["interrupted_by"] == "SIGINT"
    assert info["sim_time_s"] < 120
    note = "federate 'bad' replaced the handler of SIGINT at t = 0.200 s; coopsim put its own back"
    assert any(n.startswith(note) for n in info["notes"]), info["notes"]


def test_os_exit_cannot_be_caught_but_takes_the_plot_worker_along(tmp_path):
    """``os._exit`` ends the process where it stands (documented): no run.json. The plot worker, whose pipe a
    process the plug-in forked still holds, goes with the run instead of waiting for jobs forever."""
    marker, log = tmp_path / "forked", tmp_path / "log"
    proc = _coopsim(tmp_path / "run", "duration_s=60", _federate("HardExit", marker=str(marker), at_s=0.3),
                    plots=True, log=log)
    workers = _plot_workers(proc.pid)
    code = proc.wait()
    holder = int(marker.read_text())
    try:
        assert workers
        assert code == 0
        assert not (tmp_path / "run" / "run.json").exists()
        for pid in workers:
            assert _ends(pid), f"plot worker {pid} outlived its run"
        assert "BrokenPipe" not in log.read_text() and "Traceback" not in log.read_text()
    finally:
        os.kill(holder, signal.SIGKILL)


def _plot_workers(parent: int) -> list[int]:
    """The plot workers ``parent`` started (they start before the run's loop)."""
    fd = os.pidfd_open(parent)
    try:
        import select

        while True:
            found = [pid for pid in _children(parent) if b"orchestrator.reporting.plot_worker" in _cmdline(pid)]
            if found or select.select([fd], [], [], 0.01)[0]:
                return found
    finally:
        os.close(fd)


def _children(parent: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                pids.append(int(entry.name))
    return pids


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _ends(pid: int, within_s: float = 30.0) -> bool:
    """Whether process ``pid`` ends (waits on its pidfd: an event, the bound only turns a hang into a failure)."""
    import select

    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], within_s)[0])
    finally:
        os.close(fd)


# -- item 7: start-up interrupts, and a killed run's plot worker -------------------------------------------------
HOOK = '''
import os, sys, threading

class Stall:
    """Stops the import of one module until Ctrl-C: an interrupt in the middle of start-up."""
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["STALL_ON"]:
            open(os.environ["STALL_MARKER"], "w").close()
            threading.Event().wait()
        return None

sys.meta_path.insert(0, Stall())
from orchestrator.cli.main import main
sys.exit(main())
'''


@pytest.mark.parametrize("module", ["rich.console", "orchestrator.scenario", "numba", "federates.remote.options",
                                    "orchestrator.build.world"])
def test_ctrl_c_at_any_point_of_start_up_is_one_line_and_130(tmp_path, module):
    marker = tmp_path / "stalled"
    env = {**os.environ, "PYTHONPATH": str(REPO), "STALL_ON": module, "STALL_MARKER": str(marker)}
    proc = subprocess.Popen([sys.executable, "-c", HOOK, "run", "scenarios/platoon.yaml", "--out",
                             str(tmp_path / "run"), "--quiet", "--set", "duration_s=1"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(marker, proc)
    proc.send_signal(signal.SIGINT)
    code, _, err = _finished(proc)
    assert code == 130 and err == "interrupted\n", err


def test_a_killed_run_takes_its_plot_worker_along(tmp_path):
    """SIGKILL mid-run: the worker's stdin stays open (a process the plug-in forked holds it), yet the worker
    ends with its run."""
    marker = tmp_path / "forked"
    proc = _coopsim(tmp_path / "run", "duration_s=60", _federate("ForksHolder", marker=str(marker), at_s=0.3),
                    plots=True, log=tmp_path / "log")
    workers = _plot_workers(proc.pid)
    assert workers
    _wait_for(marker, proc)
    holder = int(marker.read_text())
    try:
        proc.kill()
        proc.wait()
        for pid in workers:
            assert _ends(pid), f"plot worker {pid} outlived its killed run"
    finally:
        os.kill(holder, signal.SIGKILL)

