"""The ``coopsim`` command line: run, compare, sweep, validate, schema, demo.

Exit codes: 0 success, 1 a federate failed during the run (traces so far are kept), 2 bad input (scenario or
arguments), with a message and no traceback, 3 an outcome the run fails on (``--strict``, ``outputs.fail_on``),
4 the disk is full (the run stopped at the first failed write; every file complete or absent), 130 interrupted,
141 (128 + SIGPIPE) the reader of the output went away (``coopsim schema | head``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

# nothing heavy at import: ``main`` catches an interrupt only once it runs, so everything slow to import (rich,
# pydantic, numpy, numba) is imported inside it
from .parser import build_parser
from .terminal import (
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_DISK_FULL,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_OUTCOME,
    demo,
    print_comparison,
    print_summary,
    vehicle_test,
)

if TYPE_CHECKING:
    from rich.console import Console

THREADS_WAIT_S = 1.0
"""How long the ending command waits for threads a plug-in left running before it exits without them."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``coopsim`` console script. Ctrl-C at any point before a run installs its own handlers
    (imports, validation, building the world) ends with one line and code 130. Called as the command
    (``argv`` None), it also ends the process once its outputs are flushed, whatever threads a plug-in left
    running (``_exit_past_threads``)."""
    try:
        code = _guarded(argv)
    except KeyboardInterrupt:
        with contextlib.suppress(OSError, ValueError):
            print("interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    if argv is None:
        _exit_past_threads(code)
    return code


def _exit_past_threads(code: int) -> None:
    """A non-daemon thread a plug-in started (and never ended) would hold the process at the interpreter's exit
    for as long as it runs: wait ``THREADS_WAIT_S`` for such threads, then, if any is still alive, name them on
    stderr, flush, and leave with ``os._exit`` (every output is already written and closed; only interpreter
    teardown is skipped)."""
    import threading

    left = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if not left:
        return
    try:
        deadline = time.monotonic() + THREADS_WAIT_S
        for thread in left:
            thread.join(max(0.0, deadline - time.monotonic()))
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    left = [t for t in left if t.is_alive()]
    if not left:
        return
    with contextlib.suppress(OSError, ValueError):
        print(f"note: exiting without waiting for {len(left)} thread{'s' if len(left) > 1 else ''} still running "
              f"({', '.join(sorted(t.name for t in left))}), left by a plug-in", file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _guarded(argv: Sequence[str] | None) -> int:
    """``_main`` with the broken pipe of a reader that went away turned into its conventional exit code."""
    try:
        return _main(argv)
    except BrokenPipeError:
        # the reader of stdout or stderr went away (`coopsim schema | head`): stop quietly, as a tool killed by
        # SIGPIPE would; a broken pipe that is not ours (a socket to a peer) is an error like any other
        if not _closed_outputs():
            raise
        _discard_closed_outputs()
        return EXIT_BROKEN_PIPE
    finally:
        if argv is None:
            # the process is the command and ends now: everything is written and closed, so the interpreter's
            # last garbage collection over every object of the run (a quarter of a second) is work for nothing
            gc.freeze()


def _closed_outputs() -> list[int]:
    """The standard output and error descriptors whose pipe has lost its reader (poll reports POLLERR on the write
    end of such a pipe; a terminal, a file or a live pipe reports nothing)."""
    import select

    if not hasattr(select, "poll"):
        return [1, 2]  # cannot tell: assume the pipe that broke is ours, as the error says
    closed = []
    for fd in (1, 2):
        poller = select.poll()
        try:
            poller.register(fd, 0)  # errors and hang-ups are always reported
            events = poller.poll(0)
        except (OSError, ValueError):
            continue
        if any(mask & (select.POLLERR | select.POLLNVAL) for _, mask in events):
            closed.append(fd)
    return closed


def _discard_closed_outputs() -> None:
    """Point the closed descriptors at /dev/null, so that what is still buffered (flushed at interpreter exit) goes
    nowhere instead of raising a second BrokenPipeError there."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in _closed_outputs():
            os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.no_plugins:  # through the environment, so batch workers and hosts started from here inherit it
        from core.registry import NO_PLUGINS_ENV

        os.environ[NO_PLUGINS_ENV] = "1"
    from orchestrator.reporting.console import PipeConsole
    from orchestrator.scenario import ScenarioError

    console = PipeConsole()
    err = PipeConsole(stderr=True)

    try:
        return _dispatch(args, console, err)
    except ScenarioError as exc:
        print(f"error: invalid scenario\n{exc}", file=sys.stderr)  # plain: one problem per line, never wrapped
        return EXIT_BAD_INPUT
    except UnicodeDecodeError as exc:  # a scenario read as text before the loader saw its bytes
        source = getattr(args, "scenario", None) or "<input>"
        line = exc.object[: exc.start].count(b"\n") + 1 if isinstance(exc.object, bytes) else 1
        print(f"error: invalid scenario\n{source}:{line}: <scenario>: not UTF-8 text at byte offset {exc.start} "
              f"({exc.reason}); a scenario is a UTF-8 YAML file", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        err.print("interrupted")
        return EXIT_INTERRUPTED


def _dispatch(args: argparse.Namespace, console: Console, err: Console) -> int:
    """Run the parsed subcommand; its exit code."""
    if args.command == "schema":
        from orchestrator.scenario.schema import scenario_schema

        print(json.dumps(scenario_schema(), indent=2))  # plain: pipe it into a file for the editor
        return EXIT_OK
    if args.command == "metrics":
        from .metrics_command import run_metrics_command

        return run_metrics_command(args, console, err)
    if args.command == "dataset":
        from .dataset_command import run_dataset_command

        return run_dataset_command(args, console)
    if args.command == "mcap":
        from orchestrator.mcap_export.command import run_mcap_command

        return run_mcap_command(args, console)
    if args.command == "can-dbc":
        from .can_dbc_command import run_can_dbc_command

        return run_can_dbc_command(args)
    if args.command == "demo":
        return demo(args.out, console, err)
    if args.command == "host":
        from federates.remote.host_command import main as host_main

        return host_main(args)  # parsed by add_host_arguments: every host option passes through
    if args.command == "vehicle-test":
        return vehicle_test(args, console)
    if args.command == "sweep":
        from orchestrator.batch.cli import run_sweep_command

        return run_sweep_command(args, console)
    return _scenario_command(args, console, err)


def _scenario_command(args: argparse.Namespace, console: Console, err: Console) -> int:
    """run, validate and compare: the scenario loaded with its overrides and its plan checked first."""
    from orchestrator.scenario import load_scenario

    overrides = list(args.overrides)
    if getattr(args, "realtime", None) is not None:
        overrides.append(f"execution.realtime={args.realtime!r}")
    if getattr(args, "step_timeout", None) is not None:
        overrides.append(f"execution.step_timeout_s={args.step_timeout!r}")
    scenario = load_scenario(args.scenario, overrides)
    from orchestrator.build.plan import check_plan
    from orchestrator.build.resources import MemoryBudget

    # what only a built world can tell (memory, start poses): the run's budget; validate uses the default
    check_plan(scenario, MemoryBudget(args.memory_budget_gb, args.force) if args.command == "run" else None)
    if args.command == "validate":
        return _validate(args, scenario, console)
    if args.command == "run":
        out = args.out or Path("runs") / scenario.name
        live = None if args.live is None else (args.live, args.live_host)
        return _run(scenario, out, args.seed, not args.quiet, str(args.scenario), console, err, args.strict, live)
    if args.command == "compare":
        return _compare(args, scenario, console, err)
    raise AssertionError(args.command)


def _validate(args: argparse.Namespace, scenario: Any, console: Console) -> int:
    """``coopsim validate`` once the scenario and its plan passed: build the robots, print a line and the notes."""
    from orchestrator.build.world import expand_robots
    from orchestrator.reporting.advisories import lateral_stability_notes
    from orchestrator.scenario import Problem, ScenarioError

    try:  # what only building the robots can tell: duplicate ids or names, overrides of unknown robots
        robots = expand_robots(scenario)
    except ValueError as exc:
        raise ScenarioError(str(args.scenario), [Problem("vehicles", str(exc))]) from None
    platoons = len({r.platoon for r in robots})
    console.print(f"{args.scenario}: ok ({len(robots)} robots in {platoons} platoon{'s' if platoons > 1 else ''}, "
                  f"{scenario.duration_s:g} s, channel {scenario.channel.type}, {_laws(robots)})",
                  soft_wrap=True, markup=False, highlight=False)  # a long path stays one piece to copy
    from orchestrator.reporting.scale_notes import scale_notes

    _print_notes([*lateral_stability_notes(scenario, robots), *scale_notes(scenario, robots)], console)
    return EXIT_OK


def _compare(args: argparse.Namespace, scenario: Any, console: Console, err: Console) -> int:
    """``coopsim compare``: one run per channel (or fidelity), the table printed, comparison.html written."""
    from orchestrator.batch.compare import compare
    from orchestrator.batch.dask_runner import ClusterError

    out = args.out or Path("runs") / f"{scenario.name}-compare"
    # every variant is built from the file and --set like `coopsim run` builds a scenario
    common = {"seed": args.seed, "jobs": args.jobs, "source": str(args.scenario), "overrides": args.overrides,
              "console": None if args.quiet else err, "scheduler": args.scheduler,
              "shared_dir": args.shared_dir}
    try:
        if args.fidelity:
            fidelities = [f.strip() for f in args.fidelity.split(",") if f.strip()]
            result = compare(args.scenario, "fidelity", fidelities, out, **common)
        else:
            channels = [c.strip() for c in (args.channels or "ideal,itsg5").split(",") if c.strip()]
            result = compare(args.scenario, "channel", channels, out, **common)
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print_comparison(result, console)
    console.print(f"report: {out / 'comparison.html'}")
    return EXIT_OK if result["ok"] else EXIT_FAILED


def _print_notes(notes: Sequence[str], console: Console) -> None:
    for note in notes:
        console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)


