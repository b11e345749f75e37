"""Every row's bytes built column-wise: the slot matrix, and one take over pieces.

Used by the column-wise encoders (:mod:`kafka_ds.formats.avro.encode`,
:mod:`kafka_ds.formats.protobuf.encode`). Small parts of every row (headers, tags, union
branch indexes, varints, fixed-width numbers) go a byte plane at a time into a
(rows, width) uint8 slot matrix, one block of columns per part, as wide as that part's
longest encoding; a boolean mask of the same shape marks the bytes each row really uses,
and one boolean compress (row-major) yields every row's bytes back to back. Variable-size
values (strings, bytes) are not copied into the matrix: the matrix is cut at each of them
into "runs", and one Arrow take over the interleaved pieces (run 0 of row 0, value 1 of
row 0, run 1 of row 0, ..., run 0 of row 1, ...) concatenates everything, as
:mod:`kafka_ds.protocol.records_encode` assembles record batches.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def valid_mask(array: pa.Array) -> np.ndarray:
    """bool per row: not null."""
    if array.null_count == 0:
        return np.ones(len(array), bool)
    if pa.types.is_null(array.type):
        return np.zeros(len(array), bool)
    return array.is_valid().to_numpy(zero_copy_only=False)


def fixed_values(column: pa.Array) -> np.ndarray:
    """The values buffer of a fixed-width column as numpy (garbage under nulls); dates
    and timestamps as their integers."""
    t = column.type
    if pa.types.is_timestamp(t) or pa.types.is_date32(t):
        t = pa.int64() if pa.types.is_timestamp(t) else pa.int32()
    dtype = t.to_pandas_dtype()
    buffer = column.buffers()[1]
    if buffer is None:
        return np.zeros(len(column), dtype)
    return np.frombuffer(buffer, dtype, count=column.offset + len(column))[column.offset :]


def boolean_values(column: pa.Array) -> np.ndarray:
    """uint8 0/1 per row of a boolean column (garbage under nulls)."""
    n = len(column)
    if not n:
        return np.zeros(0, np.uint8)
    bits = np.frombuffer(column.buffers()[1], np.uint8)
    return np.unpackbits(bits, bitorder="little", count=column.offset + n)[column.offset :]


def as_binary(column: pa.Array) -> pa.Array:
    """A string/binary column as ``binary`` (32-bit offsets), zero copy where it can."""
    if pa.types.is_string(column.type):
        return column.view(pa.binary())
    if pa.types.is_binary(column.type):
        return column
    return column.cast(pa.binary())


def _varint_width(value: int) -> int:
    """Bytes of the unsigned LEB128 varint of ``value``."""
    return max(1, (value.bit_length() + 6) // 7)


class RowBytes:
    """The slot matrix of the current run, and the runs and values cut so far.

    Every ``used`` mask given to it must be a subset of ``present``. A block is kept with
    the bytes each row uses: ``None`` when every present row uses all of its width (a
    header, a non-null fixed-width field, a varint as long in every row), so that a run of
    such blocks is its matrix as it stands, with no compress and no count per row."""

    def __init__(self, present: np.ndarray):
        self.n = len(present)
        self.present = present  # rows that get bytes (the others stay null)
        self.present_rows = int(np.count_nonzero(present))
        # (uint8 (n, w), bool (n, w) mask or None, int64 (n,) bytes per row or None);
        # None, None: every present row uses all w bytes
        self.blocks: list[tuple[np.ndarray, np.ndarray | None, np.ndarray | None]] = []
        self.parts: list[pa.Array] = []  # binary arrays of n rows, in row order of bytes

    def _full(self, used: np.ndarray | None) -> bool:
        return used is None or int(np.count_nonzero(used)) == self.present_rows

    def _add(self, block: np.ndarray, used: np.ndarray | None):
        """A block every ``used`` row takes whole."""
        if used is None or self._full(used):
            self.blocks.append((block, None, None))
        else:
            width = block.shape[1]
            self.blocks.append(
                (block, np.broadcast_to(used[:, None], block.shape), used.astype(np.int64) * width)
            )

    def constant(self, data: bytes, used: np.ndarray | None = None):
        """The same bytes in every row ``used`` (None: every present row)."""
        if not data:
            return
        self._add(np.broadcast_to(np.frombuffer(data, np.uint8), (self.n, len(data))), used)

    def byte(self, values: np.ndarray, used: np.ndarray):
        self._add(values.astype(np.uint8, copy=False).reshape(self.n, 1), used)

    def fixed(self, values: np.ndarray, used: np.ndarray):
        """Little-endian bytes of a fixed-width numpy column."""
        raw = np.ascontiguousarray(values).view(np.uint8).reshape(self.n, values.dtype.itemsize)
        self._add(raw, used)

    def varint(self, u: np.ndarray, used: np.ndarray):
        """Unsigned LEB128 of ``u`` (uint64) in the rows ``used``."""
        full = self._full(used)
        values = u if full and self.present_rows == self.n else u[used]
        if not len(values):
            return
        width = _varint_width(int(values.max()))
        if full and _varint_width(int(values.min())) == width:
            # as long in every row: every byte but the last has its continuation bit
            block = np.empty((self.n, width), np.uint8)
            for k in range(width - 1):
                block[:, k] = (u >> np.uint64(7 * k)) | np.uint64(0x80)  # low byte kept
            block[:, width - 1] = u >> np.uint64(7 * (width - 1))
            self.blocks.append((block, None, None))
            return
        block = np.empty((self.n, width), np.uint8)
        sizes = np.ones(self.n, np.int64)
        for k in range(width):
            group = (u >> np.uint64(7 * k)) & np.uint64(0x7F)
            if k + 1 < width:
                longer = u >= np.uint64(1 << (7 * (k + 1)))
                sizes += longer
                group |= longer.astype(np.uint64) << np.uint64(7)
            block[:, k] = group
        sizes *= used
        self.blocks.append((block, np.arange(width) < sizes[:, None], sizes))

    def value(self, column: pa.Array):
        """A string/binary column's bytes, after the run so far (rows where it is null
        take nothing)."""
        self._cut()
        self.parts.append(as_binary(column))

    def _cut(self):
        blocks, self.blocks = self.blocks, []
        if not blocks:
            return
        n, present = self.n, self.present
        matrix = np.concatenate([b for b, _, _ in blocks], axis=1)
        width = matrix.shape[1]
        if self.present_rows == n and all(m is None for _, m, _ in blocks):
            # every row uses every byte: the matrix is the run, row after row
            data = matrix.reshape(-1)
            offsets = np.arange(0, (n + 1) * width, width, dtype=np.int64)
        else:
            mask = np.concatenate(
                [
                    np.broadcast_to(present[:, None], b.shape) if m is None else m
                    for b, m, _ in blocks
                ],
                axis=1,
            )
            data = matrix[mask]
            full_width = sum(b.shape[1] for b, m, _ in blocks if m is None)
            lengths = present.astype(np.int64) * full_width
            for _, m, sizes in blocks:
                if m is not None:
                    lengths += sizes
            offsets = np.zeros(n + 1, np.int64)
            np.cumsum(lengths, out=offsets[1:])
        if offsets[-1] >= 1 << 31:
            raise OverflowError("a run of more than 2 GiB")
        self.parts.append(
            pa.Array.from_buffers(
                pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
            )
        )

    def finish(self) -> pa.BinaryArray:
        """Every row's bytes; rows not ``present`` are null."""
        self._cut()
        n, present, parts = self.n, self.present, self.parts
        if not parts:  # nothing written: empty rows
            return _binary(n, present, pa.py_buffer(np.zeros(n + 1, np.int32)), pa.py_buffer(b""))
        if len(parts) == 1 and parts[0].null_count == 0:
            run = parts[0]  # one run: already every row's bytes
            return _binary(n, present, run.buffers()[1], run.buffers()[2])
        count = len(parts)
        combined = pa.concat_arrays(parts)
        if self.present_rows == n:
            order = _interleaving(count, n)
        else:  # absent rows take nothing: a value column may hold bytes under a null row
            order = pa.array(_interleaving(count, n).to_numpy(), mask=np.repeat(~present, count))
        taken = pc.take(combined, order, boundscheck=False)
        offsets = np.frombuffer(taken.buffers()[1], np.int32, count=len(taken) + 1)
        row_offsets = np.ascontiguousarray(offsets[::count])
        return _binary(n, present, pa.py_buffer(row_offsets), taken.buffers()[2])


