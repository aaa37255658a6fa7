"""Python values <-> messages of the federate protocol (``proto/coopsim_federate_v1.proto``).

Arrays cross as typed little-endian buffers and come back bit for bit (NaN payloads, int64 ids, uint8 codes);
strings cross as a list of strings. Parameters and robot configurations cross as ``Value`` trees that keep
integers apart from floats (robots and setup replies: ``descriptions.py``). Anything that cannot cross
exactly is a :class:`CodecError` naming where it is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .proto import coopsim_federate_v1_pb2 as pb

PROTOCOL_VERSION = 1
INT64 = (-(2**63), 2**63 - 1)

# numpy dtype (little-endian) <-> wire dtype; strings travel in Array.strings
_TO_WIRE = {
    np.dtype("<f8"): pb.DTYPE_FLOAT64, np.dtype("<f4"): pb.DTYPE_FLOAT32,
    np.dtype("<i8"): pb.DTYPE_INT64, np.dtype("<i4"): pb.DTYPE_INT32, np.dtype("<i2"): pb.DTYPE_INT16,
    np.dtype("i1"): pb.DTYPE_INT8, np.dtype("<u8"): pb.DTYPE_UINT64, np.dtype("<u4"): pb.DTYPE_UINT32,
    np.dtype("<u2"): pb.DTYPE_UINT16, np.dtype("u1"): pb.DTYPE_UINT8, np.dtype("?"): pb.DTYPE_BOOL,
}
_FROM_WIRE = {code: dtype for dtype, code in _TO_WIRE.items()}


class CodecError(ValueError):
    """A value that cannot cross the wire exactly, or a message that does not decode; names where."""


# -- arrays -----------------------------------------------------------------------------------------------------
def encode_array(value: np.ndarray, out: pb.Array, where: str = "array") -> pb.Array:
    """Fill ``out`` with ``value``: C order, little-endian; ``str`` arrays (numpy ``U`` or object of str) as
    strings."""
    dtype = value.dtype
    code = _TO_WIRE.get(dtype)  # the common case: a little-endian (or byte) dtype, looked up as is
    if value.ndim == 1:
        out.shape.append(value.shape[0])
    else:
        out.shape.extend(value.shape)
    if code is not None:
        out.dtype = code
        out.data = value.tobytes()  # C order whatever the array's own layout
        return out
    if dtype.kind in "UO":
        flat = value.reshape(-1).tolist()
        if not all(isinstance(s, str) for s in flat):
            bad = next(s for s in flat if not isinstance(s, str))
            raise CodecError(f"{where}: an object array can only hold strings, found a {type(bad).__name__}")
        out.dtype = pb.DTYPE_STRING
        out.strings.extend(flat)
        return out
    little = dtype.newbyteorder("<")
    code = _TO_WIRE.get(little)
    if code is None:
        raise CodecError(f"{where}: dtype {dtype} cannot be sent (numbers, bool and str only)")
    out.dtype = code
    out.data = value.astype(little).tobytes()
    return out


def decode_array(message: pb.Array, where: str = "array", copy: bool = True) -> np.ndarray:
    """The numpy array of ``message``: owning its memory, or (``copy`` False) a read-only view of the message's
    bytes; strings as an object array of str."""
    shape = message.shape
    dims = len(shape)
    count = shape[0] if dims == 1 else math.prod(shape)
    code = message.dtype
    if code == pb.DTYPE_STRING:
        if len(message.strings) != count:
            raise CodecError(f"{where}: {len(message.strings)} strings for shape {tuple(shape)}")
        array = np.empty(count, dtype=object)
        array[:] = list(message.strings)
        return array.reshape(tuple(shape))
    dtype = _FROM_WIRE.get(code)
    if dtype is None:
        raise CodecError(f"{where}: unknown dtype code {code}")
    data = message.data
    if len(data) != count * dtype.itemsize:
        raise CodecError(f"{where}: {len(data)} bytes for shape {tuple(shape)} of {dtype.name} "
                         f"({count * dtype.itemsize} expected)")
    array = np.frombuffer(data, dtype)
    if dims != 1:
        array = array.reshape(tuple(shape))
    if copy:
        array = array.copy()
    return array if dtype.isnative else array.astype(dtype.newbyteorder("="))


# -- values: parameters, configurations, untyped port fields ----------------------------------------------------
def encode_value(value: Any, out: pb.Value, where: str = "value") -> pb.Value:
    """Fill ``out`` with a JSON-like ``value`` (None, bool, int, float, str, lists, tuples, str-keyed dicts) or a
    numpy array or scalar."""
    if value is None:
        out.null = True
    elif isinstance(value, bool | np.bool_):
        out.bool = bool(value)
    elif isinstance(value, int | np.integer):
        if not INT64[0] <= int(value) <= INT64[1]:
            raise CodecError(f"{where}: the integer {value} does not fit in 64 bits")
        out.int = int(value)
    elif isinstance(value, float | np.floating):
        out.double = float(value)
    elif isinstance(value, str):
        out.string = value
    elif isinstance(value, np.ndarray):
        encode_array(value, out.array, where)
    elif isinstance(value, Mapping):
        encode_map(value, out.map, where)
    elif isinstance(value, list | tuple):
        items = out.list.items
        out.list.SetInParent()
        for i, item in enumerate(value):
            encode_value(item, items.add(), f"{where}[{i}]")
    else:
        raise CodecError(f"{where}: cannot send a {type(value).__name__}")
    return out


def encode_map(values: Mapping[str, Any], out: pb.ValueMap, where: str = "") -> pb.ValueMap:
    """Fill ``out`` with a dict of str keys, in order."""
    out.SetInParent()
    for key, value in values.items():
        if not isinstance(key, str):
            raise CodecError(f"{where or 'mapping'}: keys must be strings, got {key!r}")
        entry = out.entries.add()
        entry.key = key
        encode_value(value, entry.value, f"{where}.{key}" if where else key)
    return out


def decode_value(message: pb.Value, where: str = "value") -> Any:
    """The Python value of ``message`` (arrays as numpy arrays)."""
    kind = message.WhichOneof("kind")
    if kind is None or kind == "null":
        return None
    if kind == "list":
        return [decode_value(item, f"{where}[{i}]") for i, item in enumerate(message.list.items)]
    if kind == "map":
        return decode_map(message.map, where)
    if kind == "array":
        return decode_array(message.array, where)
    return getattr(message, kind)


def decode_map(message: pb.ValueMap, where: str = "") -> dict[str, Any]:
    """The dict of ``message``; a key given twice is an error."""
    out: dict[str, Any] = {}
    for entry in message.entries:
        if entry.key in out:
            raise CodecError(f"{where or 'mapping'}: key '{entry.key}' given twice")
        out[entry.key] = decode_value(entry.value, f"{where}.{entry.key}" if where else entry.key)
    return out


# -- port data --------------------------------------------------------------------------------------------------
_PAD = bytes(8)


def _pack(data: Mapping[str, Any], out: pb.Columns) -> bool:
    """Pack ``data`` into ``out`` when every column is a 1-d array of a fixed-width dtype; False otherwise (then
    ``out`` is untouched)."""
    codes, lengths, parts = [], [], []
    offset = 0
    for value in data.values():
        if type(value) is not np.ndarray or value.ndim != 1:
            return False
        code = _TO_WIRE.get(value.dtype)
        if code is None:
            return False
        codes.append(code)
        lengths.append(value.shape[0])
        size = value.nbytes
        if size:  # an empty column adds nothing (the queued receptions of a step are mostly empty)
            parts.append(value.tobytes())
            offset += size
            if offset % 8:  # the next column starts 8-aligned, so a reader can view it in place
                parts.append(_PAD[: 8 - offset % 8])
                offset += 8 - offset % 8
    out.names.extend(data)
    out.dtypes.extend(codes)
    out.lengths.extend(lengths)
    out.data = b"".join(parts)
    return True


# read-only views of no bytes (never writeable), sliced per decode: reshaping one input leaves the others alone
_EMPTY = {code: np.frombuffer(b"", dtype) for code, dtype in _FROM_WIRE.items()}


def _unpack(message: pb.Columns, where: str, copy: bool) -> dict[str, Any]:
    # slices copy the repeated fields into lists at once: iterating the message's containers costs more
    names, codes, lengths, data = message.names[:], message.dtypes[:], message.lengths[:], message.data
    if not len(names) == len(codes) == len(lengths):
        raise CodecError(f"{where}: {len(names)} names, {len(codes)} dtypes and {len(lengths)} lengths")
    if not data and not any(lengths) and all(map(_EMPTY.__contains__, codes)):  # all empty: no buffer to view
        if copy:
            return {name: np.empty(0, _FROM_WIRE[code]) for name, code in zip(names, codes, strict=True)}
        return {name: _EMPTY[code][:] for name, code in zip(names, codes, strict=True)}
    out: dict[str, Any] = {}
    offset = 0
    try:
        for name, code, count in zip(names, codes, lengths, strict=True):
            dtype = _FROM_WIRE[code]
            if count:
                array = np.frombuffer(data, dtype, count, offset)  # positional: keywords cost twice as much
                out[name] = array.copy() if copy else array
                size = count * dtype.itemsize
                offset += size + (-size) % 8
            else:
                out[name] = np.empty(0, dtype) if copy else _EMPTY[code][:]
    except (KeyError, ValueError, OverflowError):  # a bad code or length: found again, to name the column
        raise _column_error(names, codes, lengths, data, where) from None
    return out


def _column_error(names: list, codes: list, lengths: list, data: bytes, where: str) -> CodecError:
    offset = 0
    for name, code, count in zip(names, codes, lengths, strict=True):
        dtype = _FROM_WIRE.get(code)
        if dtype is None:
            return CodecError(f"{where}.{name}: unknown dtype code {code} (packed columns take fixed-width dtypes)")
        size = count * dtype.itemsize
        if offset + size > len(data):
            return CodecError(f"{where}.{name}: {count} {dtype.name} values run past the {len(data)} bytes of the "
                              "packed columns")
        offset += size + (-size) % 8
    return CodecError(f"{where}: the packed columns cannot be read")


def encode_port(data: Mapping[str, Any] | None, out: pb.PortValue, where: str) -> pb.PortValue:
    """Fill ``out`` with one port value (field -> array), packed into ``columns`` when every column allows it;
    None is ``none``."""
    if data is None:
        out.none = True
        return out
    if type(data) is not dict and not isinstance(data, Mapping):  # (a dict is the usual case: no ABC check)
        raise CodecError(f"{where}: a port value is a mapping of fields, got a {type(data).__name__}")
    if _pack(data, out.columns):
        return out
    add = out.fields.add
    for name, value in data.items():
        field = add()
        field.name = name
        if isinstance(value, np.ndarray):  # the common case, without the generic dispatch
            encode_array(value, field.value.array, f"{where}.{name}")
        else:
            encode_value(value, field.value, f"{where}.{name}")
    return out


def decode_port(message: pb.PortValue, where: str, copy: bool = True) -> dict[str, Any] | None:
    """One port value (None for ``none``); ``copy`` False: arrays are read-only views of the message."""
    if message.none:
        return None
    out: dict[str, Any] = _unpack(message.columns, where, copy) if message.HasField("columns") else {}
    for field in message.fields:
        value = field.value
        name = field.name
        if name in out:
            raise CodecError(f"{where}: field '{name}' given twice")
        out[name] = (decode_array(value.array, f"{where}.{name}", copy) if value.WhichOneof("kind") == "array"
                     else decode_value(value, f"{where}.{name}"))
    return out


def encode_inputs(inputs: Mapping[str, Any], step: pb.Step) -> None:
    """A Step's inputs: a list (queued port) becomes its values in order; a plain value one value; None none."""
    for port, value in inputs.items():
        item = step.inputs.add()
        item.port = port
        if isinstance(value, list):
            item.queued = True
            for k, entry in enumerate(value):
                encode_port(entry, item.values.add(), f"inputs.{port}[{k}]")
        elif value is not None:
            encode_port(value, item.values.add(), f"inputs.{port}")


