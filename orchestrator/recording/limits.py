"""How much of a run's traces post-processing holds at once: the bounds that keep its memory flat in time."""

from __future__ import annotations

PLOT_POINTS = 5_000
"""Samples per robot and series the plots get at most (a long run is thinned evenly)."""
SERIES_COLUMNS = ("x", "y", "yaw", "v", "a", "yaw_rate", "pred_age_s", "degraded", "desired_gap_m")
"""The vehicles-trace columns follower metrics read."""
PASS_BUDGET_BYTES = 256 * 2**20
"""How much of the vehicles trace one metrics pass loads at most (whole platoons at a time; at least one)."""
