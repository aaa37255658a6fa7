"""Outcomes of a run that must not be missed: collisions, stations that never sent a CAM, laws past their stability
bound, requests of the scenario a federate delayed or refused (a SUMO lane change). ``run.json`` carries them under
``outcomes`` (a run with a collision has ``status: "collided"``), the terminal prints them in red and
``outputs.fail_on`` (or ``coopsim run --strict``) turns them into a non-zero exit code."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.ports import V2X_EVENTS, V2X_OUTCOMES
from core.robots import RobotSpec

OUTCOMES = ("collision", "silent_station", "unstable", "unmet_request")
"""What ``outputs.fail_on`` may name."""

CAM_GRACE_NS = 1_000_000_000
"""A station alive for less than T_GenCamMax (1 s, ETSI EN 302 637-2) may rightly have sent nothing yet."""


def run_outcomes(collisions: Sequence[tuple[int, int, int]], robots: Sequence[RobotSpec], end_ns: int,
                 out_dir: Path | None, stability_notes: Sequence[str], logs_transmissions: bool,
                 unmet: Sequence[str] = ()) -> dict[str, Any]:
    """The outcomes of a finished run: ``collisions`` (count), ``first_contact`` (time and robot names, or None),
    ``silent_stations`` (names of robots alive for at least 1 s that sent no CAM; None without a V2X trace or when
    the channel model does not log every transmission, as the ideal channel, where every station sends by
    construction), ``unstable`` (the stability notes) and ``unmet_requests`` (``unmet``: what the federates were
    told by the scenario and delayed or refused, see ``unmet_requests``)."""
    names = {r.id: r.name for r in robots}
    first = None
    if collisions:
        t_ns, a, b = min(collisions)
        first = {"t_s": t_ns / 1e9, "robots": [names.get(a, str(a)), names.get(b, str(b))]}
    return {
        "collisions": len(collisions),
        "first_contact": first,
        "silent_stations": _silent_stations(robots, end_ns, out_dir) if logs_transmissions else None,
        "unstable": list(stability_notes),
        "unmet_requests": list(unmet),
    }


def unmet_requests(federates: dict[str, Any]) -> list[str]:
    """What the federates were told by the scenario and delayed or refused, one line each: every federate may say so
    with ``unmet_requests()`` (the SUMO federate: a scripted lane change SUMO held back or never made)."""
    lines: list[str] = []
    for federate in federates.values():
        report = getattr(federate, "unmet_requests", None)
        if callable(report):
            try:
                lines += [str(line) for line in report()]
            except KeyboardInterrupt:  # the user's Ctrl-C after the run (the run's handlers are gone by then)
                raise
            except BaseException as exc:  # a plug-in's, even sys.exit: the run's record is still written
                lines.append(f"federate '{getattr(federate, 'name', '?')}': unmet_requests() failed: "
                             f"{type(exc).__name__}: {exc}")
    return lines


def _silent_stations(robots: Sequence[RobotSpec], end_ns: int, out_dir: Path | None) -> list[str] | None:
    path = None if out_dir is None else out_dir / "trace" / "v2x.parquet"
    if path is None or not path.exists():
        return None
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["event", "sender", "outcome"])
    if table.num_rows == 0:
        senders: set[int] = set()
    else:
        tx = pc.and_(pc.equal(table["event"], V2X_EVENTS[0]), pc.equal(table["outcome"], V2X_OUTCOMES[0]))
        senders = set(np.unique(table.filter(tx)["sender"].to_numpy()).tolist())
    silent = []
    for robot in robots:
        alive_until = end_ns if robot.despawn_ns is None else min(robot.despawn_ns, end_ns)
        if alive_until - robot.spawn_ns >= CAM_GRACE_NS and robot.id not in senders:
            silent.append(robot.name)
    return silent


def happened(outcomes: dict[str, Any]) -> list[str]:
    """Which of ``OUTCOMES`` this run had."""
    found = []
    if outcomes.get("collisions"):
        found.append("collision")
    if outcomes.get("silent_stations"):
        found.append("silent_station")
    if outcomes.get("unstable"):
        found.append("unstable")
    if outcomes.get("unmet_requests"):
        found.append("unmet_request")
    return found


def describe(outcomes: dict[str, Any]) -> list[str]:
    """One line per outcome, for the terminal and the report's banner."""
    lines = []
    first = outcomes.get("first_contact")
    if first:
        more = outcomes["collisions"] - 1
        lines.append(f"collision: {first['robots'][0]} and {first['robots'][1]} touched at t = {first['t_s']:.3f} s"
                     + (f" ({more} more contact{'s' if more > 1 else ''} after it)" if more else ""))
    silent = outcomes.get("silent_stations") or []
    if silent:
        shown = ", ".join(silent[:8]) + (f" and {len(silent) - 8} more" if len(silent) > 8 else "")
        lines.append(f"no CAM at all from {shown}")
    lines += [f"unstable: {note}" for note in outcomes.get("unstable") or []]
    lines += [f"not as told: {note}" for note in outcomes.get("unmet_requests") or []]
    return lines
