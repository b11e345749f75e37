"""The write fast path for flat Protobuf messages: the wire format of every row, column-wise.

A :class:`FlatMessageEncoder` is built once per (message descriptor, Arrow type of the
written column) when every field of the message is a singular scalar (integers of every
encoding, float, double, bool, string, bytes; proto3 ``optional`` included, real oneofs,
enums, messages, repeated fields and maps are not) and the column holds it with an Arrow
type that maps to it one to one; anything else takes the general path (a message object
per row, ``SerializeToString``).

Each field is written for all rows at once into the slot matrix of
:mod:`kafka_ds.formats.wire_columns`: its tag, then its value (a varint, zigzag varint,
4 or 8 little-endian bytes, or a length and the bytes). Fields go in field-number order,
and a field is on the wire where the runtime writes it: when it has a value and either
has presence or differs from the proto3 default (0, an all-zero bit pattern for floats so
that -0.0 is written, false, empty) -- so the bytes equal the protobuf runtime's
``SerializeToString`` of the same message.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from google.protobuf.descriptor import FieldDescriptor

from ...protocol.primitives import uvarint_bytes
from ...protocol.records_arrays import binary_lengths
from ..wire_columns import (
    RowBytes,
    boolean_values,
    fixed_values,
    valid_mask,
)
from .schema import repeated

_T = FieldDescriptor
_INT32 = (pa.int8(), pa.int16(), pa.int32())
_INT64 = (*_INT32, pa.int64())
# field type -> (wire type, how the value is written, Arrow types accepted)
_KINDS = {
    _T.TYPE_INT32: (0, "varint", _INT32),
    _T.TYPE_INT64: (0, "varint", _INT64),
    _T.TYPE_UINT32: (0, "uint32", _INT32),
    _T.TYPE_UINT64: (0, "varint", _INT64),
    _T.TYPE_SINT32: (0, "zigzag", _INT32),
    _T.TYPE_SINT64: (0, "zigzag", _INT64),
    _T.TYPE_FIXED32: (5, "int32", _INT32),
    _T.TYPE_SFIXED32: (5, "int32", _INT32),
    _T.TYPE_FIXED64: (1, "int64", _INT64),
    _T.TYPE_SFIXED64: (1, "int64", _INT64),
    _T.TYPE_FLOAT: (5, "float", (pa.float32(),)),
    _T.TYPE_DOUBLE: (1, "double", (pa.float32(), pa.float64())),
    _T.TYPE_BOOL: (0, "bool", (pa.bool_(),)),
    _T.TYPE_STRING: (2, "bytes", (pa.string(), pa.large_string())),
    _T.TYPE_BYTES: (2, "bytes", (pa.binary(), pa.large_binary())),
}


@dataclass(frozen=True)
class _Field:
    tag: bytes  # the field's key: number << 3 | wire type, as a varint
    how: str  # one of _KINDS' ways of writing the value
    child: int  # index of the struct child
    presence: bool  # written when set even if it is the default


class FlatMessageEncoder:
    """Encodes struct columns of one Arrow type as one flat message type, column-wise."""

    def __init__(self, fields: list[_Field]):
        self.fields = fields

    def encode(self, array: pa.Array, prefix: bytes = b"") -> pa.BinaryArray:
        """Every row's serialized message with ``prefix`` in front; null rows stay null."""
        present = valid_mask(array)
        rows = RowBytes(present)
        rows.constant(prefix)
        for f in self.fields:
            column = array.field(f.child)
            valid = valid_mask(column) & present
            how = f.how
            if how == "bytes":
                lengths = binary_lengths(column)
                written = valid if f.presence else valid & (lengths > 0)
                rows.constant(f.tag, written)
                rows.varint(lengths.astype(np.uint64), written)
                rows.value(column)  # an empty or null value adds no bytes
                continue
            if how == "bool":
                values = boolean_values(column)
                written = valid if f.presence else valid & (values != 0)
                rows.constant(f.tag, written)
                rows.byte(values, written)
                continue
            values = fixed_values(column)
            if how in ("float", "double"):
                values = values.astype(np.float32 if how == "float" else np.float64, copy=False)
                bits = values.view(np.uint32 if how == "float" else np.uint64)
                written = valid if f.presence else valid & (bits != 0)
                rows.constant(f.tag, written)
                rows.fixed(values, written)
                continue
            values = values.astype(np.int64, copy=False)
            written = valid if f.presence else valid & (values != 0)
            rows.constant(f.tag, written)
            if how == "int32":
                rows.fixed(values.astype(np.int32), written)
            elif how == "int64":
                rows.fixed(values, written)
            elif how == "zigzag":
                rows.varint(((values << 1) ^ (values >> 63)).view(np.uint64), written)
            elif how == "uint32":  # Spark's int holds the uint32's bits
                rows.varint((values & 0xFFFFFFFF).view(np.uint64), written)
            else:  # int32 / int64 (negative: 10 bytes), uint64's bits
                rows.varint(values.view(np.uint64), written)
        return rows.finish()


def build_message_encoder(desc, arrow_type: pa.DataType) -> FlatMessageEncoder | None:
    """A FlatMessageEncoder of ``arrow_type`` columns as message ``desc``, or None when
    the pair takes the general path."""
    if not pa.types.is_struct(arrow_type):
        return None
    children = {arrow_type.field(i).name: i for i in range(arrow_type.num_fields)}
    if len(children) != arrow_type.num_fields:
        return None
    fields = []
    for field in sorted(desc.fields, key=lambda f: f.number):
        kind = _KINDS.get(field.type)
        if kind is None or repeated(field):
            return None
        oneof = field.containing_oneof
        if oneof is not None and not _is_synthetic(oneof):
            return None  # setting one member clears the others: general path
        child = children.get(field.name)
        if child is None:
            continue  # never set: never written
        wire_type, how, accepted = kind
        if arrow_type.field(child).type not in accepted:
            return None
        fields.append(
            _Field(uvarint_bytes(field.number << 3 | wire_type), how, child, field.has_presence)
        )
    return FlatMessageEncoder(fields)


def _is_synthetic(oneof) -> bool:
    """A proto3 ``optional`` field's oneof of one (it only gives the field presence)."""
    synthetic = getattr(oneof, "is_synthetic", None)
    if synthetic is not None:
        return bool(synthetic)
    return len(oneof.fields) == 1 and oneof.name.startswith("_")


__all__ = ["FlatMessageEncoder", "build_message_encoder"]
