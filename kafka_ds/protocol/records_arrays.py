"""numpy/Arrow helpers for binary columns and varints, shared by the decoders, the encoder,
the writer and the partitioner.  No Python object per value."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import KafkaProtocolError
from .primitives import uvarint_size
from .records_layout import HEADER_STRUCT_TYPE, HEADERS_TYPE, record_schema

# --- Arrow helpers ------------------------------------------------------------------------


def _take_binary(pabuf, starts, lengths, nulls_possible=True):
    """Binary array of ``buffer[starts[i] : starts[i] + lengths[i]]`` (null if length < 0).

    ``starts`` must be increasing with non-overlapping values.  One Arrow take
    over an interleaved array copies the bytes; no Python object per value.
    """
    n = len(starts)
    if n == 0:
        return pa.array([], type=pa.binary())
    ln = np.maximum(lengths, 0) if nulls_possible else lengths
    offs = np.empty(2 * n, dtype=np.int32)
    offs[0::2] = starts
    offs[1::2] = starts + ln
    inter = pa.Array.from_buffers(pa.binary(), 2 * n - 1, [None, pa.py_buffer(offs), pabuf])
    out = pc.take(
        inter, int_array(np.arange(0, 2 * n, 2, dtype=np.int64), pa.int64()), boundscheck=False
    )
    if nulls_possible:
        valid = lengths >= 0
        if not valid.all():
            bufs = out.buffers()
            out = pa.Array.from_buffers(
                pa.binary(),
                n,
                [pa.py_buffer(np.packbits(valid, bitorder="little")), bufs[1], bufs[2]],
                offset=out.offset,
            )
    return out


def _binary_to_string(arr):
    try:
        return arr.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowException):
        return pa.array(
            [None if v is None else v.decode("utf-8", "replace") for v in arr.to_pylist()],
            type=pa.string(),
        )


# pyarrow imports pandas the first time it converts between numpy and Arrow (pa.array of a
# numpy array, np.asarray/to_numpy of an Arrow array, pa.scalar): 0.3-0.8 s of a Python
# worker's first task. The read path converts through the two helpers below instead.


def int_array(values, typ):
    """A fixed-width Arrow array of ``typ`` over numpy ``values`` (no nulls), zero-copy when
    they are contiguous."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(values)])


def numpy_values(arr, dtype) -> np.ndarray:
    """The values of a fixed-width Arrow array without nulls (``offset``, ``timestamp``
    viewed as int64) as a zero-copy numpy array of ``dtype``."""
    if arr.null_count:
        return arr.to_numpy(zero_copy_only=False)
    dtype = np.dtype(dtype)
    return np.frombuffer(
        arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize
    )


def _headers_array(counts, hkeys, hvalues):
    """list<struct<key string, value binary>>; null where a record has no headers."""
    n = len(counts)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    struct_arr = pa.StructArray.from_arrays([hkeys, hvalues], fields=list(HEADER_STRUCT_TYPE))
    has = counts > 0
    validity = None if has.all() else pa.py_buffer(np.packbits(has, bitorder="little"))
    return pa.Array.from_buffers(
        HEADERS_TYPE, n, [validity, pa.py_buffer(offsets)], children=[struct_arr]
    )


def _empty_columns(include_headers):
    return {f.name: pa.array([], f.type) for f in record_schema(include_headers)}


def as_binary_array(values, what):
    if values is None:
        return None
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        values = pa.array(list(values))
        if pa.types.is_null(values.type):
            values = values.cast(pa.binary())
    t = values.type
    if pa.types.is_binary(t):
        return values
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_string_view(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_null(t)
    ):
        return values.cast(pa.binary())
    raise KafkaProtocolError(f"{what} must be a binary or string array, got {t}")


def binary_lengths(arr, dtype=np.int64):
    """Lengths (``dtype``) of a binary or string array (large ones too), -1 for nulls."""
    large = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    buffer = arr.buffers()[1]
    if buffer is None:  # an empty (or all-null) array may have none
        return np.full(len(arr), -1 if arr.null_count else 0, dtype)
    offs = np.frombuffer(
        buffer, dtype=np.int64 if large else np.int32, count=len(arr) + 1 + arr.offset
    )
    offs = offs[arr.offset :]
    ln = (offs[1:] - offs[:-1]).astype(dtype, copy=False)
    if arr.null_count:
        ln[np.asarray(arr.is_null())] = -1
    return ln


def sum_terms(terms):
    """Sum of ints and arrays, the ints added first (one array pass per array): an int
    when there is no array."""
    total = sum(t for t in terms if isinstance(t, int))
    for t in terms:
        if not isinstance(t, int):
            total = t + total
    return total


def zigzag_encode(x):
    x = np.asarray(x, dtype=np.int64)
    return ((x << 1) ^ (x >> 63)).view(np.uint64)


def is_utf8(view) -> bool:
    """True when the bytes of ``view`` are valid UTF-8 (the careful check of a row the
    column-wise decoders' batch check refused)."""
    try:
        bytes(view).decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def peek_uvarints(data: np.ndarray, at: np.ndarray):
    """``(value uint64, size int64)`` of the unsigned varints starting at the positions
    ``at`` of the uint8 buffer ``data``, all at once (reads past the end are clipped: the
    caller checks sizes against its ends); size 0 where a varint is longer than 10 bytes.
    One pass per byte of the longest varint, over the rows still going."""
    byte = data.take(at, mode="clip")
    value = (byte & 0x7F).astype(np.uint64)
    size = np.ones(len(at), np.int64)
    going = np.flatnonzero(byte >= 0x80)
    k = 1
    while going.size:
        if k >= 10:
            size[going] = 0
            break
        byte = data.take(at[going] + k, mode="clip")
        value[going] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        size[going] += 1
        going = going[byte >= 0x80]
        k += 1
    return value, size


def varint_sizes(values, *, zigzag: bool):
    """Bytes of the varint of every value in ``values`` (a numpy array, or a 0-d one for a
    value every record shares): unsigned values as written, or (``zigzag``) signed int64s
    written zigzag-encoded. An int when every value has the same size, else an int64 array;
    one pass per size class the values span.

    Zigzag values of at least -1 (lengths, -1 for null) are sized without encoding them:
    zigzag(x) = 2x for x >= 0, so x takes a (j + 1)-th byte from 2x >= 1 << 7j on, and
    zigzag(-1) = 1 is one byte."""
    values = np.asarray(values)
    if values.size == 0:
        return np.zeros(values.shape, dtype=np.int64)
    low, top = int(values.min()), int(values.max())
    if zigzag and low < -1:
        values, zigzag = zigzag_encode(values), False
        low, top = int(values.min()), int(values.max())
    shift = 1 if zigzag else 0  # a byte boundary of 2x is one of x, a bit lower
    low = max(low, 0)
    narrow, width = uvarint_size(low << shift), uvarint_size(top << shift)
    sizes = narrow
    for j in range(narrow, width):
        sizes = sizes + (values >= (1 << 7 * j) >> shift)
    return sizes
