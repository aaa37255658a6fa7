"""The ``fmu`` federate kind: an FMI 2.0 co-simulation FMU stepped as a federate (``federate.py``)."""
