"""``run.mcap`` from a run directory alone: ``scenario.resolved.yaml`` (robots, platoons, body sizes) and ``trace/``.

The sources (vehicles, ranges, receptions) are each in time order; ``heapq.merge`` interleaves them by time, and
for equal times keeps the order vehicles, ranges, receptions (it is stable), so a run directory always gives the
same file byte for byte. Log and publish times are the simulation time in nanoseconds. The file is written next to
its final name and renamed at the end, so an export that fails leaves no partial ``run.mcap``.
"""

from __future__ import annotations

import heapq
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core import __version__
from core.timebase import seconds_to_ns

from ..recording.safe_files import check_dir, check_file
from ..scenario.extras import MISSING_MESSAGE, mcap_available
from . import schemas
from .sources import (
    DEFAULT_DIMS,
    Record,
    RobotInfo,
    cam_rx_records,
    range_records,
    v2x_log_records,
    vehicle_records,
)

MCAP_NAME = "run.mcap"
_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
"""Compact JSON; a NaN that slipped through is an error rather than an invalid JSON token."""
NO_CAM_BYTES = ("the traces hold no CAM bytes: /v2x/received carries each reception's decoded fields; an ITS-G5 run "
                "writes the frames it sent to v2x.pcap")


class McapUnavailableError(RuntimeError):
    """The optional ``mcap`` package is not installed."""


@dataclass
class McapSummary:
    """What was written: the file and the number of messages per topic."""

    path: Path
    messages: dict[str, int] = field(default_factory=dict)
    receptions_from: str = ""  # "cam_rx" (decoded fields) or "v2x" (the channel log: no decoded fields)
    unresolved: list[str] = field(default_factory=list)  # the run's plug-ins not importable here (none is needed)


def robot_infos(run_dir: Path) -> tuple[dict[int, RobotInfo], Any, list[str]]:
    """The robots of ``run_dir/scenario.resolved.yaml`` (id -> RobotInfo), the scenario, and the run's plug-ins
    that cannot be imported here ("kind 'name'"): the recording needs none of them
    (``orchestrator.metrics.readback``)."""
    from ..metrics.readback import read_back

    scenario, robots, unresolved = read_back(run_dir)
    infos = {r.id: RobotInfo(r.id, r.name, r.platoon, {**DEFAULT_DIMS, **r.dims.plain()})
             for r in robots}
    return infos, scenario, [f"{item.kind} '{item.name}'" for item in unresolved]


def _records(trace: Path, robots: dict[int, RobotInfo], step_s: float, summary: McapSummary) -> Iterator[Record]:
    # an event row lies at most a step behind the row before it (see sources.REORDER_WINDOW_NS): two steps of
    # reordering window keep every file in order and hold only a few steps of receptions
    window_ns = 2 * seconds_to_ns(step_s)
    sources = [vehicle_records(trace / "vehicles.parquet", robots)]
    if (trace / "range.parquet").is_file():
        sources.append(range_records(trace / "range.parquet", robots))
    if (trace / "cam_rx.parquet").is_file():
        sources.append(cam_rx_records(trace / "cam_rx.parquet", robots, window_ns))
        summary.receptions_from = "cam_rx"
    elif (trace / "v2x.parquet").is_file():
        sources.append(v2x_log_records(trace / "v2x.parquet", robots, window_ns))
        summary.receptions_from = "v2x"
    return heapq.merge(*sources, key=lambda record: record.t_ns)


def write_mcap(run_dir: Path, out: Path | None = None) -> McapSummary:
    """Write ``run_dir/run.mcap`` (or ``out``) from the run directory's scenario and traces; return the counts.
    Raises McapUnavailableError without the ``mcap`` package and FileNotFoundError without the vehicles trace."""
    if not mcap_available():
        raise McapUnavailableError(MISSING_MESSAGE)
    from mcap.writer import CompressionType, Writer

    run_dir = Path(run_dir)
    trace = run_dir / "trace"
    if not (trace / "vehicles.parquet").is_file():
        raise FileNotFoundError(f"{trace / 'vehicles.parquet'} is missing: run.mcap is made from the traces")
    robots, scenario, unresolved = robot_infos(run_dir)
    path = Path(out) if out is not None else run_dir / MCAP_NAME
    summary = McapSummary(path, unresolved=unresolved)
    partial = path.with_name(path.name + ".partial")
    check_file(path)  # a link in its place is refused (os.replace below would only replace the link itself)
    check_dir(path.parent)
    partial.unlink(missing_ok=True)  # left by an earlier run that was killed; a link there is removed, not followed
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "wb") as stream:
            writer = Writer(stream, compression=CompressionType.ZSTD)
            writer.start(profile="", library=f"coopsim {__version__}")
            schema_ids: dict[str, int] = {}
            channel_ids: dict[str, int] = {}
            for record in _records(trace, robots, scenario.step_s, summary):
                channel = channel_ids.get(record.topic)
                if channel is None:  # registered at first use: a topic without messages has no channel
                    schema = schema_ids.get(record.schema)
                    if schema is None:
                        schema = schema_ids[record.schema] = writer.register_schema(
                            record.schema, schemas.SCHEMA_ENCODING, schemas.schema_bytes(record.schema))
                    channel = channel_ids[record.topic] = writer.register_channel(
                        record.topic, schemas.MESSAGE_ENCODING, schema)
                sequence = summary.messages.get(record.topic, 0)
                summary.messages[record.topic] = sequence + 1
                data = _ENCODE(record.message).encode()
                writer.add_message(channel, log_time=record.t_ns, data=data, publish_time=record.t_ns,
                                   sequence=sequence)
            writer.add_metadata("coopsim", _metadata(scenario, summary))
            resolved = run_dir / "scenario.resolved.yaml"
            writer.add_attachment(create_time=0, log_time=0, name="scenario.resolved.yaml",
                                  media_type="application/yaml", data=resolved.read_bytes())
            writer.finish()
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return summary


def _metadata(scenario: Any, summary: McapSummary) -> dict[str, str]:
    """The ``coopsim`` metadata record: what the file is, in strings (MCAP metadata is string to string)."""
    return {
        "coopsim_version": __version__,
        "scenario": str(scenario.name),
        "seed": str(scenario.seed),
        "channel": str(scenario.channel.type),
        "frames": "map -> <robot>/odom -> <robot>/base_link (REP-105); base_link at the rear axle, x forward, "
                  "y left, z up (REP-103)",
        "times": "log and publish times are simulation time [ns]",
        "receptions": ("trace/cam_rx.parquet (decoded fields)" if summary.receptions_from == "cam_rx" else
                       "trace/v2x.parquet received rows (no decoded fields: the run did not record cam_rx)"),
        "cam_bytes": NO_CAM_BYTES,
    }
