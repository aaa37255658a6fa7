"""The data a comparison page is drawn from: the variants' traces as numpy columns and every follower-predecessor
link of the run (``compare_report``, ``compare_plots``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from core.robots import RobotSpec

Columns = dict[str, np.ndarray]
VEHICLE_COLUMNS = ("t_ns", "robot", "x", "y", "v", "pred_v", "pred_age_s")
V2X_COLUMNS = ("t_ns", "event", "sender", "receiver", "outcome", "latency_s", "generated_ns")


def read_trace(run_dir: Path, name: str, columns: Sequence[str]) -> Columns | None:
    """The given columns of ``trace/<name>.parquet`` (those it has) as numpy arrays, text as object arrays;
    None when the run wrote no such trace."""
    path = Path(run_dir) / "trace" / f"{name}.parquet"
    if not path.exists():
        return None
    present = set(pq.read_schema(path).names)
    tbl = pq.read_table(path, columns=[c for c in columns if c in present])
    out = {}
    for col in tbl.column_names:
        data = tbl.column(col)
        if pa.types.is_dictionary(data.type) or pa.types.is_string(data.type):
            out[col] = np.asarray(data.cast(pa.string()).to_pylist(), dtype=object)
        else:
            out[col] = data.to_numpy()
    return out


def per_robot(trace: Columns) -> dict[int, Columns]:
    """The rows of a vehicles trace grouped by robot, each sorted by time."""
    order = np.lexsort((trace["t_ns"], trace["robot"]))
    robots = trace["robot"][order]
    out: dict[int, Columns] = {}
    for rows in np.split(order, np.flatnonzero(np.diff(robots)) + 1):
        if len(rows):
            out[int(trace["robot"][rows[0]])] = {k: np.asarray(v)[rows] for k, v in trace.items() if k != "robot"}
    return out


def link_receptions(trace: Columns, series: Mapping[int, Columns], pairs: set[tuple[int, int]]) -> Columns:
    """The receptions due on the (receiver, sender) ``pairs`` of a v2x trace (its rx rows, lost ones included):
    ``distance_m`` between sender and receiver when the message was generated (the vehicles trace's last sample
    at or before it), ``received`` (bool), and ``gap_s``, the times between consecutive successful receptions on
    each link."""
    keys = np.asarray(sorted((r << 32) | s for r, s in pairs), np.int64)
    receiver = np.asarray(trace["receiver"], np.int64)
    sender = np.asarray(trace["sender"], np.int64)
    rx = (trace["event"] == "rx") & np.isin((receiver << 32) | sender, keys)
    t = np.asarray(trace["t_ns"], np.int64)[rx]
    at = np.asarray(trace.get("generated_ns", trace["t_ns"]), np.int64)[rx]
    receiver, sender = receiver[rx], sender[rx]
    received = np.asarray(trace["outcome"][rx] == "received", bool)
    def where(who: np.ndarray) -> np.ndarray:
        xy = np.full((len(who), 2), np.nan)
        for rid in np.unique(who):
            s = series.get(int(rid))
            if s is None or not len(s["t_ns"]):
                continue
            mine = who == rid
            k = np.clip(np.searchsorted(s["t_ns"], at[mine], side="right") - 1, 0, len(s["t_ns"]) - 1)
            xy[mine] = np.column_stack((s["x"][k], s["y"][k]))
        return xy

    distance = np.hypot(*(where(receiver) - where(sender)).T)
    known = np.isfinite(distance)
    link = ((receiver << 32) | sender)[received]
    order = np.lexsort((t[received], link))
    same = link[order][1:] == link[order][:-1]
    return {"distance_m": distance[known], "received": received[known],
            "gap_s": np.diff(t[received][order])[same] / 1e9}


def ages_of_information(series: Mapping[int, Columns], followers: set[int]) -> np.ndarray:
    """Every control step's age of the predecessor data (``pred_age_s``) of the ``followers``, pooled."""
    ages = [s["pred_age_s"] for rid, s in series.items() if rid in followers and "pred_age_s" in s]
    values = np.concatenate(ages) if ages else np.zeros(0)
    return values[np.isfinite(values)]


@dataclass(frozen=True)
class Link:
    """A follower and its predecessor while the link existed, by name and station id (names everywhere, ids where
    the radio speaks)."""

    platoon: str
    follower: int
    predecessor: int
    follower_name: str
    predecessor_name: str
    from_s: float = 0.0
    to_s: float = float("inf")


def robot_specs(run_dir: Path) -> list[RobotSpec]:
    """The robots of a variant's run directory (from its resolved scenario)."""
    from ..metrics import RunData

    return RunData.load(run_dir).robots


def chain(robots: Sequence[RobotSpec], metrics: Mapping[str, Any] | None = None) -> list[Link]:
    """Every link of the run, joiners' included, grouped by platoon: each follower's predecessors over time from
    ``metrics.json`` (``followers[name].following``, by the platoon it spent the longest time in); without them
    (an old run directory) the predecessors as spawned."""
    from ..reporting.roles_layout import platoon_groups

    ids = {r.name: r.id for r in robots}
    followers = (metrics or {}).get("followers") or {}
    links: list[Link] = []
    for platoon, names in platoon_groups(robots, (metrics or {}).get("roles")):
        for name in names:
            stretches = (followers.get(name) or {}).get("following")
            if stretches is None:
                r = next(r for r in robots if r.name == name)
                spawned = next((p.name for p in robots if p.id == r.predecessor), None)
                stretches = [] if spawned is None else [{"predecessor": spawned, "from_s": 0.0, "to_s": float("inf")}]
            for k in stretches:
                pred = str(k["predecessor"])
                if pred in ids:
                    links.append(Link(platoon, ids[name], ids[pred], name, pred, float(k["from_s"]),
                                      float(k["to_s"])))
    return links