def _laws(robots: list[Any]) -> str:
    """What drives the robots: each control law with its number of followers, leaders, external sources."""
    from collections import Counter

    kinds = Counter(r.controller.type if r.controller is not None else
                    f"driven by {r.command_source.federate}" if r.command_source is not None else
                    "leader" for r in robots)
    laws = sorted((k, n) for k, n in kinds.items() if k != "leader" and not k.startswith("driven"))
    parts = [f"controller {k} ({n} robot{'s' if n > 1 else ''})" for k, n in laws]
    parts += [f"{k} ({n})" for k, n in sorted(kinds.items()) if k.startswith("driven")]
    return ", ".join(parts) or "leaders only"


def _run(scenario: Any, out: Path, seed: int | None, progress: bool, source: str, console: Console,
         err: Console, strict: bool = False, live: tuple[int, str] | None = None) -> int:
    from orchestrator.build.world import expand_robots
    from orchestrator.reporting.advisories import lateral_stability_notes

    # said before the run, which may take a while; a bad roster is reported by run_scenario itself
    from orchestrator.reporting.scale_notes import scale_notes
    from orchestrator.runner import run_scenario

    with contextlib.suppress(ValueError):
        robots = expand_robots(scenario)
        _print_notes([*lateral_stability_notes(scenario, robots), *scale_notes(scenario, robots)], console)
    viewer = None
    if live is not None:  # started before the run, so a browser can be opened on it while it goes
        from orchestrator.live import LiveViewError, start_live_view

        try:
            viewer = start_live_view(*live)
        except LiveViewError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        print(f"live view: {viewer.url}", flush=True)
    try:
        result = run_scenario(scenario, out, seed=seed, progress=progress, source=source,
                              extra_observers=[viewer.observer()] if viewer is not None else ())
    finally:
        if viewer is not None:
            viewer.close()
    if result.disk_full:
        return _disk_full(result, out)
    if result.run_json_error is not None:
        print(f"error: {out / 'run.json'} could not be written: {result.run_json_error}", file=sys.stderr)
        return EXIT_FAILED
    if result.interrupted and result.error is None:
        print(f"interrupted by {result.interrupted} at t = {result.run_info['sim_time_s']:.3f} s: the traces up to "
              f"then are in {out / 'trace'}; 'coopsim metrics {out}' computes the metrics", file=sys.stderr)
        return EXIT_INTERRUPTED
    if not result.ok:
        print(f"error: run failed: {result.error}", file=sys.stderr)
        print(f"traces up to the failure are in {out / 'trace'}", file=sys.stderr)
        return EXIT_FAILED
    if not result.metrics:
        console.print("outputs.trace is false: no trace was recorded, so there are no metrics, plots or report")
    else:
        print_summary(result.metrics, result.run_info, console)
    report = out / "report.html"
    console.print(f"run directory: {out}" + (f"  (report: {report})" if report.exists() else ""))
    return _outcome_exit(result.run_info.get("outcomes", {}), scenario.outputs.fail_on, strict, err)


