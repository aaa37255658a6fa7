"""Running the points of a batch: one run directory per point and seed, in parallel processes or on a Dask
cluster (``dask_runner``).

A run never stops the batch: a run whose federate fails is recorded with the error from its ``run.json``, and
an exception anywhere in a run (or a worker process that dies) is recorded with its type and message, while the
other runs go on. Results are read back from the run directories (``run.json``, ``metrics.json``), the files a run
leaves for anyone, rather than passed between processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .task import Record, Task, run_task

if TYPE_CHECKING:
    from .batched import BatchTask


def execute(tasks: Sequence[Task | BatchTask], jobs: int = 0, on_done: Callable[[Record], None] | None = None, *,
            scheduler: str | None = None, shared_dir: str | Path | None = None, partial: Path | None = None,
            notify: Callable[[str], None] | None = None) -> list[Record]:
    """Run every task, ``jobs`` processes at a time (0: one per core; one task or one job runs in this process),
    or on the Dask cluster at ``scheduler`` (``tcp://host:port``, or ``local``; ``dask_runner``; with
    ``shared_dir``, a directory every worker mounts at the same path, runs are written in place). ``on_done``
    sees each record as its run ends, ``notify`` the cluster's messages (retries). Returns the records in
    completion order. On an interrupt (Ctrl-C) the queued runs are not started, the finished ones keep their run
    directories and, with ``partial``, their records are written there as JSON before the interrupt goes on.
    A ``batched.BatchTask`` (local processes only) runs its points in one world and gives a record per point."""
    records: list[Record] = []
    total = sum(len(t.tasks) if hasattr(t, "tasks") else 1 for t in tasks)

    def done(record: Record) -> None:
        records.append(record)
        if on_done is not None:
            on_done(record)

    try:
        if scheduler is not None:
            from .dask_runner import execute_on_cluster

            execute_on_cluster(tasks, scheduler, jobs, done, notify, shared_dir=shared_dir)
        elif shared_dir is not None:
            from .dask_runner import ClusterError

            raise ClusterError("--shared-dir is for workers elsewhere: it needs --scheduler")
        else:
            _execute_locally(tasks, jobs, done)
    except KeyboardInterrupt:
        if partial is not None:
            write_partial(partial, records, total)
        raise
    return records


def _execute_locally(tasks: Sequence[Task | BatchTask], jobs: int, done: Callable[[Record], None]) -> None:
    from .batched import run_any

    workers = max(1, min(len(tasks), jobs or os.cpu_count() or 1))
    if workers == 1:
        for task in tasks:
            for record in run_any(task):
                done(record)
                if record["status"] == "interrupted":  # Ctrl-C stopped the run in this process: stop the batch too
                    raise KeyboardInterrupt
        return
    pool = ProcessPoolExecutor(max_workers=workers)
    try:
        futures: dict[Future[list[Record]], Task | BatchTask] = {pool.submit(run_any, t): t for t in tasks}
        for fut in as_completed(futures):
            item = futures[fut]
            try:
                records = fut.result()
            except Exception as exc:  # the worker process itself died (e.g. killed): record and go on
                records = [{"point": task.point, "replicate": task.replicate, "seed": task.seed,
                            "dir": str(task.run_dir), "status": "error",
                            "error": {"type": type(exc).__name__, "message": str(exc) or repr(exc)}}
                           for task in ((item,) if isinstance(item, Task) else item.tasks)]
            for record in records:
                done(record)
    except BaseException:
        # the worker processes are taken before the shutdown: once the pool's manager thread has seen it, the pool
        # forgets them, and a worker left blocked on the call queue would outlive the command
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)  # on Ctrl-C, do not start the queued runs
        _end_workers(processes)
        raise
    pool.shutdown()


WORKER_GRACE_S = 10.0
"""How long an interrupted batch waits for its worker processes to close the runs they were in (each run ends on
the interrupt with what it recorded so far) before it stops them."""


def _end_workers(processes: Sequence[Any]) -> None:
    """Wait up to ``WORKER_GRACE_S`` for a pool's worker ``processes`` to end, then terminate the ones left, and
    kill what a terminate did not end. A worker caught by Ctrl-C while it was handing back a result can hold the
    pool's result queue, and the interpreter's exit would then wait for it forever; a command that was interrupted
    must end, and leave no process behind."""
    deadline = time.monotonic() + WORKER_GRACE_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.terminate()
            process.join(5.0)
        if process.is_alive():
            process.kill()
            process.join(5.0)


def write_partial(path: Path, records: Sequence[Record], total: int) -> None:
    """The records of the runs that finished before an interrupt, as JSON at ``path``: ``interrupted``, ``total``
    (tasks in the batch), ``finished`` (records in completion order, ``dir`` relative to the file's directory
    when inside it)."""
    path = Path(path)
    finished = []
    for record in records:
        entry = dict(record)
        with contextlib.suppress(ValueError):  # a run directory elsewhere keeps its full path
            entry["dir"] = Path(entry["dir"]).relative_to(path.parent).as_posix()
        finished.append(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    from ..recording.safe_files import write_atomic

    write_atomic(path, json.dumps({"interrupted": True, "total": total, "finished": finished}, indent=2, default=str))


def by_point(records: Sequence[Record], points: int) -> list[list[Record]]:
    """The records of each point, in replicate order (``execute`` returns them as they finish)."""
    grouped: list[list[Record]] = [[] for _ in range(points)]
    for record in sorted(records, key=lambda r: (r["point"], r["replicate"])):
        grouped[record["point"]].append(record)
    return grouped


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file of a run directory, or an empty mapping when the run did not write it (it failed early, or
    ``outputs.trace`` is off so there are no metrics)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def run_outputs(record: Record) -> tuple[dict[str, Any], dict[str, Any]]:
    """``run.json`` and ``metrics.json`` of a recorded run (metrics only for a run with status ``ok``). A run that
    raised before writing ``run.json`` is described by its record instead."""
    run_dir = Path(record["dir"])
    run = read_json(run_dir / "run.json") if record["status"] != "error" else {}
    if not run:
        run = {k: v for k, v in record.items() if k not in ("point", "replicate", "dir")}
    metrics = read_json(run_dir / "metrics.json") if record["status"] == "ok" else {}
    return run, metrics


__all__ = ["Record", "Task", "by_point", "execute", "read_json", "run_outputs", "run_task", "write_partial"]
