"""The port boundary: what a federate publishes is checked before anyone reads it.

- Only declared ports; a typed port's value is a mapping of arrays (a federate returning anything else is named with
  what it returned). A port declared by name only may carry any value its consumers agree on; when that value is a
  mapping, its arrays are 1-d and an ``id`` column lists the live robots, as the recorder reads it.
- Typed ports conform to their contract (``core.ports.conforms``): declared fields, dtypes, 1-d
  columns of one length, no NaN or infinity where the contract says so (state, estimate, commands).
- Robot-indexed ports list the live robots in roster order: ``id`` has shape ``(live robots,)``.
- A failure names the port, the field and the shape expected (``Federate.step`` adds the federate and the time).

``Federate.step`` runs these checks on every call, whoever drives the federate (the scheduler, the remote host, a
benchmark). A trusted guard (the built-in federates in a run) checks a port at its first publication after each
roster change (the rows cannot drift in between); any other checks every publication. A copying guard (the
scheduler's, for plug-ins, remote and bridge federates) publishes copies of what the federate returned, so arrays
it keeps cannot change what others read afterwards.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np

from .ports import PortSpec, conforms
from .robots import Roster


class PortError(ValueError):
    """A federate published something that breaks its port's contract."""


class PortGuard:
    """Checks and freezes the outputs of one federate (see the module docstring)."""

    def __init__(self, federate: str, declared: Mapping[str, PortSpec], roster: Roster, trusted: bool,
                 copies: bool = False) -> None:
        self.federate = federate
        self.declared = dict(declared)
        self.roster = roster
        self.trusted = trusted
        self.copies = copies  # publish copies of what the federate returned (a bus holds them after the step)
        self._checked_at: dict[str, int] = {}  # port -> roster version of its last full check
        self._version = -1  # trusted fast path: the roster version at which ``_seen`` ports were all checked
        self._seen: set[str] = set()

    def admit(self, t_ns: int, outputs: Any) -> Any:
        """What may be published of ``outputs`` (a copy when ``copies``), checked; raise ``PortError`` naming
        the port, the field and what is wrong."""
        if self.copies and isinstance(outputs, Mapping):
            outputs = owned_outputs(outputs)  # checked and published as copies only the bus holds
        self.check(t_ns, outputs)
        return outputs

    def check(self, t_ns: int, outputs: Any) -> None:
        """Raise ``PortError`` saying what is wrong with ``outputs`` at ``t_ns``."""
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
            if not spec.typed:
                problem = self._loose(port, value)
                if problem is not None:
                    self._fail(t_ns, problem)
                continue
            if not self.trusted or self._checked_at.get(port) != version:
                problem = self._rows(port, value) if spec.index == "robot" else None
                if problem is None:
                    problem = conforms(spec, value)
                if problem is not None:
                    self._fail(t_ns, problem)
                self._checked_at[port] = version
        if self.trusted:
            if self._version != version:
                self._version, self._seen = version, set()
            self._seen.update(outputs)

    def _rows(self, port: str, value: Mapping[str, Any]) -> str | None:
        """A robot-indexed value's ``id``: integers of shape (live robots,), the live robots in roster order."""
        if "id" not in value:
            return f"robot-indexed port '{port}' has no 'id' column"
        ids = np.asarray(value["id"])
        live = self.roster.ids
        expected = f"expected ({len(live)},): one row per live robot"
        if ids.ndim != 1:
            return f"port '{port}' field 'id' has shape {ids.shape}, {expected}"
        if len(ids) != len(live):
            return (f"port '{port}' field 'id' has shape {ids.shape}, {expected}: port '{port}' is robot-indexed but "
                    f"its rows (ids {ids[:8].tolist()}) are not the live robots in roster order ({live[:8].tolist()})")
        if ids.dtype.kind not in "iu":
            return f"port '{port}' field 'id' is {ids.dtype}, declared int64"
        if not (ids == live).all():
            return (f"port '{port}' is robot-indexed but its rows (ids {ids[:8].tolist()}) are not the live robots "
                    f"in roster order ({live[:8].tolist()})")
        return None

    def _loose(self, port: str, value: Any) -> str | None:
        """A port declared by name only: a mapping carries 1-d arrays, and an ``id`` column (which makes the
        recorder read it robot by robot) names live robots, each once. Unlike a typed port it may cover some of the
        robots (an FMU stepping a few of them), carry ids as whole floats (a HELICS vector) and fields of other
        lengths (a count beside the rows): its consumers agreed on its shape."""
        if not isinstance(value, Mapping):
            return None
        for key, column in value.items():
            if isinstance(column, np.ndarray) and column.ndim != 1:
                return f"port '{port}' field '{key}' has shape {column.shape}, expected a 1-d array"
        if "id" not in value:
            return None
        ids = np.asarray(value["id"])
        if ids.ndim != 1:
            return f"port '{port}' field 'id' has shape {ids.shape}, expected a 1-d array of robot ids"
        whole = ids.dtype.kind in "iu" or (
            ids.dtype.kind == "f" and bool(np.all(np.isfinite(ids) & (ids == np.round(ids)))))
        if not whole:
            return f"port '{port}' field 'id' is {ids.dtype} with values that are not robot ids"
        known = np.isin(ids, self.roster.ids)
        if not known.all() or len(np.unique(ids)) != len(ids):
            return (f"port '{port}' field 'id' has shape {ids.shape}: its rows (ids {ids[:8].tolist()}) must name live "
                    f"robots, each once (live: {self.roster.ids[:8].tolist()})")
        return None

    def _fail(self, t_ns: int, message: str) -> None:
        raise PortError(message)


def owned_outputs(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """What an untrusted federate published, copied: the bus, the recorder and the delayed inputs keep references
    to published values, and a plug-in that kept its own arrays could otherwise change them after the fact. The
    copies are ordinary writable arrays (the built-in readers' compiled kernels take them at full speed); only
    the bus holds them."""
    return {port: {k: _copied(v) for k, v in value.items()} if isinstance(value, Mapping) else _copied(value)
            for port, value in outputs.items()}


IMMUTABLE = (str, bytes, int, float, complex, bool, type(None), np.generic)
"""Values no reader can change: published and shared as they are."""


def _copied(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, IMMUTABLE):
        return value
    return copy.deepcopy(value)
