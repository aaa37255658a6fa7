"""A labelled misbehaviour data set from a run directory, in a layout like VeReMi's (van der Heijden, Lukaseder,
Kargl, SecureComm 2018): one file per receiver with every message it received, and the ground truth of the run.

The receptions are the ``rx`` / ``received`` rows of ``trace/v2x.parquet``; what each message claims and the
detector's verdict on it come from ``trace/misbehaviour.parquet`` (written by runs with ``attacks:`` or
``detection:``), the sender's true state at the generation time from ``trace/vehicles.parquet`` (the ``state``
columns, linearly interpolated when the trace is sampled coarser than the channel's step). Every value is SI in
the run's local frame. The layout is documented in ``docs/security-research.md`` ("A labelled data set").
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from comms_models.misbehaviour.checks import CHECKS
from core.params import is_file_name

from ..metrics.rundata import RunData
from ..recording.trace_schema import RunDataError

FORMATS = ("jsonl", "parquet")
CLAIMED = {"x": "pos_x_m", "y": "pos_y_m", "v": "speed_mps", "yaw": "heading_rad", "a": "accel_mps2",
           "yaw_rate": "yaw_rate_radps"}
"""Delivery columns -> data-set columns (a CAM's content); a platooning message claims ``desired_accel_mps2``."""
TRUE = {"x": "true_pos_x_m", "y": "true_pos_y_m", "v": "true_speed_mps", "yaw": "true_heading_rad",
        "a": "true_accel_mps2", "yaw_rate": "true_yaw_rate_radps"}
"""Vehicle state columns -> data-set columns (the physical sender's true state when it really generated the
message, ``true_send_time_ns``: a delayed message claims an older ``send_time_ns``)."""
_KEYS = ["receiver", "sender", "t_ns", "message"]


def write_dataset(run_dir: Path, out: Path, fmt: str = "jsonl") -> dict[str, Any]:
    """Write the data set of ``run_dir`` into ``out``; returns a summary (files, rows per receiver). Raises
    ``RunDataError`` for a run directory that cannot give one."""
    run = RunData.load(run_dir)
    for name in ("v2x", "misbehaviour"):
        if not run.path(name).exists():
            why = ("a run with V2X (channel:) and 'attacks:' or 'detection:' writes it" if name == "misbehaviour"
                   else "a run with V2X writes it")
            raise RunDataError(run.path(name), f"is missing: {why}")
    names = {spec.id: spec.name for spec in run.robots}
    attacks = _attacks(run, names)
    rx = _receptions(run)
    rx.update(_true_state(run, rx["sender"], rx["true_send_time_ns"]))  # at the real time, not the claimed one
    tx = _transmissions(run, attacks)
    tx.update(_true_state(run, tx["sender"], tx["true_send_time_ns"]))
    out.mkdir(parents=True, exist_ok=True)
    (out / "receivers").mkdir(exist_ok=True)
    counts: dict[str, int] = {}
    receiver = rx.pop("receiver")
    for rid in np.unique(receiver):
        rows = np.flatnonzero(receiver == rid)
        name = names.setdefault(int(rid), f"robot{int(rid)}")  # robots spawned by a federate (SUMO) are unnamed
        counts[name] = len(rows)
        _write({"receiver": receiver[rows], **{k: v[rows] for k, v in rx.items()}},
               _receiver_file(out, name, int(rid), fmt), fmt)
    _write(tx, out / f"ground_truth.{fmt}", fmt)
    meta = {"source": str(run_dir), "scenario": getattr(run.scenario, "name", None),
            "seed": getattr(run.scenario, "seed", None), "format": fmt, "checks": list(CHECKS),
            "detection": _detection(run), "robots": {str(k): v for k, v in sorted(names.items())},
            "attacks": attacks, "receivers": counts}
    (out / "run.json").write_text(json.dumps(meta, indent=1, default=str) + "\n", encoding="utf-8")
    return meta


def _receiver_file(out: Path, name: str, rid: int, fmt: str) -> Path:
    """``out/receivers/<name>.<fmt>``; a name that is not one plain file name (a run directory written by an older
    coopsim, whose scenario checked less) is replaced by ``robot<id>``, so the data set stays inside ``out``."""
    return out / "receivers" / f"{name if is_file_name(name) else f'robot{rid}'}.{fmt}"


def _attacks(run: RunData, names: Mapping[int, str]) -> list[dict[str, Any]]:
    """The run's attack entries with their label (index + 1) and their robot's id."""
    ids = {name: rid for rid, name in names.items()}
    out = []
    for k, entry in enumerate(getattr(run.scenario, "attacks", None) or []):
        params = entry.params.model_dump() if hasattr(entry.params, "model_dump") else dict(entry.params or {})
        out.append({"label": k + 1, "type": entry.type, "robot": entry.robot, "robot_id": ids.get(entry.robot),
                    "from_s": entry.from_s, "to_s": entry.to_s, "params": params})
    return out


def _detection(run: RunData) -> dict[str, Any] | None:
    block = getattr(run.scenario, "detection", None)
    return None if block is None else json.loads(json.dumps(block.model_dump(mode="json"), default=str))


def _table(run: RunData, name: str, columns: Sequence[str], rx_only: bool = False) -> pa.Table:
    """A trace's columns as a table (the dictionary-coded ones as strings; ``attack``, which only a channel that
    carries attacks writes, 0 when absent)."""
    keep = (lambda c: (c["event"] == "rx") & (c["outcome"] == "received")) if rx_only else None
    cols = dict(run.scan(name, ["event", "outcome", *columns] if rx_only else columns, keep) or {})
    n = len(cols["t_ns"])
    if "attack" in columns and "attack" not in cols:
        cols["attack"] = np.zeros(n, np.int64)
    if "true_generated_ns" in columns and "true_generated_ns" not in cols:  # no attacks: every time is true
        cols["true_generated_ns"] = np.asarray(cols["generated_ns"], np.int64)
    missing = [c for c in columns if c not in cols]
    if missing:
        raise RunDataError(run.path(name), f"lacks the column(s) {', '.join(missing)}")
    return pa.table({c: pa.array(cols[c].astype(str) if cols[c].dtype == object else cols[c]) for c in columns})


def _receptions(run: RunData) -> dict[str, np.ndarray]:
    """Every reception with what it claims and its verdict, in (receiver, receive time) order."""
    v2x = _table(run, "v2x", ["t_ns", "receiver", "sender", "generated_ns", "message", "rx_power_dbm", "attack",
                              "true_generated_ns"], rx_only=True)
    mb_cols = ["t_ns", "receiver", "sender", "message", "checks", "verdict", "dropped", *CLAIMED, "u_des"]
    mb = _table(run, "misbehaviour", mb_cols)
    mb = mb.append_column("delivered", pa.array(np.ones(mb.num_rows, bool)))
    joined = v2x.join(mb, keys=_KEYS, join_type="left outer").sort_by([("receiver", "ascending"),
                                                                       ("t_ns", "ascending")])
    col = {c: joined.column(c).to_numpy(zero_copy_only=False) for c in joined.column_names}
    n = joined.num_rows
    pm = col["message"] == "pm"
    delivered = pc.fill_null(joined.column("delivered"), False).to_numpy(zero_copy_only=False)
    attack = np.asarray(col["attack"], np.int64) if "attack" in col else np.zeros(n, np.int64)
    out: dict[str, np.ndarray] = {
        "receiver": np.asarray(col["receiver"], np.int64), "rcv_time_ns": np.asarray(col["t_ns"], np.int64),
        "send_time_ns": np.asarray(col["generated_ns"], np.int64),
        "true_send_time_ns": np.asarray(col["true_generated_ns"], np.int64),
        "sender_station_id": col["sender"].astype(np.int64),
        "message": col["message"].astype(str), "rx_power_dbm": _floats(col["rx_power_dbm"]),
    }
    for src, dst in CLAIMED.items():  # a platooning message's row carries the CAM's kinematics: not its claim
        out[dst] = np.where(pm | ~delivered, np.nan, _floats(col[src]))
    out["desired_accel_mps2"] = np.where(pm & delivered, _floats(col["u_des"]), np.nan)
    out["attack"] = attack
    out["attack_type"] = np.array(["none", *(a.type for a in (getattr(run.scenario, "attacks", None) or []))],
                                  object)[np.clip(attack, 0, None)].astype(str)
    out["sender"] = _true_sender(run, out["sender_station_id"], attack)
    out["delivered"] = delivered
    detected = delivered & (_detection(run) is not None)
    checks = np.where(delivered, pc.fill_null(joined.column("checks"), 0).to_numpy(zero_copy_only=False), 0)
    out["checks"] = checks.astype(np.int64)
    verdict = col["verdict"].astype(object)
    out["verdict"] = np.where(detected, verdict, "").astype(str)
    out["dropped"] = col["dropped"].astype(object) == "yes"
    for k, name in enumerate(CHECKS):
        out[f"fail_{name}"] = ((out["checks"] >> k) & 1).astype(bool)
    return out


def _floats(values: np.ndarray) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], np.float64) if values.dtype == object else \
        np.asarray(values, np.float64)


