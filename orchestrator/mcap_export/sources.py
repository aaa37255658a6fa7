"""The traces of a run directory as time-ordered streams of messages for ``run.mcap``.

Each source reads its Parquet file batch by batch (``BATCH_ROWS`` rows at most, never a whole file), so memory is
bounded however long the run was, and yields ``Record``s in time order. The robot-indexed traces (vehicles, range)
are sampled in time order: a row whose time goes backwards is an error naming the file and the row. The event
traces (``cam_rx``, the V2X log) may hold a row a little behind the one before; a bounded window puts them in order.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from . import messages as msg
from . import schemas

BATCH_ROWS = 16_384
"""Rows read at once from a trace (a few MB of Python values at most)."""


@dataclass(frozen=True)
class Record:
    """One message to write: its topic, schema name and content at simulation time ``t_ns``."""

    t_ns: int
    topic: str
    schema: str
    message: dict[str, Any]


@dataclass(frozen=True)
class RobotInfo:
    """What the scene needs of a robot: its name, id, platoon and body dimensions."""

    id: int
    name: str
    platoon: int
    dims: Mapping[str, float]


DEFAULT_DIMS = {"length_m": 0.5, "width_m": 0.2, "rear_overhang_m": 0.1}
"""Body of a robot whose scenario entry gives no dimensions, or that the scenario does not list (only to draw it)."""


class TraceOrderError(ValueError):
    """A trace's rows are not in time order."""


def _rows(path: Path, columns: Sequence[str]) -> Iterator[dict[str, list[Any]]]:
    """The columns of ``path`` (those it has) as Python lists, batch by batch."""
    parquet = pq.ParquetFile(path)
    have = [c for c in columns if c in parquet.schema_arrow.names]
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=have):
        yield batch.to_pydict()


def _check_order(path: Path, row: int, t_ns: int, last: int) -> None:
    if t_ns < last:
        raise TraceOrderError(f"{path}: row {row} has t_ns = {t_ns}, before the previous row's {last}; run.mcap "
                              "needs each trace in time order")


REORDER_WINDOW_NS = 1_000_000_000
"""Default of how far back in time an event row may lie behind an earlier row of its file and still be put in
order. The V2X log holds events at their own times, published at the end of the step they fall in, so a row can
be up to a step behind the one before it: the export passes two steps of the scenario."""


def in_time_order(records: Iterator[Record], window_ns: int = REORDER_WINDOW_NS) -> Iterator[Record]:
    """``records`` sorted by time, for a stream whose disorder stays within ``window_ns``: a record is held until
    one ``window_ns`` later arrives (memory: the records of one window). Equal times keep their order. A record
    further behind than the window is written when it comes (out of order; MCAP readers sort by log time)."""
    held: list[tuple[int, int, Record]] = []
    for seq, record in enumerate(records):
        heapq.heappush(held, (record.t_ns, seq, record))
        while held[0][0] <= record.t_ns - window_ns:
            yield heapq.heappop(held)[2]
    while held:
        yield heapq.heappop(held)[2]


VEHICLE_COLUMNS = ("t_ns", "robot", "x", "y", "yaw", "v", "yaw_rate", "est_x", "est_y", "est_yaw", "est_v")


def vehicle_records(path: Path, robots: Mapping[int, RobotInfo]) -> Iterator[Record]:
    """Per instant of ``trace/vehicles.parquet``: ``/scene`` when the set of robots changed (the first instant
    included), ``/tf``, then each robot's ``/<robot>/pose`` and ``/<robot>/odom``. An instant may straddle two
    batches, so its rows are collected until the time changes."""
    pending: list[tuple[Any, ...]] = []
    pending_t = -1
    live: list[int] = []
    row = 0
    for cols in _rows(path, VEHICLE_COLUMNS):
        nan = [float("nan")] * len(cols["t_ns"])
        est = [cols.get(k, nan) for k in ("est_x", "est_y", "est_yaw", "est_v")]
        for values in zip(cols["t_ns"], cols["robot"], cols["x"], cols["y"], cols["yaw"], cols["v"],
                          cols["yaw_rate"], *est, strict=True):
            t_ns = values[0]
            _check_order(path, row, t_ns, pending_t)
            row += 1
            if t_ns != pending_t and pending:
                yield from _instant(pending_t, pending, robots, live)
                pending = []
            pending_t = t_ns
            pending.append(values)
    if pending:
        yield from _instant(pending_t, pending, robots, live)


