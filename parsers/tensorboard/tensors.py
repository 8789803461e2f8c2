"""TF2 tensor scalars: which `TensorProto`s hold one number, read through the protobuf
classes (`tensor_scalar`) or, for a layout shared by many events, found at a byte offset
(`scalar_offset`). The two agree by construction: the offset is that of the field the
protobuf reading takes, and a layout is used only once both read the same number."""

from __future__ import annotations

from typing import Any

import numpy as np

# DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_HALF → numpy element types.
TENSOR_DTYPES = {1: "<f4", 2: "<f8", 3: "<i4", 9: "<i8", 19: "<f2"}
# TensorProto's fields: dtype, tensor_content, float_val, double_val, int_val, int64_val.
_DTYPE, _CONTENT, _FLOAT, _DOUBLE, _INT, _INT64 = 1, 4, 5, 6, 7, 10
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5

Field = tuple[int, int, int, int]  # field number, wire type, payload start, payload end


def tensor_scalar(tensor: Any) -> float | None:
    """A TF2 scalar tensor's value (float_val, double_val, int_val or tensor_content); None
    for anything with more than one element."""
    if any(dim.size != 1 for dim in tensor.tensor_shape.dim):
        return None
    for values in (tensor.float_val, tensor.double_val, tensor.int64_val, tensor.int_val):
        if len(values) == 1:
            return float(values[0])
    dtype = TENSOR_DTYPES.get(tensor.dtype)
    if dtype is not None and tensor.tensor_content:
        array = np.frombuffer(tensor.tensor_content, dtype=dtype)
        return float(array[0]) if array.size == 1 else None
    return None


def fields(record: bytes, start: int, stop: int) -> list[Field] | None:
    """The fields of the protobuf message in `record[start:stop]`, or None if it is not
    one (a truncated varint or field, a wire type no message here uses)."""
    found: list[Field] = []
    position = start
    while position < stop:
        key = _varint(record, position, stop)
        if key is None:
            return None
        number, wire = key[0] >> 3, key[0] & 7
        position = key[1]
        if wire == _VARINT:
            value = _varint(record, position, stop)
            if value is None:
                return None
            end = value[1]
        elif wire in (_FIXED64, _FIXED32):
            end = position + (8 if wire == _FIXED64 else 4)
        elif wire == _LENGTH:
            length = _varint(record, position, stop)
            if length is None:
                return None
            position, end = length[1], length[1] + length[0]
        else:
            return None
        if end > stop:
            return None
        found.append((number, wire, position, end))
        position = end
    return found


def scalar_offset(record: bytes, start: int, stop: int) -> tuple[int, str] | None:
    """Where the number `tensor_scalar` reads from the TensorProto in `record[start:stop]`
    lies, and its numpy type; None when it is a varint (int_val, int64_val: its width
    varies) or there is no single number."""
    found = fields(record, start, stop)
    if found is None:
        return None
    floats = _elements(found, _FLOAT, 4)
    doubles = _elements(found, _DOUBLE, 8)
    if len(floats) == 1:
        return floats[0], "<f4"
    if len(doubles) == 1:
        return doubles[0], "<f8"
    if any(number in (_INT, _INT64) for number, *_ in found):
        return None
    dtypes = [f for f in found if f[0] == _DTYPE and f[1] == _VARINT]
    contents = [f for f in found if f[0] == _CONTENT and f[1] == _LENGTH]
    if not dtypes or not contents:
        return None
    dtype_at = dtypes[-1]
    code = _varint(record, dtype_at[2], dtype_at[3])
    dtype = TENSOR_DTYPES.get(code[0]) if code is not None else None
    _, _, begin, end = contents[-1]
    if dtype is None or end - begin != np.dtype(dtype).itemsize:
        return None
    return begin, dtype


def _elements(found: list[Field], number: int, width: int) -> list[int]:
    """The offsets of a repeated fixed-width field's elements, packed or not."""
    wire = _FIXED32 if width == 4 else _FIXED64
    offsets: list[int] = []
    for field_number, field_wire, begin, end in found:
        if field_number != number:
            continue
        if field_wire == wire:
            offsets.append(begin)
        elif field_wire == _LENGTH:
            offsets.extend(range(begin, end - width + 1, width))
    return offsets


def _varint(record: bytes, position: int, stop: int) -> tuple[int, int] | None:
    """The varint at `position` and the position after it, or None if it does not end
    before `stop` (or within ten bytes)."""
    value = 0
    for index in range(10):
        if position + index >= stop:
            return None
        byte = record[position + index]
        value |= (byte & 0x7F) << (7 * index)
        if byte < 0x80:
            return value, position + index + 1
    return None
