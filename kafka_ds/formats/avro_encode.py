"""The write fast path: flat Avro records encoded field by field across all rows at once.

The reverse of :mod:`kafka_ds.formats.avro_columns`. A :class:`FlatEncoder` is built once
per (Avro schema, Arrow type of the written column) when the schema is a flat record (or a
single flat type) whose every field the column holds with an Arrow type that maps to it
one to one (the pairs below); anything else (nested types, enums, decimals, unions of
several types, fields left to their defaults, int64 columns for Avro ``int``, ...) takes
the general path, fastavro per row.

Encoding writes no Python object per row. The fixed-size and varint parts of every row
(the Confluent header, union branch indexes, zigzag varints, string lengths, floats,
booleans) go a byte plane at a time into a (rows, width) uint8 slot matrix, one block of
columns per field, as wide as that field's longest encoding; a boolean mask of the same
shape marks the bytes each row really uses, and one boolean compress (row-major) yields
every row's bytes back to back. String and bytes values are not copied into the matrix:
the matrix is cut at each of them into "runs", and one Arrow take over the interleaved
pieces (run 0 of row 0, string 1 of row 0, run 1 of row 0, ..., run 0 of row 1, ...)
concatenates everything, as :mod:`kafka_ds.protocol.records_encode` assembles record
batches. The result is byte for byte what ``fastavro.schemaless_writer`` (and so
confluent-kafka's ``AvroSerializer``) writes for the same values.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .avro_columns import FlatType, flat_type
from .framing import binary_buffers

_MAX_VARINT = 10


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
    return pa.types.is_binary(t) or pa.types.is_large_binary(t)      # bytes


@dataclass(frozen=True)
class _Field:
    name: str            # as named in messages
    avro_type: str       # for messages
    flat: FlatType
    child: int | None    # index of the struct child, None: the column itself
    millis: bool         # an Arrow timestamp (microseconds) written as milliseconds


class FlatEncoder:
    """Encodes columns of one Arrow type with one flat Avro schema, column-wise."""

    def __init__(self, fields: list[_Field]):
        self.fields = fields

    def encode(self, array: pa.Array, header: bytes = b"") -> pa.BinaryArray:
        """Every row's Avro binary with ``header`` in front (b"": unframed); null rows stay
        null. Raises :class:`NullInRequiredField` for the first row that has a null where
        the schema has none."""
        n = len(array)
        present = _valid(array)
        slots = _Slots(n, present)
        if header:
            slots.constant(header)
        pieces = []                       # (binary array of the run, binary array of a value)
        for f in self.fields:
            column = array if f.child is None else array.field(f.child)
            valid = _valid(column) & present
            if f.flat.null_index is None:
                missing = present & ~valid
                if missing.any():
                    raise NullInRequiredField(int(np.flatnonzero(missing)[0]), f.name, f.avro_type)
            else:
                # a union's branch index, zigzag-encoded: 0 -> 0x00, 1 -> 0x02
                value_branch = 1 - f.flat.null_index
                slots.byte(np.where(valid, 2 * value_branch, 2 * f.flat.null_index), present)
            base = f.flat.base
            if base in ("string", "bytes"):
                _nulls, offsets, _data = binary_buffers(column)
                lengths = np.where(valid, np.diff(offsets), 0)
                slots.varint(lengths.astype(np.uint64) << np.uint64(1), valid)
                pieces.append((slots.cut(), _as_binary(column)))
            elif base == "boolean":
                values = np.zeros(n, np.uint8)
                if n:
                    values = np.unpackbits(np.frombuffer(column.buffers()[1], np.uint8),
                                           bitorder="little", count=column.offset + n)[column.offset:]
                slots.byte(values, valid)
            elif base in ("float", "double"):
                dtype = np.float32 if base == "float" else np.float64
                values = _numbers(column).astype(dtype, copy=False)
                slots.fixed(values.view(np.uint8).reshape(n, dtype().itemsize), valid)
            else:                                       # int / long, dates, timestamps
                values = _numbers(column).astype(np.int64, copy=False)
                if f.millis:
                    values = values // 1000             # fastavro floors to milliseconds
                zigzag = (values << 1) ^ (values >> 63)
                slots.varint(zigzag.view(np.uint64), valid)
        tail = slots.cut()
        return _assemble(n, present, pieces, tail)


def _valid(array: pa.Array) -> np.ndarray:
    if array.null_count == 0:
        return np.ones(len(array), bool)
    if pa.types.is_null(array.type):
        return np.zeros(len(array), bool)
    return array.is_valid().to_numpy(zero_copy_only=False)


def _numbers(column: pa.Array) -> np.ndarray:
    """The values buffer of a fixed-width column as numpy (garbage under nulls)."""
    t = column.type
    if pa.types.is_timestamp(t) or pa.types.is_date32(t):
        t = pa.int64() if pa.types.is_timestamp(t) else pa.int32()
    dtype = t.to_pandas_dtype()
    buffer = column.buffers()[1]
    if buffer is None:
        return np.zeros(len(column), dtype)
    return np.frombuffer(buffer, dtype, count=column.offset + len(column))[column.offset:]


def _as_binary(column: pa.Array) -> pa.Array:
    if pa.types.is_string(column.type):
        return column.view(pa.binary())
    if pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type):
        return column.cast(pa.binary())
    return column


class _Slots:
    """The slot matrix of the current run: blocks of byte columns per row, and the mask
    of the bytes each row uses."""

    def __init__(self, n: int, present: np.ndarray):
        self.n = n
        self.present = present
        self.blocks = []                  # (uint8 (n, w), bool (n, w) or None: all of present)

    def constant(self, data: bytes):
        block = np.broadcast_to(np.frombuffer(data, np.uint8), (self.n, len(data)))
        self.blocks.append((block, None))

    def byte(self, values: np.ndarray, used: np.ndarray):
        self.blocks.append((values.astype(np.uint8, copy=False).reshape(self.n, 1),
                            used.reshape(self.n, 1)))

    def fixed(self, values: np.ndarray, used: np.ndarray):
        self.blocks.append((values, np.broadcast_to(used[:, None], values.shape)))

    def varint(self, u: np.ndarray, used: np.ndarray):
        """Unsigned LEB128 of ``u`` (uint64) in the rows ``used``."""
        top = int(u[used].max()) if used.any() else 0
        width = max(1, (top.bit_length() + 6) // 7)
        block = np.empty((self.n, width), np.uint8)
        sizes = np.ones(self.n, np.int64)
        for k in range(width):
            group = (u >> np.uint64(7 * k)) & np.uint64(0x7F)
            if k + 1 < width:
                longer = u >= np.uint64(1 << (7 * (k + 1)))
                sizes += longer
                group |= longer.astype(np.uint64) << np.uint64(7)
            block[:, k] = group
        mask = np.arange(width) < sizes[:, None]
        mask &= used[:, None]
        self.blocks.append((block, mask))

    def cut(self) -> pa.BinaryArray:
        """The run so far as a binary array of ``n`` rows (empty rows where nothing is
        used); starts a new run."""
        blocks, self.blocks = self.blocks, []
        if not blocks:
            return None
        matrix = np.concatenate([b for b, _ in blocks], axis=1)
        mask = np.concatenate([np.broadcast_to(self.present[:, None], b.shape) if m is None
                               else m for b, m in blocks], axis=1)
        data = matrix[mask]
        offsets = np.zeros(self.n + 1, np.int32)
        np.cumsum(mask.sum(axis=1), out=offsets[1:])
        return pa.Array.from_buffers(pa.binary(), self.n,
                                     [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _assemble(n, present, pieces, tail) -> pa.BinaryArray:
    """Rows from the runs and values, interleaved per row by one Arrow take."""
    parts = [p for run, value in pieces for p in (run, value) if p is not None]
    if tail is not None:
        parts.append(tail)
    if not parts:                                   # a record of no fields: no bytes
        return _with_validity(n, present, pa.py_buffer(np.zeros(n + 1, np.int32)), pa.py_buffer(b""))
    if len(parts) == 1 and not pieces:
        run = parts[0]
        if present.all():
            return run
        return _with_validity(n, present, run.buffers()[1], run.buffers()[2])
    count = len(parts)
    order = (np.arange(count, dtype=np.int64)[None, :] * n + np.arange(n)[:, None]).ravel()
    combined = pa.concat_arrays(parts)
    # absent rows take nothing: their value pieces may hold bytes under a null row
    order_mask = None if present.all() else np.repeat(~present, count)
    taken = pc.take(combined, pa.array(order, mask=order_mask), boundscheck=False)
    offsets = np.frombuffer(taken.buffers()[1], np.int32, count=len(taken) + 1)
    row_offsets = np.ascontiguousarray(offsets[::count])
    return _with_validity(n, present, pa.py_buffer(row_offsets), taken.buffers()[2])


def _with_validity(n, present, offsets, data) -> pa.BinaryArray:
    nulls = int(n - present.sum())
    validity = None if nulls == 0 else pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, [validity, offsets, data], null_count=nulls)


def _describe(node: dict) -> str:
    if node["type"] == "union":
        return "[" + ", ".join(b["type"] for b in node["branches"]) + "]"
    return node["type"]


def build_encoder(node: dict, arrow_type: pa.DataType) -> FlatEncoder | None:
    """A FlatEncoder writing columns of ``arrow_type`` with the parsed Avro schema
    ``node``, or None when the pair takes the general path."""
    if node["type"] != "record":
        ft = flat_type(node)
        if ft is None or not _accepts(ft, arrow_type):
            return None
        return FlatEncoder([_field("value", node, ft, None, arrow_type)])
    if not pa.types.is_struct(arrow_type):
        return None
    children = {arrow_type.field(i).name: i for i in range(arrow_type.num_fields)}
    if len(children) != arrow_type.num_fields:
        return None                                 # duplicate names: which one is meant?
    fields = []
    for avro_field in node["fields"]:
        ft = flat_type(avro_field["type"])
        child = children.get(avro_field["name"])
        if ft is None or child is None:
            return None                             # a field left to its default: general path
        child_type = arrow_type.field(child).type
        if not _accepts(ft, child_type):
            return None
        fields.append(_field(avro_field["name"], avro_field["type"], ft, child, child_type))
    return FlatEncoder(fields)


def _field(name, node, ft, child, arrow_type) -> _Field:
    millis = ft.logical in ("timestamp-millis", "local-timestamp-millis") and \
        pa.types.is_timestamp(arrow_type)
    return _Field(name, _describe(node), ft, child, millis)


__all__ = ["FlatEncoder", "NullInRequiredField", "build_encoder"]
