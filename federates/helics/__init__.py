"""The ``helics`` federate kind: a bridge to a HELICS co-simulation (``federate.py``)."""
