"""``coopsim metrics RUN_DIR``: metrics.json, plots and report.html again, from a run directory alone."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

EXIT_OK, EXIT_DIFFERS, EXIT_BAD_INPUT, EXIT_DISK_FULL = 0, 1, 2, 4

REPORT_FILES = ("metrics.json", "report.html")
"""What ``coopsim metrics`` writes into the run directory (and ``plots/*.png``)."""


def add_metrics_parser(sub: Any) -> None:
    """The ``metrics`` subcommand."""
    p = sub.add_parser("metrics", help="recompute metrics.json (and plots, report.html) from a run directory alone; "
                                       "the directory is untrusted input: checked as read, never written through "
                                       "links")
    p.add_argument("run_dir", type=Path, help="a run directory written by 'coopsim run'")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 when the recomputed metrics.json differs from the one there")
    p.add_argument("--no-report", action="store_true", help="write metrics.json only (no plots, no report.html)")


def run_metrics_command(args: argparse.Namespace, console: Console, err: Console) -> int:
    """Recompute; with ``--check`` compare byte for byte with the existing ``metrics.json``. A run directory is
    untrusted input: a missing, damaged or unexpected file is bad input (exit 2) naming the file and what is wrong,
    a link where an output goes is refused (exit 2), and a full disk is exit 4 with nothing half-written left."""
    from orchestrator.recording.safe_files import OutputPathError, is_disk_full
    from orchestrator.recording.trace_schema import RunDataError

    try:
        return _recompute(args, console)
    except (RunDataError, OutputPathError) as exc:
        print(f"error: {exc}", file=sys.stderr)  # plain print: a path is never wrapped
        return EXIT_BAD_INPUT
    except OSError as exc:
        where = exc.filename or args.run_dir
        if is_disk_full(exc):
            print(f"error: the disk is full: {where} could not be written ({exc.strerror or exc}); what was not "
                  "written whole is absent", file=sys.stderr)
            return EXIT_DISK_FULL
        print(f"error: {where}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _recompute(args: argparse.Namespace, console: Console) -> int:
    from orchestrator.metrics import RunData, compute_metrics, metrics_json
    from orchestrator.recording.safe_files import check_outputs
    from orchestrator.recording.trace_schema import RunDataError, expected_columns, open_trace
    from orchestrator.runner import write_outputs

    run_dir: Path = args.run_dir
    if not run_dir.is_dir():
        raise RunDataError(run_dir, "is not a directory: a run directory written by 'coopsim run' is expected")
    for needed in ("scenario.resolved.yaml", "trace/vehicles.parquet"):
        if not os.path.lexists(run_dir / needed):
            raise RunDataError(run_dir / needed, f"is missing: {run_dir} is not a complete run directory")
    if not (run_dir / "scenario.resolved.yaml").is_file():
        raise RunDataError(run_dir / "scenario.resolved.yaml", "is not a regular file")
    report = not args.no_report
    if not args.check:  # before any work: a link where an output goes is refused, not followed
        check_outputs(run_dir, REPORT_FILES if report else REPORT_FILES[:1], ("plots",) if report else ())
    trace_dir = run_dir / "trace"
    for path in sorted(trace_dir.iterdir()):  # every trace the metrics read: readable and of its contract's shape
        if path.suffix == ".parquet" and expected_columns(path.stem) is not None:
            open_trace(path)
    run_info = {} if args.check else read_run_info(run_dir / "run.json")
    run = RunData.load(run_dir)
    for note in run.notes:  # plug-ins of the run that cannot be had here, and what stands in for them
        print(f"note: {note}", file=sys.stderr)
    if args.check:
        text = metrics_json(compute_metrics(run)[0])
        path = run_dir / "metrics.json"
        old = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
        if text == old:
            console.print(f"{path}: identical ({len(text)} bytes)")
            return EXIT_OK
        diff = difflib.unified_diff(old.splitlines(), text.splitlines(), str(path), "recomputed", lineterm="", n=1)
        print("\n".join(list(diff)[:40]))
        return EXIT_DIFFERS
    if run.notes:  # the report says what this recomputation could not have (run.json stays the run's own)
        run_info["notes"] = [*run_info.get("notes", []), *(f"recomputed by 'coopsim metrics': {n}" for n in run.notes)]
    write_outputs(run, run_info, plots=report and run.scenario.outputs.plots,
                  report=report and run.scenario.outputs.report)
    console.print(f"wrote {run_dir / 'metrics.json'}" + (" and the report" if report else ""))
    return EXIT_OK


RUN_INFO_KEYS: dict[str, tuple[type, ...]] = {
    "scenario": (str,), "seed": (int,), "channel": (str,), "controllers": (list,), "sim_time_s": (int, float),
    "wall_time_s": (int, float), "real_time_factor": (int, float, type(None)), "coopsim_version": (str,),
    "digest": (str,), "notes": (list,), "status": (str,), "outcomes": (dict,),
}
"""The keys of ``run.json`` the report shows, with the JSON types ``coopsim run`` writes them as."""


def read_run_info(path: Path) -> dict[str, Any]:
    """``run.json`` as the report needs it ({} when absent); anything but what ``coopsim run`` writes is a
    RunDataError naming the key."""
    from orchestrator.recording.trace_schema import RunDataError

    if not os.path.lexists(path):
        return {}
    if not path.is_file():
        raise RunDataError(path, "is not a regular file")
    if path.stat().st_size > 64 * 2**20:
        raise RunDataError(path, f"is {path.stat().st_size} bytes: far more than any run.json")
    try:
        info = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RunDataError(path, f"is not UTF-8 text (byte offset {exc.start})") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise RunDataError(path, f"is not valid JSON ({exc})"[:300]) from None
    if not isinstance(info, dict):
        raise RunDataError(path, f"holds a JSON {type(info).__name__}, not an object")
    for key, types in RUN_INFO_KEYS.items():
        if key in info and (not isinstance(info[key], types) or isinstance(info[key], bool)):
            raise RunDataError(path, f"'{key}' is {json.dumps(info[key])[:80]}, not what coopsim run writes there")
    for key in ("controllers", "notes"):
        if any(not isinstance(item, str) for item in info.get(key, [])):
            raise RunDataError(path, f"'{key}' must be a list of strings")
    problem = _outcomes_problem(info.get("outcomes") or {})
    if problem:
        raise RunDataError(path, f"'outcomes': {problem}")
    return info


def _outcomes_problem(outcomes: dict[str, Any]) -> str | None:
    """What is wrong with ``run.json``'s ``outcomes`` for the report's banner (``outcomes.describe``), or None."""
    for key in ("silent_stations", "unstable", "unmet_requests"):
        value = outcomes.get(key) or []
        if not isinstance(value, list) or any(not isinstance(item, str) for item in value):
            return f"'{key}' must be a list of strings"
    first = outcomes.get("first_contact")
    if first:
        collisions = outcomes.get("collisions")
        robots = first.get("robots") if isinstance(first, dict) else None
        if (not isinstance(robots, list) or len(robots) < 2 or not isinstance(first.get("t_s"), int | float)
                or isinstance(collisions, bool) or not isinstance(collisions, int)):
            return "'first_contact' must name two robots and a time, with 'collisions' a count"
    return None
