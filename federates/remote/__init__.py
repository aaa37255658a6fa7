"""Federates in other processes or on other machines: a gRPC host and the proxy the scheduler steps."""