def _disk_full(result: Any, out: Path) -> int:
    """What a run stopped by a full disk left, on stderr; EXIT_DISK_FULL."""
    if result.error is not None:
        print(f"error: the disk is full: {result.error}", file=sys.stderr)
    if result.run_json_error is not None:
        print(f"error: the disk is full: {out / 'run.json'} could not be written either; the run's record is "
              "absent (never cut short)", file=sys.stderr)
    else:
        print(f"run.json says what was done; the traces in {out / 'trace'} are complete up to the stop (a trace that "
              "could not be completed was removed)", file=sys.stderr)
    return EXIT_DISK_FULL


def _outcome_exit(outcomes: dict[str, Any], fail_on: list[str], strict: bool, err: Console) -> int:
    """Print each outcome in red; EXIT_OUTCOME when one the scenario (or --strict) fails on happened."""
    from orchestrator.reporting.outcomes import OUTCOMES, describe, happened

    for line in describe(outcomes):
        err.print(f"[bold red]{line}[/bold red]", highlight=False)
    failing = [name for name in happened(outcomes) if strict or name in fail_on]
    if failing:
        why = "--strict" if strict else "outputs.fail_on"
        err.print(f"[red]exit code {EXIT_OUTCOME}: {', '.join(failing)} ({why}; one of {', '.join(OUTCOMES)})[/red]",
                  highlight=False)
        return EXIT_OUTCOME
    return EXIT_OK




if __name__ == "__main__":
    sys.exit(main())
