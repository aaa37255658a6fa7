"""The ``coopsim sweep`` subcommand: its arguments, its run, and its summary on the terminal."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .args import add_scheduler_argument, add_sweep_parser
from .criteria import parse_criterion

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def run_sweep_command(args: argparse.Namespace, console: Any) -> int:
    """Run ``coopsim sweep`` from parsed arguments; returns the exit code (0 all points ok, 1 some point failed,
    2 bad input, reported before any run)."""
    from ..reporting.console import PipeConsole
    from ..scenario import Problem, ScenarioError, parse_scenario
    from .dask_runner import ClusterError
    from .grid import parse_param, scenario_text
    from .sweep import sweep

    source = str(args.scenario)
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    err = PipeConsole(stderr=True)
    try:
        if not metrics:
            raise ScenarioError(source, [Problem("", "--metrics: no metric named")])
        try:
            criterion = parse_criterion(args.criterion)
        except ValueError as exc:
            raise ScenarioError(source, [Problem("", str(exc))]) from None
        params = [parse_param(item) for item in args.params]
        base = parse_scenario(*scenario_text(args.scenario, source), args.overrides)
        out = args.out or Path("runs") / f"{base.name}-sweep"
        result = sweep(args.scenario, params, out, metrics=metrics, seeds=args.seeds, seed=args.seed,
                       overrides=args.overrides, jobs=args.jobs, tolerance=args.tolerance,
                       stable_param=args.stable_param, criterion=criterion, source=source,
                       console=None if args.quiet else err, scheduler=args.scheduler, shared_dir=args.shared_dir,
                       batch=not args.no_batch)
    except ScenarioError as exc:
        print(f"error: invalid scenario\n{exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print_sweep_summary(result, console)
    console.print(f"report: {out / 'sweep.html'}  (table: {out / 'sweep.csv'}, data: {out / 'sweep.json'})",
                  highlight=False, markup=False)
    return EXIT_OK if result["ok"] else EXIT_FAILED


def print_sweep_summary(result: dict[str, Any], console: Any) -> None:
    """The grid as a table (mean ± std with replicates) and the smallest string-stable values."""
    from rich.table import Table

    from .aggregate import sort_key
    from .outputs import batching_text, label, number, status_text

    replicated = result["seeds"] > 1
    title = (f"{result['scenario']} · {len(result['points'])} points · "
             + (f"seeds {result['seed']}..{result['seed'] + result['seeds'] - 1} (mean ± std)" if replicated
                else f"seed {result['seed']}") + " · worst follower")
    tbl = Table(title=title)
    for path in result["grid"]:
        tbl.add_column(path, overflow="fold")
    for m in result["metrics"]:
        tbl.add_column(m, justify="right", overflow="fold")
    tbl.add_column("stable", justify="center")
    tbl.add_column("status")
    for p in result["points"]:
        stable = {True: "yes", False: "no", None: "-"}[p["stability"]["stable"]]
        tbl.add_row(*(label(p["params"][k]) for k in result["grid"]),
                    *(number(p["metrics"][m]["worst"], p["metrics"][m].get("std")) for m in result["metrics"]),
                    stable, status_text(p))
    console.print(tbl)
    if result.get("batching"):
        console.print(batching_text(result["batching"]), highlight=False, markup=False)
    for m, close in result.get("missing_metrics", {}).items():
        hint = f" (did you mean '{close}'?)" if close else ""
        console.print(f"warning: no run reported the metric '{m}'{hint}", highlight=False, markup=False)
    ms = result["min_stable"]
    if not ms:
        console.print("smallest string-stable value: no swept parameter is numeric", highlight=False)
        return
    console.print(f"smallest string-stable {ms['param']} ({ms['criterion']}):", highlight=False, markup=False)
    for g in ms["groups"]:
        where = ", ".join(f"{k}={label(v)}" for k, v in g["others"].items()) or "all points"
        if g["value"] is None:
            answer = "none of the swept values"
        else:
            answer = label(g["value"])
            if not g["consistent"]:
                worse = [v for v in g["unstable"] + g["undetermined"] if sort_key(v) > sort_key(g["value"])]
                answer += f" (but not stable or not judged at {', '.join(map(label, worse))})"
        console.print(f"  {where}: {answer}", highlight=False, markup=False)
        if g.get("edge"):
            console.print(f"    note: {g['edge']}", highlight=False, markup=False)
    if result.get("criterion"):
        console.print(result["criterion"]["excitation"], highlight=False, markup=False)


__all__ = ["add_scheduler_argument", "add_sweep_parser", "print_sweep_summary", "run_sweep_command"]
