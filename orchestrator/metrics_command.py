"""``coopsim metrics RUN_DIR``: metrics.json, plots and report.html again, from a run directory alone."""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

EXIT_OK, EXIT_DIFFERS, EXIT_BAD_INPUT = 0, 1, 2


def add_metrics_parser(sub: Any) -> None:
    """The ``metrics`` subcommand."""
    p = sub.add_parser("metrics", help="recompute metrics.json (and plots, report.html) from a run directory alone")
    p.add_argument("run_dir", type=Path, help="a run directory written by 'coopsim run'")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 when the recomputed metrics.json differs from the one there")
    p.add_argument("--no-report", action="store_true", help="write metrics.json only (no plots, no report.html)")


def run_metrics_command(args: argparse.Namespace, console: Console, err: Console) -> int:
    """Recompute; with ``--check`` compare byte for byte with the existing ``metrics.json``."""
    from .metrics import RunData, compute_metrics, metrics_json
    from .runner import write_outputs

    run_dir: Path = args.run_dir
    for needed in ("scenario.resolved.yaml", "trace/vehicles.parquet"):
        if not (run_dir / needed).is_file():
            # plain print: a path is never wrapped
            print(f"error: {run_dir / needed} is missing: {run_dir} is not a complete run directory", file=sys.stderr)
            return EXIT_BAD_INPUT
    run = RunData.load(run_dir)
    for note in run.notes:  # plug-ins of the run that cannot be had here, and what stands in for them
        print(f"note: {note}", file=sys.stderr)
    if args.check:
        text = metrics_json(compute_metrics(run)[0])
        path = run_dir / "metrics.json"
        old = path.read_text(encoding="utf-8") if path.is_file() else ""
        if text == old:
            console.print(f"{path}: identical ({len(text)} bytes)")
            return EXIT_OK
        diff = difflib.unified_diff(old.splitlines(), text.splitlines(), str(path), "recomputed", lineterm="", n=1)
        print("\n".join(list(diff)[:40]))
        return EXIT_DIFFERS
    run_info_path = run_dir / "run.json"
    run_info = json.loads(run_info_path.read_text(encoding="utf-8")) if run_info_path.is_file() else {}
    if run.notes:  # the report says what this recomputation could not have (run.json stays the run's own)
        run_info["notes"] = [*run_info.get("notes", []), *(f"recomputed by 'coopsim metrics': {n}" for n in run.notes)]
    report = not args.no_report
    write_outputs(run, run_info, plots=report and run.scenario.outputs.plots,
                  report=report and run.scenario.outputs.report)
    console.print(f"wrote {run_dir / 'metrics.json'}" + (" and the report" if report else ""))
    return EXIT_OK
