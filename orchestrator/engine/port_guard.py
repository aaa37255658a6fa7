"""The input side of the port boundary: untrusted federates read frozen copies.

The output side (declared ports, contracts, live rows, copies of what untrusted federates publish) is
``core.port_guard``, run by the public ``Federate.step`` wherever a federate is driven; the scheduler installs a
guard with the run's roster in each federate (``Federate.guard_ports``). Plug-ins, remote and bridge federates
receive their inputs as read-only copies over ``bytes`` (``frozen_inputs``): neither ``flags.writeable = True`` nor
writing through ``.base`` reaches what the others read, so one that writes into its inputs fails at once, naming
itself. Built-in federates get the bus's arrays themselves (read-only arrays would send every compiled kernel they
reach through a slower dispatch)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np

from core.port_guard import IMMUTABLE, PortError, PortGuard, owned_outputs

__all__ = ["PortError", "PortGuard", "frozen_array", "frozen_inputs", "owned_outputs"]


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
            shareable = isinstance(frozen, IMMUTABLE) or (isinstance(frozen, np.ndarray)
                                                            and not frozen.dtype.hasobject)
            out[port] = frozen if shareable else _frozen_value(value)
    return out


def frozen_array(column: np.ndarray) -> np.ndarray:
    """A read-only copy of ``column`` over a ``bytes`` buffer: it cannot be made writable (object arrays, which
    cannot live in a buffer, are copied and marked read-only)."""
    if column.dtype.hasobject:
        copy = column.copy()
        copy.flags.writeable = False
        return copy
    return np.frombuffer(np.ascontiguousarray(column).tobytes(), dtype=column.dtype).reshape(column.shape)



def _frozen_value(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return frozen_array(value)
    if isinstance(value, Mapping):
        return {key: _frozen_value(column) for key, column in value.items()}
    if isinstance(value, IMMUTABLE):
        return value
    return copy.deepcopy(value)  # lists and the like on ports declared by name only


def _has_objects(value: Mapping[str, Any]) -> bool:
    """Whether a frozen mapping holds something a reader could still change (object arrays, lists): such a value
    is copied for each reader instead of shared."""
    return any(not isinstance(v, (np.ndarray, *IMMUTABLE)) or (isinstance(v, np.ndarray) and v.dtype.hasobject)
               for v in value.values())
