"""The record batch encoder's building blocks, column-wise (no Python object per record).

A varint field of every record is written a byte plane at a time (:class:`Varints`; the
offset deltas, the same in every batch, from a table: :class:`OffsetDeltas`), the fields
of a record side by side in one slot matrix (:func:`record_meta`), and byte pieces are
concatenated in any order with one Arrow take (:func:`assemble`). ``records_encode``
builds a batch with them, ``records_headers`` the records' headers.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .primitives import uvarint_size
from .records_arrays import varint_sizes


class Varints:
    """One varint field of every record (``values``: unsigned, as written; a 0-d array
    when all records have the same), laid out in ``width`` slot columns per record:
    byte j of a record's varint in column j.  Records whose varint is shorter than
    ``width`` leave the last columns unused (``longer`` says which are used)."""

    def __init__(self, values, sizes=None):
        self.values = np.asarray(values)
        # an int while every record's varint has the same size (``sizes``: known already)
        self.sizes = varint_sizes(self.values, zigzag=False) if sizes is None else sizes
        self.narrow = uvarint_size(int(self.values.min()))
        self.width = uvarint_size(int(self.values.max()))
        # longer[k]: the record's varint has byte narrow + k
        self.longer = [self.sizes > j for j in range(self.narrow, self.width)]

    def write(self, slots, used, col):
        """Write every record's varint at ``slots[:, col:col + width]``; clear the
        unused columns in ``used``."""
        for j in range(self.width):
            byte = self.values >> (7 * j) if j else self.values
            if j + 1 < self.narrow:
                byte = byte | 0x80  # every record's varint goes on: continuation bit
            elif j + 1 < self.width:
                byte = byte | (self.longer[j + 1 - self.narrow].view(np.uint8) << 7)
            slots[:, col + j] = byte  # the uint8 cast keeps the low 7 bits and bit 7
        for k, has_byte in enumerate(self.longer):
            used[:, col + self.narrow + k] = has_byte


class OffsetDeltas:
    """The offset delta varints of records 0..n-1 (zigzag: 2i), sliced from a table built
    for the largest batch yet: the same in every batch, so written once."""

    _table = None  # (rows, bytes, used, sizes) of the varints of 0..rows-1

    def __init__(self, n):
        table = OffsetDeltas._table
        if table is None or table[0] < n:
            rows = max(n, 1 << 13, 2 * table[0] if table else 0)
            field = Varints(np.arange(rows, dtype=np.uint32) << 1)
            slots = np.empty((rows, field.width), dtype=np.uint8)
            used = np.ones((rows, field.width), dtype=bool)
            field.write(slots, used, 0)
            # byte j of every record's varint contiguous: copied a column at a time
            table = OffsetDeltas._table = (
                rows,
                np.ascontiguousarray(slots.T),
                np.ascontiguousarray(used.T),
                field.sizes,
            )
        _, self.bytes, self.used, sizes = table
        self.narrow = 1
        self.width = uvarint_size(2 * (n - 1))
        self.n = n
        self.sizes = sizes[:n] if self.width > 1 else 1

    def write(self, slots, used, col):
        for j in range(self.width):
            slots[:, col + j] = self.bytes[j, : self.n]
        for j in range(1, self.width):
            used[:, col + j] = self.used[j, : self.n]


def record_meta(fields, n):
    """The varint bytes of every record, record after record (``fields``:
    :class:`Varints`/:class:`OffsetDeltas` in a record's order).  The fields are written
    into one (n, width) slot matrix, the unused slot bytes dropped with one boolean mask."""
    slots = np.empty((n, sum(field.width for field in fields)), dtype=np.uint8)
    uneven = any(field.narrow != field.width for field in fields)
    used = np.ones(slots.shape, dtype=bool) if uneven else None
    col = 0
    for field in fields:
        field.write(slots, used, col)
        col += field.width
    return slots[used] if uneven else slots.reshape(-1)


def piece_offsets(sizes, n):
    """int32 offsets of pieces whose sizes (ints or arrays of n) repeat per record:
    record 0's pieces, record 1's, ..."""
    matrix = np.empty((n, len(sizes)), dtype=np.int32)
    for p, size in enumerate(sizes):
        matrix[:, p] = size
    offsets = np.zeros(matrix.size + 1, dtype=np.int32)
    np.cumsum(matrix.reshape(-1), out=offsets[1:])
    return offsets


def assemble(pieces_meta, meta_buf, sources, order):
    """Concatenate byte pieces in ``order`` with one Arrow take.

    ``pieces_meta`` are offsets (len m+1) of m pieces in ``meta_buf``; ``sources`` are
    further binary arrays (or lists of arrays, taken as their concatenation) appended
    after the meta pieces.
    """
    meta = pa.Array.from_buffers(
        pa.binary(),
        len(pieces_meta) - 1,
        [None, pa.py_buffer(np.asarray(pieces_meta, dtype=np.int32)), pa.py_buffer(meta_buf)],
    )
    arrays = [meta]
    for source in sources:
        arrays.extend(source if isinstance(source, list) else [source])
    combined = pa.concat_arrays(arrays)
    out = pc.take(combined, pa.array(order), boundscheck=False)
    offs = np.frombuffer(out.buffers()[1], dtype=np.int32, count=len(out) + 1 + out.offset)
    lo = int(offs[out.offset])
    hi = int(offs[out.offset + len(out)])
    return memoryview(out.buffers()[2]).cast("B")[lo:hi], out
