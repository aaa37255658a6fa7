"""The ``coopsim`` command line's argument parser: one function per subcommand (the commands that live elsewhere
add their own: metrics, dataset, mcap, sweep, can-dbc, host)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .arg_types import non_negative, port, positive_factor, positive_gb, seed, step_timeout


def build_parser() -> argparse.ArgumentParser:
    """The parser of every ``coopsim`` subcommand, in the order ``--help`` lists them."""
    parser = argparse.ArgumentParser(
        prog="coopsim",
        description="Co-simulation of cooperative driving: platoons, V2X (ETSI ITS-G5 CAM) and controllers.",
    )
    parser.add_argument("--no-plugins", action="store_true",
                        help="built-ins only: no entry points, no 'package.module:Class' paths (for scenarios from "
                             "an untrusted source; also COOPSIM_NO_PLUGINS=1)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run(sub)
    _add_compare(sub)
    _add_validate(sub)
    sub.add_parser("schema", help="print the scenario JSON Schema (for editors)")
    _add_elsewhere(sub)
    _add_vehicle_test(sub)
    _add_host(sub)
    demo = sub.add_parser("demo", help="the platoon scenario with ideal vs ITS-G5 vs ITS-G5 with prediction, "
                                       "report included")
    demo.add_argument("--out", type=Path, default=Path("runs/demo"), help="output directory (default: %(default)s)")
    return parser


def _scenario_args(p: argparse.ArgumentParser) -> None:
    """The scenario file, its seed and ``--set`` overrides (run, compare, validate)."""
    p.add_argument("scenario", type=Path, help="scenario YAML file")
    p.add_argument("--seed", type=seed, help="override the scenario seed (0 .. 2^32-1)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="PATH=VALUE",
                   help="override a field, e.g. --set controller.time_gap_s=0.5 (repeatable)")


def _add_run(sub: argparse._SubParsersAction) -> None:
    """``coopsim run``."""
    run = sub.add_parser("run", help="simulate a scenario and write a run directory")
    _scenario_args(run)
    run.add_argument("--out", type=Path, help="run directory (default: runs/<scenario name>)")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--strict", action="store_true",
                     help="exit with code 3 on a collision, a station that sent no CAM or a law past its stability "
                          "bound (outputs.fail_on lists them one by one)")
    run.add_argument("--realtime", type=positive_factor, metavar="X",
                     help="pace simulation time to the wall clock at factor X (1 = real time; sets "
                          "execution.realtime)")
    run.add_argument("--step-timeout", type=step_timeout, metavar="S",
                     help="the watchdog: fail the run when one federate's step takes longer than S seconds of wall "
                          "time (sets execution.step_timeout_s; default 300)")
    run.add_argument("--memory-budget-gb", type=positive_gb, metavar="GB",
                     help="refuse a run whose estimated memory exceeds this (default: the available memory)")
    run.add_argument("--force", action="store_true", help="run even when the estimated memory exceeds the budget")
    run.add_argument("--live", type=port, nargs="?", const=8765, metavar="PORT",
                     help="serve a live view of the run at http://127.0.0.1:PORT/ (default port 8765; 0: any free "
                          "port, printed); needs coopsim[live]")
    run.add_argument("--live-host", default="127.0.0.1", metavar="ADDR",
                     help="address the live view binds (default: %(default)s); beyond loopback it needs "
                          "COOPSIM_TOKEN")


def _add_compare(sub: argparse._SubParsersAction) -> None:
    """``coopsim compare``."""
    cmp_ = sub.add_parser("compare", help="run one scenario per channel (or fidelity) on the same seed and compare")
    _scenario_args(cmp_)
    variants = cmp_.add_mutually_exclusive_group()
    variants.add_argument("--channels", help="comma-separated channel types (default: ideal,itsg5)")
    variants.add_argument("--fidelity", help="comma-separated fidelities: theory (unicycles, ground truth, ideal "
                          "channel) and/or full (dynamic vehicles, odometry, ITS-G5)")
    cmp_.add_argument("--out", type=Path, help="output directory (default: runs/<scenario name>-compare)")
    cmp_.add_argument("--jobs", type=non_negative, default=0, help="parallel processes (default: one per core)")
    from orchestrator.batch.args import add_scheduler_argument

    add_scheduler_argument(cmp_)
    cmp_.add_argument("--quiet", action="store_true", help="no progress output")


def _add_validate(sub: argparse._SubParsersAction) -> None:
    """``coopsim validate``."""
    val = sub.add_parser(
        "validate", help="check a scenario without running it",
        description="Check a scenario without running it. It imports coopsim's built-ins; an installed entry point "
                    "the scenario names (that module only); a 'package.module:Class' path only after finding, "
                    "without running anything, that the module's source defines Class at module level (then the "
                    "module is imported so that Class's Params checks its parameters); with --no-plugins no entry "
                    "point and no path (docs/extending.md, 'What coopsim validate imports').")
    _scenario_args(val)


def _add_elsewhere(sub: argparse._SubParsersAction) -> None:
    """The subcommands whose modules define their own arguments: metrics, dataset, mcap, sweep, can-dbc."""
    from orchestrator.batch.args import add_sweep_parser
    from orchestrator.mcap_export.command import add_mcap_parser

    from .can_dbc_command import add_can_dbc_parser
    from .dataset_command import add_dataset_parser
    from .metrics_command import add_metrics_parser

    add_metrics_parser(sub)
    add_dataset_parser(sub)
    add_mcap_parser(sub)
    add_sweep_parser(sub)
    add_can_dbc_parser(sub)


def _add_vehicle_test(sub: argparse._SubParsersAction) -> None:
    """``coopsim vehicle-test``."""
    vt = sub.add_parser("vehicle-test", help="handling tests of the dynamic model: plots and a metrics table")
    vt.add_argument("kind", choices=("dlc", "constant-radius", "step-steer"),
                    help="ISO 3888-1 double lane change, constant-radius ramp, or step steer")
    vt.add_argument("--vehicle", default="g35_sedan", help="vehicle preset (default: %(default)s)")
    vt.add_argument("--speed", type=float, default=20.0, help="test speed [m/s] (default: %(default)s)")
    vt.add_argument("--tyre", default="linear,fiala,pacejka",
                    help="comma-separated tyre models compared side by side (default: %(default)s)")
    vt.add_argument("--out", type=Path, help="output directory (default: runs/vehicle-test-<kind>)")


def _add_host(sub: argparse._SubParsersAction) -> None:
    """``coopsim host``."""
    host = sub.add_parser("host", help="serve federates over gRPC (and framed TCP) to an orchestrator elsewhere "
                                       "(scenario 'federates:' entries with 'remote: host:port' or "
                                       "'framed://host:port')")
    from federates.remote.framing import add_framed_arguments
    from federates.remote.options import add_host_arguments

    add_host_arguments(host)
    add_framed_arguments(host)
