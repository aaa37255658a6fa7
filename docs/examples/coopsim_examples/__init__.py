"""Worked examples of coopsim plug-ins (docs/extending.md): a control law, a channel model, a vehicle model and a
federate. Installed as a distribution (``pyproject.toml`` here declares the entry points), they are selected by
name; on ``PYTHONPATH`` only, by their ``package.module:Class`` path."""
