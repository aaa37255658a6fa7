"""The arguments of ``coopsim sweep`` and of the batch options ``compare`` shares, in a module outside the batch
package that imports nothing of coopsim: ``coopsim --help`` builds every parser without loading the scenario
schema, the metrics and the plotting stack behind the batch runner."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

DEFAULT_METRICS = ("spacing_error_max_m", "l2_ratio_spacing_error", "min_gap_m")
"""Follower metrics a sweep reports unless ``--metrics`` names others."""

QUANTITIES = {"spacing_error": "spacing_error", "speed": "speed_deviation", "acceleration": "acceleration"}
"""String-stability criteria by signal: the name on the command line -> the metric's signal name."""
NORMS = ("l2", "linf")
GAMMA = "gamma"
CHOICES = (*(f"{q}:{n}" for q in QUANTITIES for n in NORMS), GAMMA)
"""Every ``--criterion`` value (``orchestrator.batch.criteria`` parses them)."""


def add_sweep_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``sweep`` subcommand to the ``coopsim`` subparsers."""
    p = subparsers.add_parser("sweep", help="run a scenario over a grid of parameter values, in parallel")
    p.add_argument("scenario", type=Path, help="scenario YAML file")
    p.add_argument("--param", dest="params", action="append", default=[], metavar="PATH=V1,V2,...",
                   help="a swept field and its values, each parsed as YAML like --set (repeatable; the grid is "
                        "the Cartesian product)")
    p.add_argument("--metrics", default=",".join(DEFAULT_METRICS),
                   help="comma-separated follower metrics to report (default: %(default)s)")
    p.add_argument("--seeds", type=int, help="run seeds seed..seed+N-1 per point and report mean and std")
    p.add_argument("--seed", type=int, help="override the scenario seed")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="PATH=VALUE",
                   help="override a field for every point (repeatable)")
    p.add_argument("--jobs", type=int, default=0, help="parallel processes (default: one per core)")
    add_scheduler_argument(p)
    p.add_argument("--out", type=Path, help="output directory (default: runs/<scenario name>-sweep)")
    p.add_argument("--tolerance", type=float, default=0.0,
                   help="string stability: the criterion's worst ratio <= 1 + tolerance (default: %(default)s)")
    p.add_argument("--criterion", default="spacing_error:l2", metavar="NAME",
                   help="string-stability criterion: the worst follower's ratio to its predecessor of "
                        "spacing_error, speed or acceleration, in the l2 or linf norm (e.g. speed:l2), or gamma: "
                        f"|Gamma(jw)| of speed at a sinusoid leader's frequency; one of {', '.join(CHOICES)} "
                        "(default: %(default)s)")
    p.add_argument("--stable-param", metavar="PATH",
                   help="the numeric parameter to find the smallest string-stable value of (default: the first "
                        "swept parameter whose values are all numbers)")
    add_batch_argument(p)
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


def add_batch_argument(parser: argparse.ArgumentParser) -> None:
    """``--no-batch``, shared by ``sweep`` and ``compare``."""
    parser.add_argument("--no-batch", action="store_true",
                        help="run every point in its own process (by default, points that share a world's structure "
                             "and seed run as independent copies in one world: same traces, metrics and digest, "
                             "no plots or report per point)")


def add_scheduler_argument(parser: argparse.ArgumentParser) -> None:
    """``--scheduler``, shared by ``sweep`` and ``compare``."""
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="run the points on a Dask cluster: tcp://host:8786 (a running 'dask scheduler'), or "
                             "'local' for worker processes on this machine; each run's files come back into "
                             "--out (docs/cluster.md; needs coopsim[cluster]). Default: local processes (--jobs)")
    parser.add_argument("--shared-dir", type=Path, metavar="DIR",
                        help="with --scheduler: DIR is mounted at the same path on this machine and every worker "
                             "and --out lies inside it; workers write the run directories there in place instead of "
                             "sending their files back")