def set_members(array: pa.StructArray, members: int):
    """``(present, set, counts)`` of a struct column whose fields are alternatives (one
    per union branch or subject): bool per row, bool (members, rows) -- the field is set in
    a present row --, and how many fields each row has set."""
    present = valid_mask(array)
    chosen = np.stack([valid_mask(array.field(i)) & present for i in range(members)])
    return present, chosen, chosen.sum(axis=0)


def in_row_order(n: int, groups: list[tuple[np.ndarray, pa.Array]]) -> pa.BinaryArray:
    """The binary values of ``n`` rows encoded in groups: each ``(rows, values)`` the row
    indexes of a group and their values in that order; together the groups cover every
    row once. One concatenation and one take put them back in row order."""
    if not groups:
        return pa.array([], pa.binary())
    position = np.empty(n, np.int64)
    position[np.concatenate([rows for rows, _ in groups])] = np.arange(n)
    values = pa.concat_arrays([v.cast(pa.binary()) for _, v in groups])
    return values.take(pa.array(position))


@functools.lru_cache(maxsize=8)
def _interleaving(count: int, n: int) -> pa.Array:
    """The take order of ``count`` parts of ``n`` rows concatenated: part 0 of row 0, part
    1 of row 0, ..., part 0 of row 1, ... (kept: a task's batches are mostly of one size)."""
    return pa.array((np.arange(count, dtype=np.int64)[None, :] * n + np.arange(n)[:, None]).ravel())


def _binary(n, present, offsets, data) -> pa.BinaryArray:
    nulls = int(n - present.sum())
    validity = None if nulls == 0 else pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, [validity, offsets, data], null_count=nulls)