def _true_sender(run: RunData, station: np.ndarray, attack: np.ndarray) -> np.ndarray:
    """The robot that physically sent each frame: an attack's robot for the frames it forged (a ghost's station id
    is fabricated), else the station id."""
    ids = {spec.name: spec.id for spec in run.robots}
    robot = np.array([-1, *(ids.get(a.robot, -1) for a in (getattr(run.scenario, "attacks", None) or []))],
                     np.int64)
    return np.where(attack > 0, robot[np.clip(attack, 0, len(robot) - 1)], station)


def _transmissions(run: RunData, attacks: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Every frame a station transmitted (``tx`` rows: sent, or dropped by DCC before the air), labelled."""
    cols = dict(run.scan("v2x", ["t_ns", "event", "sender", "generated_ns", "outcome", "message", "attack",
                                 "true_generated_ns"], lambda c: c["event"] == "tx") or {})
    attack = np.asarray(cols["attack"], np.int64) if "attack" in cols else np.zeros(len(cols["t_ns"]), np.int64)
    station = np.asarray(cols["sender"], np.int64)
    types = np.array(["none", *(a["type"] for a in attacks)], object)
    gen = np.asarray(cols["generated_ns"], np.int64)
    true_gen = np.asarray(cols["true_generated_ns"], np.int64) if "true_generated_ns" in cols else gen
    return {"tx_time_ns": np.asarray(cols["t_ns"], np.int64), "send_time_ns": gen, "true_send_time_ns": true_gen,
            "sender": _true_sender(run, station, attack), "sender_station_id": station,
            "message": cols["message"].astype(str), "outcome": cols["outcome"].astype(str), "attack": attack,
            "attack_type": types[np.clip(attack, 0, None)].astype(str)}


def _true_state(run: RunData, robot: np.ndarray, t_ns: np.ndarray) -> dict[str, np.ndarray]:
    """Each robot's true state at each time (linear between trace samples, the heading unwrapped; NaN outside the
    robot's samples or for an id that is no robot)."""
    out = {dst: np.full(len(robot), np.nan) for dst in TRUE.values()}
    series = run.series(np.unique(robot[robot >= 0]).tolist(), list(TRUE))
    for rid, s in series.items():
        rows = np.flatnonzero(robot == rid)
        if not len(rows) or not len(s.t_ns):
            continue
        t = np.asarray(t_ns[rows], np.float64)
        inside = (t >= s.t_ns[0]) & (t <= s.t_ns[-1])
        for src, dst in TRUE.items():
            values = np.asarray(s.cols[src], np.float64)
            if src == "yaw":
                values = np.unwrap(values)
            got = np.interp(t, np.asarray(s.t_ns, np.float64), values)
            if src == "yaw":
                got = (got + math.pi) % (2 * math.pi) - math.pi
            out[dst][rows] = np.where(inside, got, np.nan)
    return out


def _write(columns: Mapping[str, np.ndarray], path: Path, fmt: str) -> None:
    """One file: Parquet (typed columns), or JSON lines (one object per row, NaN as null)."""
    table = pa.table({name: pa.array(values) for name, values in columns.items()})
    if fmt == "parquet":
        pq.write_table(table, path)
        return
    names = table.column_names
    data = [table.column(c).to_pylist() for c in names]
    with path.open("w", encoding="utf-8") as f:
        for row in zip(*data, strict=True):
            f.write(json.dumps({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                                for k, v in zip(names, row, strict=True)}, separators=(",", ":")) + "\n")
