"""One batch runner for ``coopsim sweep`` and ``coopsim compare``: one scenario at many points, in parallel.

A batch is a list of points, each a set of ``--set`` overrides on one scenario. A sweep's points are the Cartesian
product of ``--param path=v1,v2`` values; a comparison's points are the values of one categorical axis (channel
model or fidelity). Either way:

- ``grid``: parses the values, names the points' directories, and builds every point's scenario with
  ``parse_scenario`` (YAML text plus overrides), the path ``coopsim run`` takes, so defaults are resolved in one
  place for every point and every problem is reported before anything runs;
- ``runner``: runs each point (and seed) in its own run directory, in parallel processes, and records a failing
  run with its error while the others complete;
- ``aggregate``: reduces follower metrics with the one worst-follower rule, below;
- ``outputs`` and ``compare_report``: ``sweep.json``/``.csv``/``.html`` and ``comparison.json``/``.html``;
- ``sweep``, ``compare`` and ``cli``: the two commands.

The worst-follower rule: a run's value of a follower metric is the worst value over every follower of every
platoon in the run, the smallest for ``pdr`` and the ``min_*`` metrics (``min_gap_m``, ``min_ttc_s``) and the
largest for all others (errors, deviations, ratios, latencies, ages, intervals, collisions). Followers without
the metric are skipped. Over seed replicates a sweep reports the mean and sample std of the runs' worst values.
"""

from importlib import import_module
from typing import Any

# Loaded on first use (PEP 562): `coopsim --help` builds the sweep parser from `cli` without importing the
# scenario schema, the metrics and the plotting stack behind these names.
_WHERE = {
    "RULE": "aggregate", "is_stable": "aggregate", "lowest_is_worst": "aggregate", "min_stable": "aggregate",
    "worst_over_followers": "aggregate", "add_sweep_parser": "cli", "print_sweep_summary": "cli",
    "run_sweep_command": "cli", "FIDELITIES": "compare", "compare": "compare", "with_channel": "compare",
    "with_fidelity": "compare", "grid": "grid", "parse_param": "grid", "point_names": "grid",
    "split_values": "grid", "DEFAULT_METRICS": "names", "sweep": "sweep",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value
