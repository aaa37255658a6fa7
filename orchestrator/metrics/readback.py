"""A finished run's scenario read back from its directory, whether or not the plug-ins it used are importable here.

``coopsim metrics`` and ``coopsim mcap`` work from a run directory alone; neither runs a law, a channel model or a
federate. A plug-in the run used (a ``package.module:Class`` path or an entry point) is imported when it can be,
as before; when it cannot (not installed on this machine, or ``--no-plugins``), it stands in as a placeholder
(``core.registry.reading_back``) and what the run directory recorded takes its place:

- every robot's start pose and speed come from its first sample in ``trace/vehicles.parquet`` (the default
  placement needs the law's desired gap and the leader profile's start speed);
- a follower whose law cannot be had has no law object: the spacing-error metrics take the rear-axle distance
  minus the recorded desired gap (``desired_gap_m``) instead of the law's own ``spacing_error``, which is the same
  for a law whose gap is measured between rear axles (``gap_reference = "axle"``, the default) but not for one
  measured bumper to bumper (its class, not the run directory, says which).

``notes`` says which plug-ins could not be had, why, and what was used instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc

from core.registry import Unresolved, reading_back
from core.robot_blocks import InitialState
from core.robots import RobotSpec


def read_back(out_dir: Path) -> tuple[Any, list[RobotSpec], list[Unresolved]]:
    """The resolved scenario of ``out_dir``, its robots, and the plug-ins that could not be had here."""
    from orchestrator.build.world import expand_robots
    from orchestrator.scenario import load_scenario

    with reading_back() as unresolved:  # validated, never planned: reading a run back runs nothing
        scenario = load_scenario(Path(out_dir) / "scenario.resolved.yaml")
        robots = expand_robots(scenario)
    if unresolved:
        recorded_starts(robots, Path(out_dir) / "trace" / "vehicles.parquet")
    return scenario, robots, unresolved


def recorded_starts(robots: list[RobotSpec], vehicles: Path) -> None:
    """Give each robot (in place in ``robots``) the ``initial`` pose and speed of its sample at its spawn time in the
    vehicles trace (the true state it started with); a robot without that sample keeps the default placement."""
    if not vehicles.is_file():
        return
    spawn = {r.id: r.spawn_ns for r in robots}
    first: dict[int, dict[str, float]] = {}
    from ..recording.trace_schema import check_values, open_trace, read_group

    parquet = open_trace(vehicles)  # a run directory is untrusted input: checked as it is read
    times = sorted(set(spawn.values()))
    for group in range(parquet.num_row_groups):  # the spawn samples sit near the start: stop once all are found
        batch = read_group(parquet, vehicles, group, ["t_ns", "robot", "x", "y", "yaw", "v"])
        check_values(vehicles, {c: batch.column(c) for c in batch.column_names}, "vehicles")
        at_spawn = pc.is_in(batch.column("t_ns"), value_set=_int64(times))
        rows = batch.filter(at_spawn)
        ids, t_ns = rows.column("robot").to_numpy(), rows.column("t_ns").to_numpy()
        cols = {k: rows.column(k).to_numpy() for k in ("x", "y", "yaw", "v")}
        for k, rid in enumerate(ids):
            rid = int(rid)
            if rid in spawn and rid not in first and int(t_ns[k]) == spawn[rid]:
                first[rid] = {name: float(values[k]) for name, values in cols.items()}
        if len(first) == len(spawn) or int(batch.column("t_ns").to_numpy().min(initial=0)) > times[-1]:
            break
    for k, robot in enumerate(robots):
        if robot.id in first:
            robots[k] = replace(robot, initial=InitialState.from_plain(first[robot.id]))


def _int64(values: Iterable[int]) -> Any:
    import pyarrow as pa

    return pa.array(np.asarray(list(values), np.int64))


def readback_notes(unresolved: Sequence[Unresolved], robots: Sequence[RobotSpec]) -> list[str]:
    """One line per plug-in that could not be had: what it is, why, and what stands in for it."""
    notes = []
    for item in unresolved:
        head = f"{item.kind} '{item.name}' is not available here ({item.reason})"
        if item.kind == "controller":
            users = [r.name for r in robots if r.controller is not None and r.controller.type == item.name]
            who = f" ({_names(users)})" if users else ""
            notes.append(f"{head}: the spacing errors of its followers{who} are the rear-axle distance minus the "
                         "recorded desired gap (trace column desired_gap_m), not the law's own spacing_error: the "
                         "same for a law that measures its gap between rear axles (the default), larger by the "
                         "bumper-to-axle lengths for one that measures bumper to bumper; with the plug-in importable "
                         "they are the law's")
        else:
            notes.append(f"{head}: not needed, the metrics read what the run recorded")
    if unresolved:
        notes.append("the robots' start poses and speeds are read from trace/vehicles.parquet (placing them as the "
                     "run did needs the plug-ins)")
    return notes


def _names(names: Sequence[str], limit: int = 6) -> str:
    return ", ".join(names) if len(names) <= limit else f"{', '.join(names[:limit])} and {len(names) - limit} more"
