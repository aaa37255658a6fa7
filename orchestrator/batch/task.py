"""One run of a batch: the task (a point's scenario, seed and run directory) and running it into a record.

Kept apart from ``runner`` (which schedules many) so that the Dask workers' entry point (``dask_runner``) and the
local pool share it without importing each other."""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..scenario import Scenario

Record = dict[str, Any]
RESULT_FILES = ("run.json", "metrics.json")


@dataclass(frozen=True)
class Task:
    """One run: the ``replicate``-th seed of point ``point``, into ``run_dir``."""

    point: int
    replicate: int
    scenario: Scenario
    run_dir: Path
    seed: int
    source: str


def run_task(task: Task) -> Record:
    """Run one task (in a worker process). Never raises: an exception is recorded as the run's error.

    The record holds ``point``, ``replicate``, ``seed``, ``dir``, ``status`` (``ok``, ``failed``: a federate
    failed, traces up to then are kept; ``error``: the run raised), and ``wall_time_s``, ``sim_time_s``,
    ``digest`` when the run finished, ``error`` when it did not succeed."""
    record: Record = {"point": task.point, "replicate": task.replicate, "seed": task.seed, "dir": str(task.run_dir)}
    for stale in RESULT_FILES:  # results are read back from the directory: an earlier run's must not pass for ours
        (Path(task.run_dir) / stale).unlink(missing_ok=True)
    try:
        from ..runner import run_scenario

        result = run_scenario(task.scenario, task.run_dir, seed=task.seed, source=task.source)
    except Exception as exc:  # a bad point must not stop the batch
        tb = traceback.extract_tb(exc.__traceback__)
        where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""
        record.update(status="error", error={"type": type(exc).__name__, "message": str(exc), "where": where})
        return record
    info = result.run_info
    # a run that collided completed and its metrics stand: the point is "ok", with the collision kept beside it
    collided = info["status"] == "collided"
    record.update(status="ok" if collided else info["status"], wall_time_s=info["wall_time_s"],
                  sim_time_s=info["sim_time_s"], digest=info.get("digest"), collided=collided)
    if not result.ok:
        record["error"] = info.get("error")
    return record


__all__ = ["RESULT_FILES", "Record", "Task", "run_task"]
