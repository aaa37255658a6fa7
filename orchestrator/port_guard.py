"""The port boundary: what a federate publishes is checked before anyone reads it, and frozen once published.

- Only declared ports; a typed port's value is a mapping of arrays (a federate returning anything else is named with
  what it returned). A port declared by name only may carry any value its consumers agree on.
- Typed ports conform to their contract (``orchestrator.core.ports.conforms``): declared fields, dtypes, 1-d
  columns of one length, no NaN or infinity where the contract says so (state, estimate, commands).
- Robot-indexed ports list the live robots in roster order.

Built-in federates are trusted: their ports are checked at their first publication after each roster change (the
rows cannot drift in between). Plug-ins, remote and bridge federates are checked at every publication. Every
published array is made read-only, so a consumer that writes into its inputs fails at once, naming itself, instead
of corrupting what others (and the recorder) read.
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

    def check(self, t_ns: int, outputs: Any) -> None:
        """Raise ``FederateError`` naming the federate, the time and what is wrong; freeze what passes."""
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
            _freeze(value)

    def _rows(self, port: str, value: Mapping[str, Any]) -> str | None:
        ids = np.asarray(value["id"])
        live = self.roster.ids
        if len(ids) != len(live) or not (ids == live).all():
            return (f"port '{port}' is robot-indexed but its rows (ids {ids[:8].tolist()}) are not the live robots "
                    f"in roster order ({live[:8].tolist()})")
        return None

    def _fail(self, t_ns: int, message: str) -> None:
        raise FederateError(self.federate, t_ns, PortError(message))


def _freeze(value: Mapping[str, Any]) -> None:
    for column in value.values():
        if isinstance(column, np.ndarray):
            column.flags.writeable = False
