"""Batched points: the points of a batch that share a world's structure run as independent copies in one world.

One step then carries every point's robots through the same vectorised kernels instead of one process per point
paying an interpreter, imports, world building and reports. Each point keeps its own robots (ids of their own in the
world, ``orchestrator.build.batched``), its own universe (the range scan, the contact test and the channel never
cross points, ``core.universes``) and its random draws (keyed by its seed and its own robot ids), and its traces are
split into its run directory (``recording.split``): every point gets the traces, ``metrics.json`` and digest a run
of it alone gets. Plots and ``report.html`` are not drawn for batched points (``coopsim metrics RUN_DIR`` draws
them); ``run.json`` says so.

Points share a world when ``world_key`` is equal (everything but what enters through the robots: the controller's
law parameters, the leader's drive, the vehicles and the platoon layout) and so is their seed, and when nothing of
``why_not_batched`` applies. The rest run one process per point as before.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from core.federate import FederateError
from core.timebase import seconds_to_ns

from ..build.batched import MAX_BATCHED_ID, batched_robots
from ..build.world import build_world
from ..engine.run_control import RunControl
from ..metrics import DIGEST_TRACES, RunData, json_safe, write_metrics
from ..metrics.rundata import tables_digest
from ..recording.port_recorder import DEFAULT_SKIP, PortRecorder
from ..recording.recorder import VehicleRecorder
from ..recording.safe_files import check_outputs, write_atomic
from ..recording.split import PointSplit, SplitAppender
from ..recording.trace_schema import held
from ..runner import RUN_DIRS, RUN_FILES, resolved_yaml
from ..scenario import Scenario
from .task import RESULT_FILES, Record, Task, run_task

BATCHED_CHANNELS = ("ideal",)
"""Channel models whose stations are kept apart by universe (a radio model must never let two points hear or
disturb each other)."""

WORLD_BYTES = 768 << 20
"""Traces a batched world may hold in memory before they are split into its points' directories [bytes]: bounds
the points per world."""

WORLD_IDS = 1 << 22
"""Robot ids a batched world may span (each point's ids shifted by the largest id + 1): the federates index
per-robot tables by id, so a world of many points with large ids (SUMO's, or given ones) would hold tables of
that length; 4 M ids keep each such table within 32 MiB."""

_ROBOT_KEYS = ("seed", "name", "description", "vehicles", "platoons", "platoon", "leader", "controller")


@dataclass(frozen=True)
class BatchTask:
    """Tasks (points and seed replicates) of one seed whose scenarios share a world."""

    tasks: tuple[Task, ...]


def why_not_batched(scenario: Scenario) -> str | None:
    """Why a point cannot share a world with others (None: it can)."""
    if scenario.channel.type not in BATCHED_CHANNELS:
        return f"the {scenario.channel.type} channel is not batched yet"
    checks = (
        (scenario.federates, "external federates"), (scenario.drivers, "external command sources"),
        (scenario.execution.remote, "hosted federates"), (scenario.execution.realtime is not None, "real-time pacing"),
        (scenario.maneuvers, "maneuvers"), (scenario.attacks or scenario.detection is not None, "misbehaviour"),
        (not scenario.outputs.trace, "no traces"), (scenario.outputs.mcap, "MCAP recordings"),
        (_outages_naming_robots(scenario), "channel outages naming receivers"),
    )
    return next((f"{why} are not batched" if why.endswith("s") else f"{why}: not batched"
                 for given, why in checks if given), None)


def _outages_naming_robots(scenario: Scenario) -> bool:
    """Whether the channel cuts off listed robot ids: in a shared world each point's robots are renumbered
    (``orchestrator.build.batched``), so the ids would name point 0's robots only."""
    outages = (scenario.channel.model_extra or {}).get("outages") or []
    return any(o.get("receivers") if isinstance(o, dict) else getattr(o, "receivers", None) for o in outages)


def world_key(scenario: Scenario) -> str:
    """Equal for scenarios that can share a world: all but what enters through the robots (the controller's law
    parameters, the leader's drive, the vehicles, the platoon layout) and the seed; the control period counts (the
    control federate steps at it)."""
    data = scenario.model_dump(mode="json", exclude=set(_ROBOT_KEYS))
    data["controller.period_s"] = scenario.controller.period_s
    return json.dumps(data, sort_keys=True, default=str)


def plan_batches(tasks: Sequence[Task], jobs: int, scheduler: str | None = None
                 ) -> tuple[list[BatchTask], list[Task], dict[str, int]]:
    """The batched worlds, the tasks that run alone and why (reason -> number of runs). Each world holds at most
    what ``WORLD_BYTES`` allows, and there are at least ``jobs`` worlds when there are enough points for them, and
    a multiple of ``jobs`` when there are more (equal shares of work per process)."""
    if scheduler is not None:
        return [], list(tasks), ({"runs on a Dask cluster are not batched": len(tasks)} if tasks else {})
    groups: dict[tuple[str, int], list[Task]] = {}
    alone: list[Task] = []
    reasons: dict[str, int] = {}
    for task in tasks:
        why = why_not_batched(task.scenario)
        if why is None:
            groups.setdefault((world_key(task.scenario), task.seed), []).append(task)
        else:
            alone.append(task)
            reasons[why] = reasons.get(why, 0) + 1
    batches: list[BatchTask] = []
    processes = max(jobs or os.cpu_count() or 1, 1)  # as the local pool counts them (0: one per core)
    for group in groups.values():
        if len(group) < 2:
            alone += group
            reasons["no other point shares its world"] = reasons.get("no other point shares its world", 0) + len(group)
            continue
        stride = batched_robots([group[0].scenario]).stride
        if 2 * stride > WORLD_IDS:
            alone += group
            reasons["robot ids too large to share a world"] = reasons.get("robot ids too large to share a world",
                                                                           0) + len(group)
            continue
        per_world = max(2, min(int(WORLD_BYTES // max(_trace_bytes(group[0].scenario), 1)), WORLD_IDS // stride))
        worlds = max(math.ceil(len(group) / per_world), min(processes, len(group) // 2))
        # a whole number of worlds per process: 7 worlds on 2 processes leave one running alone at the end
        worlds = min(math.ceil(worlds / processes) * processes, max(len(group) // 2, 1))
        size = math.ceil(len(group) / worlds)
        batches += [BatchTask(tuple(group[k:k + size])) for k in range(0, len(group), size)]
    alone.sort(key=lambda t: (t.point, t.replicate))
    return batches, alone, reasons


def batching_summary(worlds: Sequence[BatchTask], alone: Sequence[Task], reasons: dict[str, int]) -> dict[str, Any]:
    """What a batch's result says about its worlds: how many runs shared how many worlds, how many ran alone and
    why."""
    return {"worlds": len(worlds), "batched_runs": sum(len(w.tasks) for w in worlds), "alone_runs": len(alone),
            "alone_because": dict(reasons)}


def _trace_bytes(scenario: Scenario) -> float:
    """About what one point's traces take in memory [bytes]: per robot and sample, the vehicles trace's 26 columns
    and a few V2X rows of 9 columns."""
    robots = len(batched_robots([scenario]).per_point[0])
    samples = scenario.duration_s / (scenario.outputs.trace_period_s or scenario.step_s) + 1
    steps = scenario.duration_s / scenario.step_s + 1
    return robots * (samples * 26 * 8 + steps * 2 * 9 * 8)


def run_any(task: Task | BatchTask) -> list[Record]:
    """A task's record, or a batch's records (in a worker process)."""
    return [run_task(task)] if isinstance(task, Task) else run_batch(task)


def run_batch(batch: BatchTask) -> list[Record]:
    """Run a batch's points in one world and write each point's run directory; never raises. A world that fails is
    run again point by point, so that the failure is the failing point's alone."""
    tasks = batch.tasks
    try:
        for task in tasks:
            _prepare(task)
        ran = _simulate(tasks)
    except Exception as exc:  # any failure of the shared world: run the points alone
        return [_alone(task, f"{type(exc).__name__}: {exc}") for task in tasks]
    if ran.error is not None and ran.interrupted is None:
        return [_alone(task, str(ran.error)) for task in tasks]
    records = []
    for point, task in enumerate(tasks):
        try:
            records.append(_finish_point(task, point, ran))
        except Exception as exc:  # its traces or outputs could not be written (a full disk): its record says why
            records.append(_alone(task, f"its outputs failed: {type(exc).__name__}: {exc}"))
    return records


def _alone(task: Task, why: str) -> Record:
    record = run_task(task)
    record["batch_note"] = f"run alone after its batched world failed ({why})"
    return record


def _prepare(task: Task) -> None:
    """The point's run directory as ``run_scenario`` starts it: no stale results, no links, the resolved scenario."""
    out = Path(task.run_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in RESULT_FILES:
        (out / stale).unlink(missing_ok=True)
    check_outputs(out, RUN_FILES, RUN_DIRS)
    trace = out / "trace"
    if trace.is_dir():  # an earlier run's traces must not pass for this one's
        for old in trace.glob("*.parquet"):
            old.unlink()
    write_atomic(out / "scenario.resolved.yaml", resolved_yaml(task.scenario, task.seed))


@dataclass
class _World:
    """What the shared world's run left."""

    world: Any
    split: PointSplit
    stride: int
    per_point: list[list[Any]]
    error: FederateError | None
    interrupted: str | None
    wall_s: float


def _simulate(tasks: Sequence[Task]) -> _World:
    """Build the shared world, run it with recorders that split the traces into the points' directories."""
    scenario = tasks[0].scenario
    t0 = time.perf_counter()
    robots = batched_robots([task.scenario for task in tasks])
    if robots.stride * len(tasks) > MAX_BATCHED_ID:
        raise ValueError("robot ids too large to batch")
    split = PointSplit(robots.stride, [Path(task.run_dir) for task in tasks])
    appender = partial(SplitAppender, split=split)
    scratch = Path(tempfile.mkdtemp(prefix=".batch-", dir=Path(tasks[0].run_dir).parent))
    error: FederateError | None = None
    try:
        with RunControl(scenario.execution.step_timeout_s) as control:
            world = build_world(scenario, out_dir=scratch, seed=tasks[0].seed, run_control=control,
                                robots=robots.robots)
            world.scheduler.control = control
            period = seconds_to_ns(scenario.outputs.trace_period_s or scenario.step_s)
            trace = scratch / "trace"
            observers = [VehicleRecorder(trace / "vehicles.parquet", period, appender=appender),
                         PortRecorder(trace, period, DEFAULT_SKIP, appender=appender)]
            try:
                world.scheduler.run(observers)
            except FederateError as exc:
                error = exc
        interrupted = world.scheduler.interrupted or control.stop_requested
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return _World(world, split, robots.stride, robots.per_point, error, interrupted, time.perf_counter() - t0)


def _finish_point(task: Task, point: int, ran: _World) -> Record:
    """A point's run.json, digest and metrics once the world has run."""
    from ..reporting.advisories import lateral_stability_notes
    from ..reporting.outcomes import run_outcomes
    from ..reporting.scale_notes import scale_notes

    scenario, out = task.scenario, Path(task.run_dir)
    # the point's traces; its digest and metrics come from the tables they were written from, not read back
    tables = ran.split.write(point)
    robots = ran.per_point[point]
    world = ran.world
    sim_s = world.scheduler.now_ns / 1e9
    points = len(ran.per_point)
    status = "interrupted" if ran.interrupted else "ok"
    physics = world.federates["physics"]
    collisions = [(t, a % ran.stride, b % ran.stride) for t, a, b in getattr(physics, "collisions", [])
                  if a // ran.stride == point]
    stability = lateral_stability_notes(scenario, robots)
    note = (f"batched: one of {points} points run as independent copies in one world ({ran.wall_s:.2f} s for all); "
            "plots and report.html are not drawn ('coopsim metrics RUN_DIR' draws them)")
    info: dict[str, Any] = {
        "coopsim_version": _version(), "scenario": scenario.name, "seed": task.seed, "channel": scenario.channel.type,
        "controllers": sorted({r.controller.type for r in robots if r.controller is not None}),
        "robots": len(robots), "sim_time_s": sim_s, "wall_time_s": ran.wall_s / points,
        "real_time_factor": sim_s * points / ran.wall_s if ran.wall_s > 0 else None,
        "steps": round(sim_s / scenario.step_s) + 1,
        "batched": {"points": points, "world_wall_time_s": ran.wall_s},
        "status": status, "notes": [*stability, *scale_notes(scenario, robots), note],
    }
    if ran.interrupted:
        info["interrupted_by"] = ran.interrupted
    info["outcomes"] = run_outcomes(collisions, robots, world.scheduler.now_ns, out, stability,
                                    getattr(world.federates.get("v2x"), "logs_transmissions", False))
    if status == "ok" and collisions:
        info["status"] = "collided"
    info["robot_names"] = {str(r.id): r.name for r in robots}
    info["digest"] = tables_digest({name: tables[f"{name}.parquet"] for name in DIGEST_TRACES
                                    if f"{name}.parquet" in tables})
    if status == "ok":
        with held({out / "trace" / name: table for name, table in tables.items()}):
            write_metrics(RunData.load(out))
    del tables
    write_atomic(out / "run.json", json.dumps(json_safe(info), indent=2))
    collided = info["status"] == "collided"
    return {"point": task.point, "replicate": task.replicate, "seed": task.seed, "dir": str(task.run_dir),
            "status": "ok" if collided else info["status"], "wall_time_s": info["wall_time_s"], "sim_time_s": sim_s,
            "digest": info["digest"], "collided": collided, "batched": points}


def _version() -> str:
    from core import __version__

    return __version__


__all__ = ["BATCHED_CHANNELS", "BatchTask", "batching_summary", "plan_batches", "run_any", "run_batch",
           "why_not_batched", "world_key"]
