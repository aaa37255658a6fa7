"""Small project commands over the source tree (``python -m tests.tools.layers``)."""
