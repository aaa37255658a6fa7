"""The port boundary: what a federate publishes is checked before anyone reads it, and frozen once published.

- Only declared ports; a typed port's value is a mapping of arrays (a federate returning anything else is named with
  what it returned). A port declared by name only may carry any value its consumers agree on.
- Typed ports conform to their contract (``orchestrator.core.ports.conforms``): declared fields, dtypes, 1-d
  columns of one length, no NaN or infinity where the contract says so (state, estimate, commands).
- Robot-indexed ports list the live robots in roster order.

Built-in federates are trusted: their ports are checked at their first publication after each roster change (the
rows cannot drift in between). Plug-ins, remote and bridge federates are checked at every publication, and they
receive their inputs as read-only views (``read_only``), so one that writes into its inputs fails at once, naming
itself, instead of corrupting what others (and the recorder) read. Built-ins get the arrays themselves: a view per
array per step costs little, but read-only arrays make every compiled kernel they reach take a slower dispatch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .core.federate import FederateError
from .core.ports import PortSpec, conforms
from .core.robots import Roster


class PortError(ValueError):
    """A federate published something that breaks its port's contract."""


class PortGuard:
    """Checks and freezes the outputs of one federate (see the module docstring)."""

    def __init__(self, federate: str, declared: Mapping[str, PortSpec], roster: Roster, trusted: bool) -> None:
        self.federate = federate
        self.declared = dict(declared)
        self.roster = roster
        self.trusted = trusted
        self._checked_at: dict[str, int] = {}  # port -> roster version of its last full check
        self._version = -1  # trusted fast path: the roster version at which ``_seen`` ports were all checked
        self._seen: set[str] = set()

    def check(self, t_ns: int, outputs: Any) -> None:
        """Raise ``FederateError`` naming the federate, the time and what is wrong."""
        if self.trusted and self._version == self.roster.version and self._seen.issuperset(outputs):
            return  # a built-in, nothing new since its last check: one comparison per step
        if not isinstance(outputs, Mapping):
            self._fail(t_ns, f"step() returned a {type(outputs).__name__}, not a mapping of port -> data")
        undeclared = [p for p in outputs if p not in self.declared]
        if undeclared:
            self._fail(t_ns, f"wrote undeclared ports {sorted(map(str, undeclared))}")
        version = self.roster.version
        for port, value in outputs.items():
            spec = self.declared[port]
            if not isinstance(value, Mapping):
                if not spec.typed:
                    continue  # a port declared by name only may carry anything: its consumers agreed on it
                self._fail(t_ns, f"port '{port}' carries a {type(value).__name__}, not a mapping of field -> array")
            if spec.typed and (not self.trusted or self._checked_at.get(port) != version):
                problem = conforms(spec, value)
                if problem is None and spec.index == "robot":
                    problem = self._rows(port, value)
                if problem is not None:
                    self._fail(t_ns, problem)
                self._checked_at[port] = version
        if self.trusted:
            if self._version != version:
                self._version, self._seen = version, set()
            self._seen.update(outputs)

    def _rows(self, port: str, value: Mapping[str, Any]) -> str | None:
        ids = np.asarray(value["id"])
        live = self.roster.ids
        if len(ids) != len(live) or not (ids == live).all():
            return (f"port '{port}' is robot-indexed but its rows (ids {ids[:8].tolist()}) are not the live robots "
                    f"in roster order ({live[:8].tolist()})")
        return None

    def _fail(self, t_ns: int, message: str) -> None:
        raise FederateError(self.federate, t_ns, PortError(message))


def read_only(inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs of an untrusted federate: every array a read-only view (queued inputs: each value so)."""
    return {port: [_viewed(v) for v in value] if isinstance(value, list) else _viewed(value)
            for port, value in inputs.items()}


def _viewed(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return value
    out = {}
    for key, column in value.items():
        if isinstance(column, np.ndarray):
            column = column.view()
            column.flags.writeable = False
        out[key] = column
    return out