def decode_inputs(step: pb.Step, copy: bool = True) -> dict[str, Any]:
    """The inputs of a Step as a federate receives them (see :func:`encode_inputs`); ``copy`` False: read-only
    views of the message, as an in-process plug-in gets its inputs."""
    inputs: dict[str, Any] = {}
    for item in step.inputs:
        values = [decode_port(v, f"inputs.{item.port}", copy) for v in item.values]
        if item.queued:
            inputs[item.port] = values
        elif len(values) > 1:
            raise CodecError(f"inputs.{item.port}: {len(values)} values for a plain (not queued) input")
        else:
            inputs[item.port] = values[0] if values else None
    return inputs


def encode_outputs(outputs: Mapping[str, Any], out: pb.Outputs) -> pb.Outputs:
    """A Step's outputs, port by port in order."""
    out.SetInParent()
    for port, value in outputs.items():
        item = out.outputs.add()
        item.port = port
        encode_port(value, item.value, f"outputs.{port}")
    return out


def decode_outputs(message: pb.Outputs) -> dict[str, Any]:
    """Port -> value."""
    return {item.port: decode_port(item.value, f"outputs.{item.port}") for item in message.outputs}


# -- robots -----------------------------------------------------------------------------------------------------


__all__ = ["PROTOCOL_VERSION", "CodecError", "decode_array", "decode_inputs", "decode_map", "decode_outputs",
           "decode_port", "decode_value", "encode_array", "encode_inputs", "encode_map", "encode_outputs",
           "encode_port", "encode_value", "pb"]
