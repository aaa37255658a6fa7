"""Plots drawn in worker processes beside the run, so drawing them costs the run little wall time.

``coopsim run`` starts the workers before its simulation loop: each is a fresh interpreter (never a fork of the
run, which holds compiled kernels, threads and whatever plug-in code the scenario loaded) that imports matplotlib
while the loop runs on the other core, then waits for ``PlotJob``s. The run sends the jobs whose data is ready
(the vehicle samples first, the metric plots once the metrics are computed), and collects the PNG files the
workers wrote before it writes the report. The figures the run only waits for are drawn in parallel, each by a
process the worker forks (it holds matplotlib and numpy, no threads). The files are byte for byte those
``plot_run`` draws in-process.

Protocol: the run writes length-prefixed pickles of plain data (arrays, robots, metrics) to a worker's stdin; the
worker answers with one JSON line per job on stdout. It unpickles only numpy arrays, robots and ``PlotJob``s, loads
no plug-ins and draws only the functions of ``plots.DRAWERS`` and ``v2x_plots.DRAWERS``. A worker whose stdin
closes finishes its jobs and exits; ``close`` stops a worker and its drawing processes (a session of their own) by
the worker's pid. A run that dies without closing them (SIGKILL, a plug-in's ``os._exit``) takes them along: on
Linux the kernel kills a worker and its drawing processes when their parent dies (``PR_SET_PDEATHSIG``), elsewhere
a waiting worker checks every second that its run is still its parent. Its stdin alone cannot tell, since a process
the run forked may still hold the pipe's other end.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


PLOT_WORKERS = min(2, max(1, _cores() - 1))
"""Worker processes a run starts: one core stays the loop's, up to two others draw (on two cores one worker: a
second would only take turns with the loop and the first)."""
WAIT_S = 300.0
"""Longest a run waits for its plots once every job is sent (then the missing ones are named, not awaited)."""
NICE = 5
"""How much lower the workers' priority is than the run's (``$COOPSIM_PLOT_NICE`` overrides): importing
matplotlib must not slow the loop."""
PARENT_ENV = "COOPSIM_PLOT_PARENT"
"""The run's pid, handed to its workers: a worker whose parent is another process has lost its run."""
WORKER_ENV = "COOPSIM_PLOT_WORKERS"
"""Environment override of ``PLOT_WORKERS`` (0: draw in the run's own process)."""

_HEADER = struct.Struct("<Q")
_COST = {"string_stability": 3, "spacing_errors": 2, "estimate": 2, "v2x_latency": 2, "v2x_over_time": 2,
         "v2x_generation": 2}
"""Relative drawing time of a figure (1 for the others), to share the jobs evenly between the workers."""


