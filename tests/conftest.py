"""Settings for the whole suite.

Hypothesis draws the same examples on every run (``derandomize``, no example database): a property test fails on
a change of the code, never on a new draw. How many examples each test takes is its own ``@settings``; the fuzz
corpora take their full count (2,000) under ``COOPSIM_FULL_FUZZ=1``, which ``make test`` sets, and a fixed subset
otherwise (README "Tests")."""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("coopsim", derandomize=True, database=None, deadline=None, print_blob=True)
settings.load_profile("coopsim")
