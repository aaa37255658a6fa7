"""``coopsim mcap RUN_DIR``: ``run.mcap`` from a run directory alone (``scenario.resolved.yaml`` and ``trace/``), for
a run made without ``outputs.mcap`` or stopped before its outputs were written."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

EXIT_OK, EXIT_BAD_INPUT, EXIT_DISK_FULL = 0, 2, 4


def add_mcap_parser(sub: Any) -> None:
    """The ``mcap`` subcommand."""
    p = sub.add_parser("mcap", help="write run.mcap (poses, odometry, ranges, V2X receptions, scene) from a run "
                                    "directory, for Foxglove or Lichtblick")
    p.add_argument("run_dir", type=Path, help="a run directory written by 'coopsim run'")
    p.add_argument("--out", type=Path, help="the MCAP file to write (default: RUN_DIR/run.mcap)")


def run_mcap_command(args: argparse.Namespace, console: Console) -> int:
    """Write the file; a missing package, an incomplete run directory or a trace out of time order is bad input
    (exit 2, one line, no traceback)."""
    from ..scenario.extras import MISSING_MESSAGE, mcap_available

    run_dir: Path = args.run_dir
    if not mcap_available():
        print(f"error: {MISSING_MESSAGE}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for needed in ("scenario.resolved.yaml", "trace/vehicles.parquet"):
        if not (run_dir / needed).is_file():
            # plain print: a path is never wrapped
            print(f"error: {run_dir / needed} is missing: {run_dir} is not a complete run directory", file=sys.stderr)
            return EXIT_BAD_INPUT
    import pyarrow as pa

    from ..recording.safe_files import OutputPathError, is_disk_full
    from ..recording.trace_schema import RunDataError
    from .export import write_mcap
    from .sources import TraceOrderError

    try:
        summary = write_mcap(run_dir, args.out)
    except (TraceOrderError, RunDataError, OutputPathError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except pa.ArrowException as exc:  # a damaged trace the readers met
        print(f"error: {run_dir / 'trace'}: a trace cannot be read ({exc})", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"error: cannot write {args.out or run_dir / 'run.mcap'}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_DISK_FULL if is_disk_full(exc) else EXIT_BAD_INPUT
    total = sum(summary.messages.values())
    note = "" if summary.receptions_from != "v2x" else (" (receptions from the V2X log: this run recorded no "
                                                         "cam_rx, so they carry no decoded fields)")
    console.print(f"wrote {summary.path}: {total} messages on {len(summary.messages)} topics{note}",
                  highlight=False, soft_wrap=True)
    if summary.unresolved:  # said, so that nobody wonders whether the recording lacks something: it does not
        verb = "is" if len(summary.unresolved) == 1 else "are"
        print(f"note: {', '.join(summary.unresolved)} of the run {verb} not available here; the recording needs only "
              "the traces and the scenario's robots, and is complete without", file=sys.stderr)
    return EXIT_OK