def _instant(t_ns: int, rows: list[tuple[Any, ...]], robots: Mapping[int, RobotInfo],
             live: list[int]) -> Iterator[Record]:
    ids = [int(r[1]) for r in rows]
    if ids != live:  # a spawn or despawn (or the first instant): the whole scene again, the gone ones deleted
        now = set(ids)
        gone = [_info(robots, rid).name for rid in live if rid not in now]
        entities = [msg.scene_entity(t_ns, info.name, info.id, info.platoon, info.dims)
                    for info in (_info(robots, rid) for rid in ids)]
        live[:] = ids
        yield Record(t_ns, "/scene", schemas.SCENE_UPDATE, msg.scene_update(t_ns, entities, gone))
    named = [(_info(robots, r[1]).name, r) for r in rows]
    yield Record(t_ns, "/tf", schemas.FRAME_TRANSFORMS,
                 msg.transforms(t_ns, [(name, (r[2], r[3], r[4]), (r[7], r[8], r[9])) for name, r in named]))
    for name, (_, _, x, y, yaw, _v, yaw_rate, est_x, est_y, est_yaw, est_v) in named:
        yield Record(t_ns, f"/{name}/pose", schemas.POSE_IN_FRAME, msg.pose_in_frame(t_ns, x, y, yaw))
        yield Record(t_ns, f"/{name}/odom", schemas.ODOMETRY,
                     msg.odometry(t_ns, name, est_x, est_y, est_yaw, est_v, yaw_rate))


def _info(robots: Mapping[int, RobotInfo], rid: int) -> RobotInfo:
    """A robot of the scenario; one the trace has but the scenario does not (a plug-in's) is named by its id."""
    info = robots.get(int(rid))
    if info is None:
        return RobotInfo(int(rid), f"robot_id_{int(rid)}", 0, DEFAULT_DIMS)
    return info


RANGE_COLUMNS = ("t_ns", "robot", "range_m", "range_rate_mps", "bearing_rad", "target")


def range_records(path: Path, robots: Mapping[int, RobotInfo]) -> Iterator[Record]:
    """``/<robot>/range`` for each row of ``trace/range.parquet``."""
    names = {rid: info.name for rid, info in robots.items()}
    last, row = -1, 0
    for cols in _rows(path, RANGE_COLUMNS):
        for t_ns, rid, range_m, rate, bearing, target in zip(*(cols[c] for c in RANGE_COLUMNS), strict=True):
            _check_order(path, row, t_ns, last)
            last, row = t_ns, row + 1
            name = _info(robots, rid).name
            yield Record(t_ns, f"/{name}/range", schemas.RANGE,
                         msg.range_reading(t_ns, name, range_m, rate, bearing, target, names))


RECEPTIONS_TOPIC = "/v2x/received"
CAM_RX_COLUMNS = ("t_ns", "receiver", "sender", "generated_ns", "received_ns", *msg.DECODED_FIELDS)


def cam_rx_records(path: Path, robots: Mapping[int, RobotInfo], window_ns: int = REORDER_WINDOW_NS
                   ) -> Iterator[Record]:
    """``/v2x/received`` for each row of ``trace/cam_rx.parquet`` (decoded fields included; one the file lacks
    is left out). The log time is the row's ``t_ns``, the instant the receiver was handed the message."""
    return in_time_order(_cam_rx(path, robots), window_ns)


def _cam_rx(path: Path, robots: Mapping[int, RobotInfo]) -> Iterator[Record]:
    names = {rid: info.name for rid, info in robots.items()}
    for cols in _rows(path, CAM_RX_COLUMNS):
        n = len(cols["t_ns"])
        decoded_cols = {k: cols.get(k, [float("nan")] * n) for k in msg.DECODED_FIELDS}
        for i in range(n):
            t_ns = cols["t_ns"][i]
            decoded = {k: v[i] for k, v in decoded_cols.items()}
            yield Record(t_ns, RECEPTIONS_TOPIC, schemas.V2X_RECEPTION,
                         msg.reception(t_ns, cols["sender"][i], cols["receiver"][i], cols["generated_ns"][i],
                                       cols["received_ns"][i], decoded, names))


V2X_COLUMNS = ("t_ns", "event", "sender", "receiver", "generated_ns", "outcome")


def v2x_log_records(path: Path, robots: Mapping[int, RobotInfo], window_ns: int = REORDER_WINDOW_NS
                    ) -> Iterator[Record]:
    """``/v2x/received`` from the channel log when the run has no ``cam_rx`` trace: each "rx" row whose outcome is
    "received", without ``decoded`` (the log holds no decoded fields). The log's rows are each at their own
    time, which may lie up to a step behind the row before: they are put in order (``in_time_order``)."""
    return in_time_order(_v2x_received(path, robots), window_ns)


def _v2x_received(path: Path, robots: Mapping[int, RobotInfo]) -> Iterator[Record]:
    names = {rid: info.name for rid, info in robots.items()}
    for cols in _rows(path, V2X_COLUMNS):
        for t_ns, event, sender, receiver, generated_ns, outcome in zip(*(cols[c] for c in V2X_COLUMNS),
                                                                         strict=True):
            if event == "rx" and outcome == "received":
                yield Record(t_ns, RECEPTIONS_TOPIC, schemas.V2X_RECEPTION,
                             msg.reception(t_ns, sender, receiver, generated_ns, t_ns, None, names))
