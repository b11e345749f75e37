"""Record headers, column-wise: a ``list<struct<key, value>>`` column flattened
(:func:`flatten_headers`), their encoded sizes per record (:func:`header_sizes`, which the
writer's record sizes in ``write/rows.py`` use too) and every record's header bytes
(:func:`encode_headers`) for ``records_encode``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from ..errors import KafkaProtocolError
from .records_arrays import as_binary_array, binary_lengths, varint_sizes, zigzag_encode
from .records_layout import HEADERS_TYPE
from .records_pieces import Varints, assemble, piece_offsets, record_meta


class HeaderSizes(NamedTuple):
    """Encoded sizes of flattened headers (see :func:`header_sizes`)."""

    key_zigzag: np.ndarray  # per header: zigzag key length (uint64)
    value_zigzag: np.ndarray  # per header: zigzag value length (null value: length -1)
    key_len_size: object  # per header: bytes of the key length varint (int: all)
    value_len_size: object  # per header: bytes of the value length varint (int: all)
    record_offsets: np.ndarray  # per record (n + 1): where its encoded headers start, from 0


def flatten_headers(headers) -> tuple[np.ndarray, pa.Array]:
    """``(record_offsets, flat)`` of a ``list<struct<key, value>>`` array.

    ``flat`` holds every header of every record in order; record i's are
    ``flat[record_offsets[i]:record_offsets[i + 1]]`` (int64, from 0).  A null list
    has no headers.
    """
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    offsets = np.asarray(headers.offsets, dtype=np.int64)
    if headers.null_count and (np.diff(offsets)[np.asarray(headers.is_null())] != 0).any():
        # Arrow lets a null list span entries; they are not headers (rare: copy then).
        headers = headers.fill_null(pa.scalar([], type=headers.type))
        offsets = np.asarray(headers.offsets, dtype=np.int64)
    flat = headers.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    return offsets - offsets[0], flat


def header_sizes(keys, values, record_offsets) -> HeaderSizes:
    """Sizes of the encoded headers with binary ``keys``/``values`` (flat, see
    :func:`flatten_headers`): per header ``varint(key length), key, varint(value
    length), value`` (a null value is length -1), summed per record."""
    key_len = binary_lengths(keys)
    value_len = binary_lengths(values)
    key_zigzag = zigzag_encode(key_len)
    value_zigzag = zigzag_encode(value_len)
    key_len_size = varint_sizes(key_len, zigzag=True)
    value_len_size = varint_sizes(value_len, zigzag=True)
    per_header = key_len_size + np.maximum(key_len, 0) + value_len_size + np.maximum(value_len, 0)
    cumulative = np.zeros(len(per_header) + 1, dtype=np.int64)
    np.cumsum(per_header, out=cumulative[1:])
    return HeaderSizes(
        key_zigzag, value_zigzag, key_len_size, value_len_size, cumulative[record_offsets]
    )


def encode_headers(headers, n):
    """(per-record header count int64, per-record header bytes as a binary array)."""
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    if not isinstance(headers, pa.Array):
        headers = pa.array(
            [None if h is None else [{"key": k, "value": v} for k, v in h] for h in headers],
            type=HEADERS_TYPE,
        )
    if len(headers) != n:
        raise KafkaProtocolError(f"headers has {len(headers)} rows, values has {n}")
    if not (pa.types.is_list(headers.type) or pa.types.is_large_list(headers.type)):
        raise KafkaProtocolError(
            f"headers must be a list<struct<key, value>> array, got {headers.type}"
        )
    record_offsets, flat = flatten_headers(headers)
    counts = np.diff(record_offsets)
    H = len(flat)
    if H == 0:
        return counts, None
    if flat.null_count:
        raise KafkaProtocolError("a header entry is null")
    hkeys = as_binary_array(flat.field("key"), "header key")
    hvals = as_binary_array(flat.field("value"), "header value")
    if hkeys.null_count:
        raise KafkaProtocolError("header keys must not be null")
    sizes = header_sizes(hkeys, hvals, record_offsets)
    # meta pieces per header: [key length varint], [value length varint]
    length_fields = [
        Varints(sizes.key_zigzag, sizes.key_len_size),
        Varints(sizes.value_zigzag, sizes.value_len_size),
    ]
    meta = record_meta(length_fields, H)
    moffs = piece_offsets([field.sizes for field in length_fields], H)
    idx = np.arange(H, dtype=np.int64)
    order = np.empty(4 * H, dtype=np.int64)
    order[0::4] = 2 * idx
    order[1::4] = 2 * H + idx
    order[2::4] = 2 * idx + 1
    order[3::4] = 3 * H + idx
    region, out = assemble(moffs, meta, [hkeys, hvals], order)
    rec_offs = sizes.record_offsets
    blob = pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(rec_offs.astype(np.int32)), pa.py_buffer(region)]
    )
    return counts, blob
