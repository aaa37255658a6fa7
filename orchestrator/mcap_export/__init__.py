"""``run.mcap``: a run directory's traces as an MCAP recording that Foxglove and Lichtblick open without plug-ins.

- ``extra``: whether the optional ``mcap`` package is installed (imports nothing of coopsim, so the scenario model
  can ask at validation).
- ``schemas``: the JSON schemas of the messages (Foxglove's for poses, transforms and the scene; coopsim's own for
  odometry, ranges and V2X receptions).
- ``messages``: one message (a plain dict) from one trace row.
- ``sources``: the traces streamed batch by batch, each as a time-ordered sequence of records.
- ``export``: ``write_mcap(run_dir)``, merging the sources in time order into ``run.mcap``.
- ``command``: ``coopsim mcap RUN_DIR``.

This package's ``__init__`` imports nothing, so asking ``extra`` does not load the exporter.
"""
