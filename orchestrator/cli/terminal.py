"""What the commands print on the terminal (the per-follower summary, comparisons) and the two commands that are
small programs of their own (``demo``, ``vehicle-test``); the exit codes every command shares."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: the command's entry point imports this module before anything heavy
    from rich.console import Console

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_OUTCOME = 0, 1, 2, 3
EXIT_DISK_FULL = 4
"""The disk (or quota) filled up: the run stopped at the first write that failed; every file is complete or absent."""
EXIT_INTERRUPTED = 128 + 2
"""Ctrl-C or SIGTERM: the shell's status of a command ended by SIGINT."""
EXIT_BROKEN_PIPE = 128 + 13
"""The shell's status of a command killed by SIGPIPE: what a command whose reader went away (``| head``) exits with."""

SUMMARY_COLUMNS = (
    ("spacing_error_rms_m", "spacing RMS [m]"),
    ("spacing_error_max_m", "spacing max [m]"),
    ("lateral_deviation_max_m", "lateral max [m]"),
    ("min_gap_m", "min gap [m]"),
    ("pdr", "PDR"),
    ("latency_mean_s", "latency [s]"),
)


def print_summary(metrics: dict[str, Any], run_info: dict[str, Any], console: Console) -> None:
    """Per-follower summary table."""
    from rich.table import Table

    from orchestrator.reporting.console import realtime_factor_text

    followers = metrics.get("followers", {})
    columns = [(k, label) for k, label in SUMMARY_COLUMNS if any(f.get(k) is not None for f in followers.values())]
    table = Table(title=f"{run_info['scenario']} · {run_info['channel']} · seed {run_info['seed']} · "
                        f"{realtime_factor_text(run_info.get('real_time_factor'))}x real time")
    table.add_column("follower")
    for _, label in columns:
        table.add_column(label, justify="right")
    table.add_column("collisions", justify="right")
    for name, f in list(followers.items())[:40]:
        table.add_row(name, *(num(f.get(k)) for k, _ in columns), num(f.get("collisions")))
    if len(followers) > 40:
        table.caption = f"first 40 of {len(followers)} followers; all in metrics.json"
    console.print(table)


def num(value: Any) -> str:
    """A figure for a table: three significant digits, '-' when missing."""
    return "-" if value is None else f"{value:.3g}" if isinstance(value, float) else str(value)


def print_comparison(result: dict[str, Any], console: Console) -> None:
    """The worst follower of each summary metric, one column per variant."""
    from rich.table import Table

    table = Table(title=f"{' vs '.join(result['variants'])} (same scenario, same seed)")
    table.add_column("metric (worst follower)")
    for variant in result["variants"]:
        table.add_column(variant, justify="right")
    for key, values in result["summary"].items():
        table.add_row(key, *(num(values.get(c)) for c in result["variants"]))
    console.print(table)


def demo(out: Path, console: Console, err: Console) -> int:
    """``coopsim demo``: the platoon with ideal, ITS-G5 and ITS-G5 with prediction, compared."""
    from orchestrator.batch.compare import compare
    from orchestrator.scenario import load_scenario

    scenario_path = Path(__file__).resolve().parent.parent / "scenarios" / "platoon.yaml"
    scenario = load_scenario(scenario_path)
    from comms_models import COMMS_MODELS

    variants = ["ideal", "itsg5", "itsg5_predicted"]  # the standard's CAMs as they are, and predicted
    try:
        COMMS_MODELS.get("itsg5")
    except ImportError:
        err.print("the itsg5 channel model is not available; comparing ideal only")
        variants = ["ideal"]
    result = compare(scenario, "story", variants, out, source=str(scenario_path), console=err)
    print_comparison(result, console)
    console.print(f"report: {out / 'comparison.html'}")
    return EXIT_OK if result["ok"] else EXIT_FAILED


def vehicle_test(args: argparse.Namespace, console: Console) -> int:
    """``coopsim vehicle-test``: the handling tests of one preset, a table per tyre model, plots."""
    from rich.table import Table

    from federates.physics.models.tyres import TYRE_MODELS
    from federates.physics.presets import PRESETS
    from orchestrator.vehicle_test import run_vehicle_test

    tyres = [t.strip() for t in args.tyre.split(",") if t.strip()]
    problems = []
    if args.vehicle not in PRESETS.builtin_names():
        problems.append(f"--vehicle: unknown preset '{args.vehicle}'; allowed: {', '.join(PRESETS.builtin_names())}")
    for tyre in tyres:
        if tyre not in TYRE_MODELS.builtin_names():
            problems.append(f"--tyre: unknown tyre model '{tyre}'; allowed: {', '.join(TYRE_MODELS.builtin_names())}")
    if not args.speed > 0:
        problems.append(f"--speed: must be positive, got {args.speed}")
    if problems:
        print("error: " + "\nerror: ".join(problems), file=sys.stderr)
        return EXIT_BAD_INPUT
    out = args.out or Path("runs") / f"vehicle-test-{args.kind}"
    result = run_vehicle_test(args.kind, args.vehicle, args.speed, tyres, out)
    rows = result["rows"]
    table = Table(title=f"{args.kind} · {args.vehicle} · {args.speed:g} m/s")
    # one column per tyre model, one row per metric: stays readable in an 80-column terminal
    table.add_column("metric")
    for row in rows:
        table.add_column(str(row.get("tyre_model", "")), justify="right")
    for key in (k for k in (rows[0] if rows else {}) if k != "tyre_model"):
        table.add_row(key, *(num(row[key]) if not isinstance(row[key], str) else row[key] for row in rows))
    console.print(table)
    console.print(f"plots: {', '.join(result['plots'])}")
    return EXIT_OK
