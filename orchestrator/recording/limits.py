"""How much of a run's traces post-processing holds at once: the bounds that keep its memory flat in time."""

from __future__ import annotations

PLOT_POINTS = 5_000
"""Samples per robot and series the plots get at most (a long run is thinned evenly)."""
SERIES_COLUMNS = ("x", "y", "yaw", "v", "a", "yaw_rate", "pred_age_s", "degraded", "desired_gap_m")
"""The vehicles-trace columns follower metrics read."""
PASS_BUDGET_BYTES = 256 * 2**20
"""How much one metrics pass holds at most: its share of the vehicles trace (whole platoons at a time; at least
one) and the work on one follower beside it (``FOLLOWER_WORK``)."""
FOLLOWER_WORK = 6
"""The work on one follower of a pass (its view, the pieces it is built from, the metrics' own arrays), in units of
one robot's samples of the pass (measured: about 5.6). It grows with simulated time while a pass's robots can be
fewer, so the pass takes it from its budget: the whole stays flat as the run gets longer."""
