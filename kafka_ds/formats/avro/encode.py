"""The write fast path: flat Avro records encoded field by field across all rows at once.

The reverse of :mod:`kafka_ds.formats.avro.columns`. A :class:`FlatEncoder` is built once
per (Avro schema, Arrow type of the written column) when the schema is a flat record (or a
single flat type) whose every field the column holds with an Arrow type that maps to it
one to one (the pairs below), or a top-level union of such types read as spark-avro's
member struct (:class:`UnionEncoder`: several record types in one topic); anything else
(nested types, enums, decimals, unions inside records, fields left to their defaults,
int64 columns for Avro ``int``, ...) takes the general path, fastavro per row.

Encoding writes no Python object per row: every field is written for all rows at once
into the slot matrix of :mod:`kafka_ds.formats.wire_columns` (union branch indexes, zigzag
varints, string lengths, floats, booleans; the Confluent header as the first bytes), and
strings and bytes are put between them by one Arrow take. The result is byte for byte
what ``fastavro.schemaless_writer`` (and so confluent-kafka's ``AvroSerializer``) writes
for the same values.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from ...protocol.primitives import uvarint_bytes
from ...protocol.records_arrays import binary_lengths
from ..wire_columns import (
    RowBytes,
    boolean_values,
    fixed_values,
    in_row_order,
    set_members,
    valid_mask,
)
from .columns import FlatType, flat_type


class NullInRequiredField(ValueError):
    """A row has a null where the Avro type has no null branch (``row``: its index)."""

    def __init__(self, row: int, field: str, avro_type: str):
        super().__init__(f"{field} is null and Avro {avro_type} has no null branch")
        self.row = row


def _accepts(ft: FlatType, arrow_type: pa.DataType) -> bool:
    """True when every value of ``arrow_type`` is written for ``ft`` exactly as fastavro
    writes the value ``to_pylist`` gives (the Spark type spark-avro pairs with it)."""
    t = arrow_type
    if ft.logical == "date":
        return pa.types.is_date32(t) or t in (pa.int8(), pa.int16(), pa.int32())
    if ft.logical in ("timestamp-millis", "timestamp-micros"):
        return t == pa.int64() or (pa.types.is_timestamp(t) and t.unit == "us" and t.tz is not None)
    if ft.logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return t == pa.int64() or (pa.types.is_timestamp(t) and t.unit == "us" and t.tz is None)
    if ft.base == "int":
        return t in (pa.int8(), pa.int16(), pa.int32())
    if ft.base == "long":
        return t in (pa.int8(), pa.int16(), pa.int32(), pa.int64())
    if ft.base == "float":
        return t == pa.float32()
    if ft.base == "double":
        return t in (pa.float32(), pa.float64())
    if ft.base == "boolean":
        return t == pa.bool_()
    if ft.base == "string":
        return pa.types.is_string(t) or pa.types.is_large_string(t)
    return pa.types.is_binary(t) or pa.types.is_large_binary(t)  # bytes


@dataclass(frozen=True)
class _Field:
    name: str  # as named in messages
    avro_type: str  # for messages
    flat: FlatType
    child: int | None  # index of the struct child, None: the column itself
    millis: bool  # an Arrow timestamp (microseconds) written as milliseconds
    raw: bool = False  # bytes without Avro's length in front


class FlatEncoder:
    """Encodes columns of one Arrow type with one flat Avro schema, column-wise."""

    def __init__(self, fields: list[_Field]):
        self.fields = fields

    def raw_bytes(self) -> FlatEncoder:
        """This encoder of a top-level ``bytes`` writing the bytes alone, without Avro's
        length (Confluent's framing, :mod:`.raw_bytes`)."""
        (field,) = self.fields
        if field.child is not None or field.flat != FlatType("bytes", None, None):
            raise ValueError("only a top-level bytes value is written raw")
        return FlatEncoder([replace(field, raw=True)])

    def encode(self, array: pa.Array, header: bytes = b"") -> pa.BinaryArray:
        """Every row's Avro binary with ``header`` in front (b"": unframed); null rows stay
        null. Raises :class:`NullInRequiredField` for the first row that has a null where
        the schema has none."""
        present = valid_mask(array)
        rows = RowBytes(present)
        rows.constant(header)
        for f in self.fields:
            column = array if f.child is None else array.field(f.child)
            valid = valid_mask(column) & present
            if f.flat.null_index is None:
                missing = present & ~valid
                if missing.any():
                    raise NullInRequiredField(int(np.flatnonzero(missing)[0]), f.name, f.avro_type)
            else:
                # a union's branch index, zigzag-encoded: 0 -> 0x00, 1 -> 0x02
                value_branch = 1 - f.flat.null_index
                rows.byte(np.where(valid, 2 * value_branch, 2 * f.flat.null_index), present)
            base = f.flat.base
            if base in ("string", "bytes"):
                if not f.raw:
                    lengths = binary_lengths(column)
                    rows.varint(lengths.astype(np.uint64) << np.uint64(1), valid)
                rows.value(column)
            elif base == "boolean":
                rows.byte(boolean_values(column), valid)
            elif base in ("float", "double"):
                rows.fixed(
                    fixed_values(column).astype(
                        np.float32 if base == "float" else np.float64, copy=False
                    ),
                    valid,
                )
            else:  # int / long, dates, timestamps
                values = fixed_values(column).astype(np.int64, copy=False)
                if f.millis:
                    values = values // 1000  # fastavro floors to milliseconds
                zigzag = (values << 1) ^ (values >> 63)
                rows.varint(zigzag.view(np.uint64), valid)
        return rows.finish()


class UnionEncoder:
    """Encodes spark-avro's member struct (``member0``, ``member1``, ...: one field per
    non-null branch of a union, the row's branch set) column-wise: the rows of each branch
    with that branch's FlatEncoder, the branch index after the header, then back in row
    order. A row with no member set takes the union's null branch (and fails without one);
    one with several set fails: which branch is meant?"""

    def __init__(
        self,
        branches: list[tuple[int, FlatEncoder | UnionEncoder]],
        null_index: int | None,
        describe: str,
    ):
        self.branches = branches  # (union index, encoder) per member
        self.null_index = null_index
        self.describe = describe

    def encode(self, array: pa.Array, header: bytes = b"") -> pa.BinaryArray:
        n = len(array)
        present, chosen, counts = set_members(array, len(self.branches))
        no_member = np.flatnonzero(present & (counts == 0))
        wrong = counts > 1
        if self.null_index is None:
            wrong[no_member] = True
        if wrong.any():  # the first bad row, as the per-row path
            row = int(np.flatnonzero(wrong)[0])
            if counts[row] == 0:
                raise NullInRequiredField(row, "every member", f"union {self.describe}")
            names = ", ".join(f"member{i}" for i in np.flatnonzero(chosen[:, row]))
            raise SeveralMembersSet(row, f"{names} are all set; a union value has one branch")
        groups = []  # (rows, their encoded values)
        for i, (union_index, encoder) in enumerate(self.branches):
            rows = np.flatnonzero(chosen[i])
            if rows.size:
                branch = uvarint_bytes(2 * union_index)  # zigzag of the index
                groups.append(
                    (rows, encoder.encode(array.field(i).take(pa.array(rows)), header + branch))
                )
        if no_member.size and self.null_index is not None:  # (without one: refused above)
            null_value = header + uvarint_bytes(2 * self.null_index)
            groups.append((no_member, pa.array([null_value] * no_member.size, pa.binary())))
        absent = np.flatnonzero(~present)
        if absent.size:
            groups.append((absent, pa.nulls(absent.size, pa.binary())))
        return in_row_order(n, groups)


class SeveralMembersSet(ValueError):
    """A union struct row with more than one member set (``row``: its index)."""

    def __init__(self, row: int, message: str):
        super().__init__(message)
        self.row = row


def _union_encoder(node: dict, arrow_type: pa.DataType) -> UnionEncoder | None:
    """A UnionEncoder for a union of several branches each of which the flat path writes,
    from a struct of exactly ``member0`` .. ``memberN`` (as spark-avro reads the union)."""
    branches = [(i, b) for i, b in enumerate(node["branches"]) if b["type"] != "null"]
    null_index = next((i for i, b in enumerate(node["branches"]) if b["type"] == "null"), None)
    if (
        len(branches) < 2
        or not pa.types.is_struct(arrow_type)
        or [arrow_type.field(i).name for i in range(arrow_type.num_fields)]
        != [f"member{i}" for i in range(len(branches))]
    ):
        return None
    encoders = []
    for member, (union_index, branch) in enumerate(branches):
        encoder = build_encoder(branch, arrow_type.field(member).type)
        if encoder is None:
            return None
        encoders.append((union_index, encoder))
    return UnionEncoder(encoders, null_index, _describe(node))


def _describe(node: dict) -> str:
    if node["type"] == "union":
        return "[" + ", ".join(b.get("name", b["type"]) for b in node["branches"]) + "]"
    return node["type"]


def build_encoder(node: dict, arrow_type: pa.DataType) -> FlatEncoder | UnionEncoder | None:
    """A FlatEncoder (or, for a union of several flat branches, a UnionEncoder) writing
    columns of ``arrow_type`` with the parsed Avro schema ``node``, or None when the pair
    takes the general path."""
    if node["type"] == "union":
        union = _union_encoder(node, arrow_type)
        if union is not None:
            return union
    if node["type"] != "record":
        ft = flat_type(node)
        if ft is None or not _accepts(ft, arrow_type):
            return None
        return FlatEncoder([_field("value", node, ft, None, arrow_type)])
    if not pa.types.is_struct(arrow_type):
        return None
    children = {arrow_type.field(i).name: i for i in range(arrow_type.num_fields)}
    if len(children) != arrow_type.num_fields:
        return None  # duplicate names: which one is meant?
    fields = []
    for avro_field in node["fields"]:
        ft = flat_type(avro_field["type"])
        child = children.get(avro_field["name"])
        if ft is None or child is None:
            return None  # a field left to its default: general path
        child_type = arrow_type.field(child).type
        if not _accepts(ft, child_type):
            return None
        fields.append(_field(avro_field["name"], avro_field["type"], ft, child, child_type))
    return FlatEncoder(fields)


def _field(name, node, ft, child, arrow_type) -> _Field:
    millis = ft.logical in ("timestamp-millis", "local-timestamp-millis") and pa.types.is_timestamp(
        arrow_type
    )
    return _Field(name, _describe(node), ft, child, millis)


__all__ = [
    "FlatEncoder",
    "NullInRequiredField",
    "SeveralMembersSet",
    "UnionEncoder",
    "build_encoder",
]
