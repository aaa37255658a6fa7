"""The port boundary: what a federate publishes is checked before anyone reads it, and frozen once published.

- Only declared ports; a typed port's value is a mapping of arrays (a federate returning anything else is named with
  what it returned). A port declared by name only may carry any value its consumers agree on; when that value is a
  mapping, its arrays are 1-d and an ``id`` column lists the live robots, as the recorder reads it.
- Typed ports conform to their contract (``core.ports.conforms``): declared fields, dtypes, 1-d
  columns of one length, no NaN or infinity where the contract says so (state, estimate, commands).
- Robot-indexed ports list the live robots in roster order: ``id`` has shape ``(live robots,)``.
- A failure names the federate, the time, the port, the field and the shape expected.

Built-in federates are trusted: their ports are checked at their first publication after each roster change (the
rows cannot drift in between), and they get the bus's arrays themselves (read-only arrays would send every compiled
kernel they reach through a slower dispatch). Plug-ins, remote and bridge federates are checked at every
publication; what they publish is copied before it is checked (``owned_outputs``: arrays they keep cannot change
the bus afterwards), and they receive their inputs as read-only copies over ``bytes`` (``frozen_inputs``): neither
``flags.writeable = True`` nor writing through ``.base`` reaches what the others read, so one that writes into its
inputs fails at once, naming itself.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np

from core.federate import FederateError
from core.ports import PortSpec, conforms
from core.robots import Roster


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
        raise FederateError(self.federate, t_ns, PortError(message))


def frozen_inputs(inputs: dict[str, Any], cache: dict[str, tuple[Any, dict[str, Any]]]) -> dict[str, Any]:
    """The inputs of an untrusted federate, in memory it cannot make writable (queued inputs: each value so).

    Each array is a copy whose memory is a ``bytes`` object (``np.frombuffer``): read-only, and neither
    ``flags.writeable = True`` nor its ``base`` makes it writable, so no plug-in reaches the arrays the bus, the
    recorder and the other federates hold. ``cache`` (port -> (bus value, frozen copy)) lets every untrusted reader
    of one published value share its copy: a value is copied once, however many plug-ins read it, however long it
    is held. Each reader gets a mapping of its own."""
    out: dict[str, Any] = {}
    for port, value in inputs.items():
        if isinstance(value, list):  # a queued input: the values published since the last step
            out[port] = [_frozen_value(v) for v in value]
            continue
        held = cache.get(port)
        if held is None or held[0] is not value:
            held = cache[port] = (value, _frozen_value(value))
        frozen = held[1]
        if isinstance(frozen, dict):
            out[port] = _frozen_value(value) if _has_objects(frozen) else dict(frozen)
        else:
            shareable = isinstance(frozen, _IMMUTABLE) or (isinstance(frozen, np.ndarray)
                                                            and not frozen.dtype.hasobject)
            out[port] = frozen if shareable else _frozen_value(value)
    return out


def owned_outputs(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """What an untrusted federate published, copied: the bus, the recorder and the delayed inputs keep references
    to published values, and a plug-in that kept its own arrays could otherwise change them after the fact. The
    copies are ordinary writable arrays (the built-in readers' compiled kernels take them at full speed); only
    the bus holds them."""
    return {port: {k: _copied(v) for k, v in value.items()} if isinstance(value, Mapping) else _copied(value)
            for port, value in outputs.items()}


def frozen_array(column: np.ndarray) -> np.ndarray:
    """A read-only copy of ``column`` over a ``bytes`` buffer: it cannot be made writable (object arrays, which
    cannot live in a buffer, are copied and marked read-only)."""
    if column.dtype.hasobject:
        copy = column.copy()
        copy.flags.writeable = False
        return copy
    return np.frombuffer(np.ascontiguousarray(column).tobytes(), dtype=column.dtype).reshape(column.shape)


_IMMUTABLE = (str, bytes, int, float, complex, bool, type(None), np.generic)


def _frozen_value(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return frozen_array(value)
    if isinstance(value, Mapping):
        return {key: _frozen_value(column) for key, column in value.items()}
    if isinstance(value, _IMMUTABLE):
        return value
    return copy.deepcopy(value)  # lists and the like on ports declared by name only


def _has_objects(value: Mapping[str, Any]) -> bool:
    """Whether a frozen mapping holds something a reader could still change (object arrays, lists): such a value
    is copied for each reader instead of shared."""
    return any(not isinstance(v, (np.ndarray, *_IMMUTABLE)) or (isinstance(v, np.ndarray) and v.dtype.hasobject)
               for v in value.values())


def _copied(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, _IMMUTABLE):
        return value
    return copy.deepcopy(value)
