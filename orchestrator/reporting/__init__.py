"""Reporting: what people see of a run: the progress bar, plots (drawn in a worker), the HTML report, outcomes and
advisories."""
