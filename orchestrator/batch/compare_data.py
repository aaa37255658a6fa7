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
VEHICLE_COLUMNS = ("t_ns", "robot", "x", "y", "v", "pred_v")
V2X_COLUMNS = ("t_ns", "event", "sender", "receiver", "outcome", "latency_s")


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
