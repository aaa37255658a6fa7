"""The bytes a remote federate call travels as: a JSON header plus raw array buffers.

Frame layout (all integers little-endian):

    b"CSW1" | u32 header length | header (UTF-8 JSON) | per buffer: u64 length | bytes

The header is the message with every numpy array replaced by ``{"__nd__": k, "dtype": "<f8", "shape": [n]}``,
k indexing the buffers in order (C order, the dtype's own byte order as numpy spells it). A NaN or infinite
float, which JSON cannot hold, travels the same way as a 0-d array marked ``"scalar": true``. Arrays cross bit for
bit, NaN included, so a remote federate sees exactly what an in-process one would. Anything a peer in another
language needs is in this docstring: JSON, a 4-byte magic, lengths and raw buffers.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import numpy as np

MAGIC = b"CSW1"
_ND = "__nd__"


class WireError(ValueError):
    """A message that cannot be encoded or a frame that cannot be decoded."""


def encode(message: Any) -> bytes:
    """One frame for ``message``: JSON-able values (dicts with str keys, lists, tuples as lists, str, int,
    float, bool, None) and numpy arrays or scalars anywhere inside."""
    buffers: list[bytes] = []

    def pack(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            if value.dtype.hasobject:
                raise WireError(f"arrays of Python objects cannot be sent (dtype {value.dtype})")
            array = np.ascontiguousarray(value)
            buffers.append(array.tobytes())
            return {_ND: len(buffers) - 1, "dtype": array.dtype.str, "shape": list(array.shape)}
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, float) and not math.isfinite(value):  # not valid JSON: travels as a 0-d array
            packed = pack(np.array(value))
            packed["scalar"] = True
            return packed
        if isinstance(value, dict):
            if _ND in value:
                raise WireError(f"'{_ND}' is reserved and cannot be a key")
            bad = [k for k in value if not isinstance(k, str)]
            if bad:
                raise WireError(f"dictionary keys must be strings, got {bad[0]!r}")
            return {k: pack(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [pack(v) for v in value]
        if value is None or isinstance(value, str | int | float | bool):
            return value
        raise WireError(f"cannot send a {type(value).__name__}")

    header = json.dumps(pack(message), separators=(",", ":")).encode("utf-8")
    parts = [MAGIC, struct.pack("<I", len(header)), header]
    for buffer in buffers:
        parts += [struct.pack("<Q", len(buffer)), buffer]
    return b"".join(parts)


def decode(frame: bytes, max_bytes: int | None = None) -> Any:
    """The message of one frame (arrays come back as numpy arrays that own their memory). A frame longer than
    ``max_bytes`` is refused before anything in it is read."""
    if max_bytes is not None and len(frame) > max_bytes:
        raise WireError(f"frame of {len(frame)} bytes exceeds the limit of {max_bytes} bytes")
    view = memoryview(frame)
    if bytes(view[:4]) != MAGIC:
        raise WireError("not a coopsim frame (bad magic)")
    try:
        (header_len,) = struct.unpack_from("<I", view, 4)
        pos = 8 + header_len
        if pos > len(view):
            raise WireError("truncated frame (header)")
        header = json.loads(bytes(view[8:pos]).decode("utf-8"))
        buffers = []
        while pos < len(view):
            (size,) = struct.unpack_from("<Q", view, pos)
            if pos + 8 + size > len(view):
                raise WireError("truncated frame (buffer)")
            buffers.append(view[pos + 8 : pos + 8 + size])
            pos += 8 + size

        def unpack(value: Any) -> Any:
            if isinstance(value, dict):
                if _ND in value:
                    dtype = np.dtype(value["dtype"])
                    array = np.frombuffer(buffers[value[_ND]], dtype=dtype).reshape(value["shape"]).copy()
                    return array.item() if value.get("scalar") else array
                return {k: unpack(v) for k, v in value.items()}
            if isinstance(value, list):
                return [unpack(v) for v in value]
            return value

        return unpack(header)
    except WireError:
        raise
    except (struct.error, UnicodeDecodeError, json.JSONDecodeError, IndexError, KeyError, TypeError,
            ValueError, RecursionError) as exc:  # RecursionError: a header nested thousands of levels deep
        raise WireError(f"bad frame: {exc}") from None
