"""Running a batch's tasks on a Dask cluster (``--scheduler tcp://host:8786``, or ``local`` for a cluster in
this machine).

Workers may be other machines that cannot write to the orchestrator's disk, so each task runs in a temporary
directory on its worker and returns the files of its run directory, which are written here into the task's
``run_dir`` as the task finishes: a sweep's directory looks exactly as after a local run, and the runs that
finished keep their directories when the batch is interrupted. A run whose status is not ``ok`` (``error``: it
raised, ``failed``: a federate failed) or whose worker died is submitted once more; the second outcome is the one
reported, with ``attempts: 2`` in its record. Nothing here changes what a run computes, so digests equal those of
a local run.

Each worker should run one task at a time (``dask worker --nthreads 1``): a run is single-threaded Python and
compiled kernels that hold the interpreter lock, so more threads per worker only interleave runs.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import tempfile
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .task import RESULT_FILES, Record, Task, run_task

LOCAL = "local"
"""``--scheduler local``: a Dask cluster of worker processes on this machine (loopback only)."""

RunFiles = list[tuple[str, bytes]]


class ClusterError(RuntimeError):
    """The Dask scheduler cannot be used (not installed, bad address, nothing answers)."""


def run_returning_files(task: Task) -> tuple[Record, RunFiles]:
    """Run ``task`` (on a worker) in a temporary directory; its record and every file of its run directory, as
    (path relative to the run directory, bytes). The record names the task's own ``run_dir``."""
    with tempfile.TemporaryDirectory(prefix="coopsim-run-") as tmp:
        here = dataclasses.replace(task, run_dir=Path(tmp) / "run")
        record = run_task(here)
        files = [(p.relative_to(here.run_dir).as_posix(), p.read_bytes())
                 for p in sorted(here.run_dir.rglob("*")) if p.is_file()]
    record["dir"] = str(task.run_dir)
    return record, files


def run_in_place(task: Task) -> tuple[Record, RunFiles]:
    """Run ``task`` (on a worker) straight into its run directory on the shared file system; nothing to send."""
    return run_task(task), []


def in_shared_dir(tasks: Sequence[Task], shared_dir: Path) -> list[Task]:
    """The tasks with absolute run directories (a worker's working directory is not ours), each checked to lie
    inside ``shared_dir``: what a worker writes elsewhere would stay on its own disk."""
    root = shared_dir.resolve()
    out = []
    for task in tasks:
        run_dir = Path(task.run_dir).resolve()
        if not run_dir.is_relative_to(root):
            raise ClusterError(f"--shared-dir {shared_dir}: the run directory {task.run_dir} is not inside it; "
                               "put --out in the shared directory")
        out.append(dataclasses.replace(task, run_dir=run_dir))
    return out


