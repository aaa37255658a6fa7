"""coopsim orchestrator: the top layer. The engine, world building, recording, reporting, metrics, batch runs and
the command line, over the core (``core``), the models and the federates."""
