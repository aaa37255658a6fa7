"""The engine: the time-stepping scheduler, the order federates step in, the port guard around every publication,
real-time pacing and run control (pause, stop, signals). It imports only the core."""
