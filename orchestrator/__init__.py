"""coopsim orchestrator: scheduler, federate interface, scenarios, recording, metrics and CLI."""

__version__ = "0.1.0"
