"""The directory a scenario's relative file names are resolved against: the scenario file's own, captured while
that file is validated (``orchestrator.scenario.loader``), so that a federate reading files (a SUMO network) finds
them wherever the command was started."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

_SCENARIO_DIR: ContextVar[Path | None] = ContextVar("coopsim_scenario_dir", default=None)


@contextmanager
def scenario_directory(directory: Path | None) -> Iterator[None]:
    """Validate a scenario as read from ``directory`` (None: a scenario without a file, e.g. a test's text)."""
    token = _SCENARIO_DIR.set(None if directory is None else directory.resolve())
    try:
        yield
    finally:
        _SCENARIO_DIR.reset(token)


def current_scenario_dir() -> Path | None:
    """The directory of the scenario being validated, None outside a validation or for a scenario without a file."""
    return _SCENARIO_DIR.get()
