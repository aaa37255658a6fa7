"""Names the batch commands share, in a module that imports nothing (the command line parser reads them)."""

DEFAULT_METRICS = ("spacing_error_max_m", "l2_ratio_spacing_error", "min_gap_m")
"""Follower metrics a sweep reports unless ``--metrics`` names others."""
