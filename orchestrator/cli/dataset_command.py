"""``coopsim dataset RUN_DIR``: the run's receptions with their ground truth, as a labelled misbehaviour data set
(one file per receiver, like VeReMi; layout in docs/security-research.md)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

EXIT_OK, EXIT_BAD_INPUT = 0, 2
FORMATS = ("jsonl", "parquet")


def add_dataset_parser(sub: Any) -> None:
    """The ``dataset`` subcommand."""
    p = sub.add_parser("dataset", help="write a run's receptions with their ground truth (attack labels, true "
                                       "states, verdicts) as a labelled data set: one file per receiver")
    p.add_argument("run_dir", type=Path, help="a run directory written by 'coopsim run' with attacks: or detection:")
    p.add_argument("--out", type=Path, help="output directory (default: RUN_DIR/dataset)")
    p.add_argument("--format", choices=FORMATS, default="jsonl", help="JSON lines or Parquet (default: %(default)s)")


def run_dataset_command(args: argparse.Namespace, console: Console) -> int:
    """Write the data set; a run directory that cannot give one is bad input (exit 2) naming what is missing."""
    from orchestrator.recording.trace_schema import RunDataError

    run_dir: Path = args.run_dir
    try:
        if not run_dir.is_dir():
            raise RunDataError(run_dir, "is not a directory: a run directory written by 'coopsim run' is expected")
        for needed in ("scenario.resolved.yaml", "trace/vehicles.parquet"):
            if not os.path.lexists(run_dir / needed):
                raise RunDataError(run_dir / needed, f"is missing: {run_dir} is not a complete run directory")
        from orchestrator.reporting.dataset import write_dataset

        out = args.out or run_dir / "dataset"
        meta = write_dataset(run_dir, out, args.format)
    except (RunDataError, ValueError) as exc:  # a ScenarioError is a ValueError: a damaged scenario.resolved.yaml
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"error: {exc.filename or run_dir}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    rows = sum(meta["receivers"].values())
    console.print(f"wrote {out}: {rows:,} receptions in {len(meta['receivers'])} receiver files "
                  f"(receivers/*.{args.format}), ground_truth.{args.format} and run.json")
    return EXIT_OK