class PlotWorkers:
    """The run's side of its plot workers: send jobs, collect the files drawn."""

    def __init__(self, processes: list[subprocess.Popen[bytes]]) -> None:
        self._processes = processes
        self._load = [0] * len(processes)
        self._writers: list[threading.Thread] = []
        self._jobs: list[tuple[int, str]] = []  # (worker, file) of every job sent, in order
        self._lines: list[list[dict[str, Any]]] = [[] for _ in processes]
        self._broken: dict[int, str] = {}  # worker -> why it can take no more jobs
        self._buffers = [b""] * len(processes)  # output read but not yet split into lines
        self._stop: Callable[[], str | None] | None = None  # asked while waiting (``finish``)

    @classmethod
    def start(cls, count: int | None = None) -> PlotWorkers | None:
        """Start ``count`` workers (default ``PLOT_WORKERS`` or ``$COOPSIM_PLOT_WORKERS``); None when none could
        start (the run then draws in its own process)."""
        if os.name != "posix" or not sys.executable:  # pipes in select(), sessions, fork and an interpreter to
            return None  # start: without them the run draws its own plots
        if count is None:
            try:
                count = int(os.environ.get(WORKER_ENV, PLOT_WORKERS))
            except ValueError:
                count = PLOT_WORKERS
        root = Path(__file__).resolve().parents[1]  # the workers run this very checkout's code
        env = {**os.environ, "COOPSIM_NO_PLUGINS": "1", "MPLBACKEND": "Agg", PARENT_ENV: str(os.getpid()),
               "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
        env.pop("PYTHONSTARTUP", None)
        processes = []
        for _ in range(max(count, 0)):
            try:
                # a session of its own: Ctrl-C reaches the run, which stops the worker and its drawing processes
                worker = [sys.executable, "-m", "orchestrator.reporting.plot_worker"]
                processes.append(subprocess.Popen(worker, cwd=root,
                                                  env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                  start_new_session=True))
            except OSError:
                break
        return cls(processes) if processes else None

    @property
    def pids(self) -> list[int]:
        """The workers' process ids."""
        return [p.pid for p in self._processes]

    def submit(self, out_dir: Path, jobs: Sequence[Any], waiting: bool = False) -> None:
        """Send ``jobs`` (``PlotJob``s drawn into ``out_dir``), each to the least loaded worker; ``waiting``: the run
        has nothing left to do but wait for them, so the workers may draw on every core. Never blocks: a background
        thread writes."""
        batches: list[list[Any]] = [[] for _ in self._processes]
        for job in sorted(jobs, key=lambda j: -_COST.get(j.draw, 1)):  # longest first: a balanced split
            k = min(range(len(self._processes)), key=lambda i: (self._load[i], i))
            self._load[k] += _COST.get(job.draw, 1)
            batches[k].append(job)
            self._jobs.append((k, job.file))
        for k, batch in enumerate(batches):
            message: dict[str, Any] = {"out_dir": str(Path(out_dir).resolve()), "jobs": batch,
                                       "parallel": max(1, _cores() // len(self._processes)) if waiting else 1}
            if batch:
                self._send(k, pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    def _send(self, k: int, data: bytes) -> None:
        stdin = self._processes[k].stdin
        assert stdin is not None

        def write() -> None:
            try:
                stdin.write(_HEADER.pack(len(data)) + data)
                stdin.flush()
            except (OSError, ValueError):  # a worker that died: its jobs are reported missing
                self._broken.setdefault(k, "it stopped before taking its jobs")

        thread = threading.Thread(target=write, name=f"plot-worker-{k}-send", daemon=True)
        thread.start()
        self._writers.append(thread)

    def finish(self, timeout_s: float = WAIT_S, stop: Callable[[], str | None] | None = None
               ) -> tuple[list[str], dict[str, str]]:
        """Wait for every job sent: the files drawn (in the order sent) and, for each missing one, why. ``stop``:
        asked while waiting; once it names a signal (SIGTERM during the plotting phase), the wait ends there, the
        files drawn by then count and the others are named as not drawn because of it."""
        deadline = time.monotonic() + timeout_s
        self._stop = stop
        for thread in self._writers:
            while thread.is_alive() and time.monotonic() < deadline and not (stop is not None and stop()):
                thread.join(0.05 if stop is not None else max(0.0, deadline - time.monotonic()))
        for process in self._processes:
            with contextlib.suppress(OSError, ValueError):
                assert process.stdin is not None
                process.stdin.close()  # no more jobs: a worker exits when its last one is drawn
        for k in range(len(self._processes)):
            self._read_until(k, "end", deadline)
        done = {line["done"] for lines in self._lines for line in lines if "done" in line}
        failed = {line["failed"]: line["error"] for lines in self._lines for line in lines if "failed" in line}
        drawn, missing = [], {}
        stopped = stop() if stop is not None else None
        for k, file in self._jobs:
            if file in done:
                drawn.append(file)
            elif stopped and file not in failed:
                missing[file] = f"not drawn: the run was stopped by {stopped} while drawing"
            else:
                missing[file] = failed.get(file) or self._why(k)
        self.close()
        return drawn, missing

    def _why(self, k: int) -> str:
        process = self._processes[k]
        code = process.poll()
        if code is not None:
            return f"plot worker {process.pid} exited with code {code}"
        if k in self._broken:
            return f"plot worker {process.pid}: {self._broken[k]}"
        return f"plot worker {process.pid} did not finish within the wait"

    def _read_until(self, k: int, key: str, deadline: float) -> dict[str, Any] | None:
        """Read worker ``k``'s answers up to the first with ``key`` (None at its end, or past ``deadline``)."""
        for line in self._lines[k]:
            if key in line:
                return line
        while True:
            text = self._next_line(k, deadline)
            if not text:  # its end, or nothing before the deadline
                return None
            try:
                line = json.loads(text)
            except ValueError:
                continue
            self._lines[k].append(line)
            if key in line:
                return line

    def _next_line(self, k: int, deadline: float) -> str | None:
        """Worker ``k``'s next line of output ('' at its end), or None when none came before ``deadline``
        (read from the pipe itself, so a slow or hung worker never blocks the run past the deadline)."""
        stdout = self._processes[k].stdout
        assert stdout is not None
        while b"\n" not in self._buffers[k]:
            remaining = deadline - time.monotonic()
            stopping = self._stop is not None and bool(self._stop())
            if remaining <= 0:
                return None
            # short waits while a stop can come (a signal only sets a flag, read here); once stopping, only what
            # the worker has already said (a figure it finished counts)
            ready, _, _ = select.select([stdout], [], [], 0.0 if stopping else remaining if self._stop is None
                                        else min(remaining, 0.05))
            if not ready:
                if stopping:
                    return None
                continue
            chunk = os.read(stdout.fileno(), 65536)
            if not chunk:
                return ""
            self._buffers[k] += chunk
        line, _, self._buffers[k] = self._buffers[k].partition(b"\n")
        return line.decode("utf-8", "replace") or " "

    def close(self) -> None:
        """Stop every worker still running (by pid) and reap it: no worker outlives its run."""
        for k, process in enumerate(self._processes):
            if any("end" in line for line in self._lines[k]):  # it said its last word and is leaving
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(2.0)
                if process.poll() is not None:
                    continue  # it reaped its drawing processes before its last word
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)  # the worker's group: it and any drawing process it forked
        for process in self._processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5.0)
            for stream in (process.stdin, process.stdout):
                with contextlib.suppress(OSError, ValueError):
                    if stream is not None:
                        stream.close()


# -- the worker's side -------------------------------------------------------------------------------------------
_ALLOWED = {
    ("orchestrator.reporting.plots", "PlotJob"), ("core.robots", "RobotSpec"),
    *(("core.robot_blocks", block) for block in ("VehicleBlock", "Dims", "InitialState", "ControllerSpec",
                                                  "DriveSpec", "CommandSourceSpec")),  # a robot's typed blocks
    ("orchestrator.metrics.geometry", "Series"), ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"), ("builtins", "slice"),
}
"""What a job may contain besides plain Python values: nothing that runs code when unpickled."""


class _JobUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"a plot job may not contain {module}.{name}")
        return super().find_class(module, name)


def _die_with_parent(parent: int) -> None:
    """Have the kernel kill this process when ``parent`` (its parent now) ends (Linux; elsewhere ``_orphaned`` is
    asked while waiting), and leave at once if it has already ended."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    if _orphaned(parent):  # it died before the call above: no signal will come
        os._exit(1)


def _orphaned(parent: int | None) -> bool:
    """Whether the run that started this worker is gone (another process, or init, is its parent now)."""
    return parent is not None and os.getppid() != parent


def _read_message(fd: int, parent: int | None = None) -> dict[str, Any] | None:
    """The next message on ``fd`` (None once the run closed it, or is gone). Read from the descriptor itself,
    unbuffered, so that waiting can look every second whether the run is still the parent."""
    header = _read_exact(fd, _HEADER.size, parent)
    if len(header) < _HEADER.size:
        return None  # the run closed our stdin: no more jobs
    (size,) = _HEADER.unpack(header)
    return _JobUnpickler(io.BytesIO(_read_exact(fd, size, parent))).load()


def _read_exact(fd: int, size: int, parent: int | None) -> bytes:
    """``size`` bytes from ``fd``, fewer at its end or when the run is gone."""
    chunks: list[bytes] = []
    got = 0
    while got < size:
        while parent is not None and not select.select([fd], [], [], 1.0)[0]:
            if _orphaned(parent):
                return b""
        chunk = os.read(fd, min(size - got, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _answer(out: IO[str], **line: Any) -> None:
    # one short write per line: the drawing processes of a worker share its stdout, and a pipe keeps writes of up
    # to 4 KiB whole
    if "error" in line:
        line["error"] = str(line["error"])[:500]
    out.write(json.dumps(line) + "\n")
    out.flush()


def _draw(out: IO[str], out_dir: Path, job: Any, drawers: dict[str, Any]) -> None:
    from .plots import draw_job

    try:
        draw_job(out_dir, job, drawers)
    except Exception as exc:  # one figure that cannot be drawn must not cost the others
        _answer(out, failed=job.file, error=f"{type(exc).__name__}: {exc}")
    else:
        _answer(out, done=job.file)


def _draw_all(out: IO[str], out_dir: Path, jobs: list[Any], drawers: dict[str, Any], parallel: int) -> None:
    """Draw ``jobs``, up to ``parallel`` at once: the worker forks a drawing process per extra job (it holds only
    matplotlib and numpy, no threads), so the run's figures use every core the run leaves idle."""
    pending = list(jobs)
    running: dict[int, Any] = {}  # pid of a drawing process -> its job

    def reaped(pid: int, status: int) -> None:
        job = running.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:  # it died before answering
            _answer(out, failed=job.file, error=f"its drawing process exited with code {code}")

    while pending or running:
        if pending and len(running) < parallel - 1 and hasattr(os, "fork"):
            job = pending.pop(0)
            worker = os.getpid()
            pid = os.fork()
            if pid == 0:  # the drawing process: one figure, its answer, and out
                _die_with_parent(worker)  # the death signal is not inherited across fork
                try:
                    _draw(out, out_dir, job, drawers)
                finally:
                    os._exit(0)
            running[pid] = job
        elif pending:
            _draw(out, out_dir, pending.pop(0), drawers)
            while running and (done := os.waitpid(-1, os.WNOHANG))[0]:
                reaped(*done)
        else:
            reaped(*os.waitpid(-1, 0))


def main() -> int:
    """The worker: import matplotlib, then draw each job sent on stdin until stdin closes."""
    try:
        parent: int | None = int(os.environ[PARENT_ENV])
    except (KeyError, ValueError):
        parent = None  # started by hand: no run to follow
    if parent is not None:
        _die_with_parent(parent)
    with contextlib.suppress(OSError, AttributeError):  # the run's own process keeps the first claim on a core
        os.nice(int(os.environ.get("COOPSIM_PLOT_NICE", NICE)))
    out = sys.stdout
    sys.stdout = sys.stderr  # a library that prints must not corrupt the answers
    from . import plots, v2x_plots

    plots.pyplot()  # the import that overlaps the run's loop
    drawers = {**plots.DRAWERS, **v2x_plots.DRAWERS}
    try:
        while (message := _read_message(sys.stdin.fileno(), parent)) is not None:
            _draw_all(out, Path(message["out_dir"]), message["jobs"], drawers, int(message.get("parallel", 1)))
        _answer(out, end=True)
    except (BrokenPipeError, KeyboardInterrupt):  # the run is gone or stopping: it names what was not drawn
        return 1
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # every file is written and every answer sent: no interpreter teardown for the run to wait on
