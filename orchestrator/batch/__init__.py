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

The package itself imports nothing: ``args`` (the commands' arguments, which ``coopsim --help`` needs) is read
without loading the runner; import each name from its module.
"""
