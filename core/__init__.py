"""The leaf of coopsim: the federate interface, port contracts, registries, robots, seeded randomness and time.

Everything else depends on this package and it depends on nothing of coopsim (only numpy and numba), so channel
models, control laws and vehicle models can be used, tested and extended without the orchestrator.
"""

__version__ = "0.1.0"
"""coopsim's version (as in pyproject.toml): run records, MCAP files and remote federates' greetings carry it."""