def store(run_dir: Path, files: RunFiles) -> None:
    """Write a run's returned files into ``run_dir`` (results of an earlier run there are removed first, as a
    local run does, so they cannot pass for this one's)."""
    run_dir = Path(run_dir)
    for stale in RESULT_FILES:
        (run_dir / stale).unlink(missing_ok=True)
    for rel, data in files:
        path = run_dir / rel
        if ".." in Path(rel).parts or Path(rel).is_absolute():  # a worker writes only inside the run directory
            raise ValueError(f"a worker returned a file outside its run directory: {rel}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def connect(scheduler: str, workers: int) -> tuple[Any, Any]:
    """A Dask client for ``scheduler`` (``tcp://host:port``, or ``local``: a cluster of ``workers`` processes on
    loopback, one thread each) and the local cluster to close afterwards (None for a remote scheduler)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ClusterError("--scheduler needs Dask: pip install 'coopsim[cluster]'") from None
    if scheduler == LOCAL:
        cluster = LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None)
        return Client(cluster), cluster
    if "://" not in scheduler or not scheduler.rsplit(":", 1)[-1].isdigit():
        raise ClusterError(f"--scheduler must be 'local' or an address like tcp://host:8786, got '{scheduler}'")
    try:
        _probe(scheduler)
        return Client(scheduler, timeout=10), None
    except (OSError, TimeoutError) as exc:
        raise ClusterError(f"--scheduler {scheduler}: no Dask scheduler answers ({exc}); start one with "
                           "'dask scheduler' (docs/cluster.md)") from None


def _probe(scheduler: str) -> None:
    """Raise OSError at once when nothing listens at a ``tcp://`` scheduler's address: Dask's client retries a
    refused connection until its 10 s timeout, which a refused port never outlasts."""
    if not scheduler.startswith("tcp://"):
        return
    host, _, port = scheduler[len("tcp://"):].rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=10):
        pass


def execute_on_cluster(tasks: Sequence[Task], scheduler: str, jobs: int, done: Callable[[Record], None],
                       notify: Callable[[str], None] | None = None, shared_dir: str | Path | None = None) -> None:
    """Run every task on the Dask cluster at ``scheduler`` and hand each record to ``done`` once its files are
    stored (``jobs``: worker processes of a ``local`` cluster, 0: one per core). A task whose run did not succeed,
    or whose worker died, is run once more. On an interrupt the queued tasks are cancelled. With ``shared_dir``
    (mounted at the same path everywhere, holding every run directory) workers write the runs in place."""
    from distributed import as_completed

    in_place = shared_dir is not None
    given = {(t.point, t.replicate): t.run_dir for t in tasks}  # records name the run directories as given
    if in_place:
        tasks = in_shared_dir(tasks, Path(shared_dir))
    work = run_in_place if in_place else run_returning_files

    say = notify or (lambda message: None)
    client, cluster = connect(scheduler, max(1, min(len(tasks), jobs or os.cpu_count() or 1)))
    batch = uuid.uuid4().hex[:8]
    try:
        threads = {w.get("name", a): w.get("nthreads", 1) for a, w in client.scheduler_info()["workers"].items()}
        say(f"  Dask scheduler {client.scheduler.address}: {len(threads)} workers, {sum(threads.values())} threads")
        if any(n > 1 for n in threads.values()):
            say("  note: workers with more than one thread interleave runs; start them with --nthreads 1")

        def submit(task: Task, attempt: int) -> Any:
            # a unique key per attempt: Dask would otherwise hand back the first attempt's result
            key = f"coopsim-{batch}-{task.point}-{task.replicate}-{attempt}"
            return client.submit(work, task, key=key, pure=False)

        attempts = {submit(t, 1): (t, 1) for t in tasks}
        pending = as_completed(list(attempts))
        try:
            for fut in pending:
                task, attempt = attempts.pop(fut)
                try:
                    record, files = fut.result()
                except Exception as exc:  # the worker died (KilledWorker) or the task could not run there
                    record, files = lost_record(task, exc), []
                fut.release()
                if record["status"] != "ok" and attempt == 1:
                    message = (record.get("error") or {}).get("message")
                    say(f"  retrying point {task.point} seed {task.seed} ({record['status']}: {message})")
                    retry = submit(task, 2)
                    attempts[retry] = (task, 2)
                    pending.add(retry)
                    continue
                if attempt > 1:
                    record["attempts"] = attempt
                if not in_place:
                    store(task.run_dir, files)
                record["dir"] = str(given[task.point, task.replicate])
                done(record)
        except BaseException:
            client.cancel(list(attempts))  # on Ctrl-C, do not start the queued runs
            raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def lost_record(task: Task, exc: BaseException) -> Record:
    """The record of a task that returned nothing (its worker died, or it could not be unpickled there)."""
    return {"point": task.point, "replicate": task.replicate, "seed": task.seed, "dir": str(task.run_dir),
            "status": "error", "error": {"type": type(exc).__name__, "message": str(exc) or repr(exc)}}


__all__ = ["LOCAL", "ClusterError", "connect", "execute_on_cluster", "in_shared_dir", "lost_record", "run_in_place",
           "run_returning_files", "store"]
