"""How the roles of a run shape its figures: robots grouped by the platoon they spent longest in, whether a
timeline is worth drawing and what it shows, and each platoon's chain for the string-stability figure (plain data:
``plots.py`` draws)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.robots import RobotSpec


def main_platoons(roles: Mapping[str, Any] | None) -> dict[str, str]:
    """Per robot, the platoon it spent the longest time in (``metrics.json`` ``roles``; empty without roles)."""
    time_in: dict[str, dict[str, float]] = {}
    for row in (roles or {}).get("intervals") or []:
        spent = time_in.setdefault(row["robot"], {})
        spent[str(row["platoon"])] = spent.get(str(row["platoon"]), 0.0) + float(row["to_s"]) - float(row["from_s"])
    return {robot: max(spent, key=lambda p: (spent[p], p)) for robot, spent in time_in.items()}


def platoon_groups(robots: Sequence[RobotSpec], roles: Mapping[str, Any] | None = None
                   ) -> list[tuple[str, list[str]]]:
    """The robots as (platoon, names) groups, in spawn order: by the platoon each spent the longest time in
    (``roles``) or, without roles, the platoon it was spawned in."""
    main = main_platoons(roles)
    groups: dict[str, list[str]] = {}
    for r in robots:
        groups.setdefault(main.get(r.name, f"platoon {r.platoon}"), []).append(r.name)
    return list(groups.items())

def roles_change(roles: Mapping[str, Any] | None) -> bool:
    """Whether any robot's role changes or leaves steady following (``metrics.json`` ``roles``)."""
    rows = (roles or {}).get("intervals") or []
    robots = [row["robot"] for row in rows]
    return len(set(robots)) < len(robots) or any(row["phase"] != "steady" for row in rows)


MAX_TIMELINE_ROBOTS = 64
"""Rows of the roles timeline at most (the robots whose role changed first)."""


def timeline_args(robots: Sequence[RobotSpec], metrics: Mapping[str, Any]) -> dict[str, Any]:
    """What the roles timeline draws: the role intervals of its robots (those whose role changed first, in spawn
    order, at most ``MAX_TIMELINE_ROBOTS``), the maneuver requests and cut-ins as marks, and what was left out."""
    intervals = list((metrics.get("roles") or {}).get("intervals") or [])
    by_robot: dict[str, list[dict[str, Any]]] = {}
    for row in intervals:
        by_robot.setdefault(row["robot"], []).append(row)
    order = [r.name for r in robots if r.name in by_robot] + [n for n in by_robot if n not in {r.name for r in robots}]

    def changed(name: str) -> bool:
        rows = by_robot[name]
        return len({(r["platoon"], r["position"], r["predecessor"]) for r in rows}) > 1 or any(
            r["phase"] != "steady" for r in rows)

    rows = sorted(order, key=lambda n: not changed(n))[:MAX_TIMELINE_ROBOTS]
    rows = [n for n in order if n in rows]  # back in spawn order
    marks = [(float(m.get("requested_s", m.get("at_s")) or 0.0), f"#{m.get('index')} {m.get('type')}")
             for m in (metrics.get("maneuvers") or {}).get("requests") or []]
    marks += [(float(c["from_s"]), f"cut-in {c.get('intruder')}") for c in (metrics.get("cut_ins") or {}).get(
        "events") or []]
    platoons = list(dict.fromkeys(str(r["platoon"]) for r in intervals))
    return {"rows": {n: by_robot[n] for n in rows}, "marks": marks, "platoons": platoons,
            "note": "" if len(rows) == len(order) else f"{len(rows)} of {len(order)} robots (those whose role "
                                                        "changed first)"}

def role_labels(rows: Sequence[Mapping[str, Any]]) -> list[tuple[float, float, str]]:
    """(from, to, text) of each run of intervals with one platoon, position and predecessor (a phase change alone
    does not split a label)."""
    out: list[tuple[float, float, str]] = []
    key = None
    for r in rows:
        text = "L" if r["predecessor"] is None else f"{r['position']} · {r['predecessor']}"
        this = (r["platoon"], text)
        if out and this == key and abs(out[-1][1] - float(r["from_s"])) < 1e-6:
            out[-1] = (out[-1][0], float(r["to_s"]), text)
        else:
            out.append((float(r["from_s"]), float(r["to_s"]), text))
        key = this
    return out

MAX_PLATOONS_DRAWN = 8

def string_chains(robots: Sequence[RobotSpec], followers: Mapping[str, Mapping[str, Any]]
                  ) -> list[tuple[str, list[tuple[int, str]]]]:
    """(platoon, [(position, follower name)]) per platoon, at most ``MAX_PLATOONS_DRAWN``: each follower where it
    held its longest steady role (``metrics.json`` ``platoon`` and ``position``; a joiner in the platoon it
    joined), else where it was spawned."""
    chains: dict[str, list[tuple[int, str]]] = {}
    for r in robots:
        entry = followers.get(r.name)
        if entry is None:
            continue
        platoon = str(entry.get("platoon", f"platoon {r.platoon}"))
        chains.setdefault(platoon, []).append((int(entry.get("position", r.position_in_platoon)), r.name))
    return list(chains.items())[:MAX_PLATOONS_DRAWN]
