"""One v2 record batch from Arrow arrays, column-wise (the encoder).

Every varint field of the records (length, timestampDelta, offsetDelta, keyLen, valueLen,
headerCount) is written a byte plane at a time into one (records, width) uint8 slot
matrix; one boolean mask drops the bytes a shorter varint leaves unused.  Fields whose
records all have one size need no mask, equal timestamps are a constant byte and the
offset deltas come from a table kept across batches.  One Arrow take then copies the
batch header's space, the meta pieces, keys, values (and header bytes) into the buffer
that is sent: a record's headerCount and the next record's first varints are one piece.
"""

from __future__ import annotations

import struct
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from crc32c import crc32c as _crc32c

from ..errors import KafkaProtocolError
from . import compression as _comp
from .records_arrays import (
    as_binary_array,
    binary_lengths,
    sum_terms,
    zigzag_encode,
)
from .records_headers import encode_headers
from .records_layout import (
    _V2_ATTRIBUTES_OFFSET,
    _V2_CRC_OFFSET,
    _V2_HEADER,
    ATTR_TRANSACTIONAL,
    LOG_OVERHEAD,
    V2_HEADER_SIZE,
)
from .records_pieces import OffsetDeltas, Varints, assemble, piece_offsets, record_meta


def _zigzag_lengths(lengths, has_nulls):
    """Zigzag (uint32) of int32 lengths, -1 for nulls."""
    if not has_nulls:
        return (lengths << 1).view(np.uint32)
    return ((lengths << 1) ^ (lengths >> 31)).view(np.uint32)


def _binary_chunks(values, what):
    """A binary or string array (or chunked array) as a list of binary arrays, not copied
    into one: the encoder's take reads them where they are."""
    if isinstance(values, pa.ChunkedArray):
        if not pa.types.is_binary(values.type):
            values = pa.chunked_array(
                [as_binary_array(chunk, what) for chunk in values.chunks], pa.binary()
            )
        return values.chunks or [pa.array([], pa.binary())]
    return [as_binary_array(values, what)]


def _chunk_lengths(chunks):
    """int32 lengths (-1 for nulls) of the concatenation of binary arrays."""
    if len(chunks) == 1:
        return binary_lengths(chunks[0], np.int32)
    # one Arrow call for all the chunks (a numpy pass per chunk costs more)
    lengths = pc.binary_length(pa.chunked_array(chunks, pa.binary()))
    if any(chunk.null_count for chunk in chunks):
        lengths = lengths.fill_null(-1)
    return np.concatenate([chunk.to_numpy() for chunk in lengths.chunks])


_TAKE_BASE = np.zeros(0, dtype=np.int32)


def _order_merged(n, first):
    """Take order of a batch without headers: piece ``first`` (the batch header), then per
    record its first piece, key, valueLen, value, and the last headerCount; the meta
    pieces are [first 0, valueLen 0, headerCount 0 + first 1, valueLen 1, ...,
    headerCount n-1] (2n + 1), then come the keys and the values."""
    global _TAKE_BASE
    base = _TAKE_BASE  # read once: another thread may replace it
    if len(base) < 4 * n:
        i = np.arange(max(n, 1 << 13, len(base) // 2), dtype=np.int32)
        base = _TAKE_BASE = np.stack([2 * i, i + 1, 2 * i + 1, i + 1], axis=1).reshape(-1)
    order = np.empty(4 * n + 2, dtype=np.int32)
    order[0] = first
    pieces = order[1:-1]
    pieces[:] = base[: 4 * n]
    pieces[1::4] += 2 * n  # keys and values follow the 2n + 1 meta pieces (1-D passes:
    pieces[3::4] += 3 * n  # numpy is slow at broadcasting over rows of 4)
    order[-1] = 2 * n
    return order


def _order_keyless(n, first):
    """Take order of a batch without keys or headers: piece ``first`` (the batch header),
    then per record its meta piece and value, and the last headerCount; the meta pieces
    are [first + valueLen of record 0, headerCount 0 + first 1 + valueLen 1, ...,
    headerCount n-1] (n + 1), then come the values."""
    order = np.empty(2 * n + 2, dtype=np.int32)
    order[0] = first
    order[1:-1:2] = np.arange(n, dtype=np.int32)
    np.add(order[1:-1:2], n + 1, out=order[2:-1:2])
    order[-1] = n
    return order


def _merged_offsets(piece_sizes, count_sizes, n):
    """int32 offsets of the meta pieces of a batch without headers, where a record's
    headerCount and the next record's first piece are adjacent: one piece.  Per record
    the pieces have ``piece_sizes`` (ints or arrays), the first of them joined by the
    previous record's headerCount (``count_sizes``); the last headerCount ends alone."""
    k = len(piece_sizes)
    sizes = np.empty(k * n + 1, dtype=np.int32)
    for p, size in enumerate(piece_sizes):
        sizes[p:-1:k] = size
    sizes[-1] = 0
    sizes[k::k] += count_sizes
    offsets = np.zeros(k * n + 2, dtype=np.int32)
    np.cumsum(sizes, out=offsets[1:])
    return offsets


def _order_with_headers(n, first):
    """Take order of a batch with headers: piece ``first`` (the batch header), then per
    record its first piece, key, valueLen, value, headerCount, header bytes; the meta
    pieces are [first, valueLen, headerCount] per record (3n), then come keys, values,
    header bytes."""
    i = np.arange(n, dtype=np.int32)
    order = np.empty(6 * n + 1, dtype=np.int32)
    order[0] = first
    order[1:].reshape(n, 6)[:] = np.stack(
        [3 * i, 3 * n + i, 3 * i + 1, 4 * n + i, 3 * i + 2, 5 * n + i], axis=1
    )
    return order


# The batch header's place at the start of the take's output: uncompressed records are
# copied once, into the buffer that is sent. Built from buffers: ``pa.array`` of a Python
# list would import pandas (pyarrow checks for pandas types), 0.3-0.8 s of a first query.
_HEADER_SPACE = pa.Array.from_buffers(
    pa.binary(),
    1,
    [
        None,
        pa.py_buffer(np.array([0, V2_HEADER_SIZE], dtype=np.int32)),
        pa.py_buffer(bytes(V2_HEADER_SIZE)),
    ],
)


def encode_record_batch(
    *,
    keys,
    values,
    headers=None,
    timestamps_ms=None,
    base_offset=0,
    compression=0,
    producer_id=-1,
    producer_epoch=-1,
    base_sequence=-1,
    is_transactional=False,
    partition_leader_epoch=-1,
    now_ms=None,
) -> bytes:
    """Build one v2 record batch (magic 2) from Arrow arrays, as ``bytes``; the arguments
    are those of :func:`encode_record_batch_buffer`."""
    return bytes(
        encode_record_batch_buffer(
            keys=keys,
            values=values,
            headers=headers,
            timestamps_ms=timestamps_ms,
            base_offset=base_offset,
            compression=compression,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=is_transactional,
            partition_leader_epoch=partition_leader_epoch,
            now_ms=now_ms,
        )
    )


def encode_record_batch_buffer(
    *,
    keys,
    values,
    headers=None,
    timestamps_ms=None,
    base_offset=0,
    compression=0,
    producer_id=-1,
    producer_epoch=-1,
    base_sequence=-1,
    is_transactional=False,
    partition_leader_epoch=-1,
    now_ms=None,
) -> memoryview:
    """Build one v2 record batch (magic 2) from Arrow arrays, into a new writable buffer
    (a ``memoryview`` of bytes: the writer sends it as it is, no copy into ``bytes``).

    ``keys``/``values``: binary or string arrays or chunked arrays (nullable;
    ``keys=None`` means all keys null).  ``headers``: ``list<struct<key: string, value:
    binary>>`` array (or a list of ``[(key, value), ...]``/None per record) or None.
    ``timestamps_ms``: int64 array (nulls -> now) or None (all now).
    ``compression``: codec id or name.  Offsets deltas are 0..n-1.
    """
    if values is None:
        raise KafkaProtocolError("values is required")
    values = _binary_chunks(values, "values")
    value_len = _chunk_lengths(values)
    n = len(value_len)
    if n == 0:
        raise KafkaProtocolError("cannot encode an empty record batch")
    codec = _comp.codec_id(compression)
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    ts = _timestamps(timestamps_ms, n, now_ms)
    first_ts = int(ts[0])
    max_ts = int(ts.max())

    # Each record: length, attributes (0), timestampDelta, offsetDelta, keyLen, key,
    # valueLen, value, headerCount, headers -- the varints written column-wise.
    keys_absent = keys is None
    key_field, key_bytes, keys = _binary_field(keys, n, "keys")
    value_field, value_bytes, _ = _binary_field(values, n, "values", value_len)
    ts_field = Varints(0 if max_ts == int(ts.min()) else zigzag_encode(ts - first_ts))
    offset_field = OffsetDeltas(n)
    header_bytes: int | np.ndarray = 0
    if headers is not None:
        header_counts, header_blob = encode_headers(headers, n)
        count_field = Varints((header_counts << 1).astype(np.uint32))
        if header_blob is not None:
            header_offsets = np.frombuffer(header_blob.buffers()[1], dtype=np.int32, count=n + 1)
            header_bytes = np.diff(header_offsets)
    else:
        header_blob = None
        count_field = Varints(0)
    body = sum_terms(
        [
            1,
            ts_field.sizes,
            offset_field.sizes,
            key_field.sizes,
            key_bytes,
            value_field.sizes,
            value_bytes,
            count_field.sizes,
            header_bytes,
        ]
    )
    length_field = Varints((np.asarray(body, dtype=np.int32) << 1).view(np.uint32))
    attributes = Varints(0)

    first = [length_field, attributes, ts_field, offset_field, key_field]
    meta = record_meta(first + [value_field, count_field], n)
    first_size = sum_terms([field.sizes for field in first])
    if header_blob is not None:
        offsets = piece_offsets([first_size, value_field.sizes, count_field.sizes], n)
        sources = [keys, values, header_blob]
        order = _order_with_headers(n, first=6 * n)
    elif keys_absent:
        # No key bytes either: a record's first piece and its valueLen are one piece.
        offsets = _merged_offsets(
            [sum_terms([first_size, value_field.sizes])], count_field.sizes, n
        )
        sources = [values]
        order = _order_keyless(n, first=2 * n + 1)
    else:
        offsets = _merged_offsets([first_size, value_field.sizes], count_field.sizes, n)
        sources = [keys, values]
        order = _order_merged(n, first=4 * n + 1)
    if codec == 0:
        sources.append(_HEADER_SPACE)
        out, _keepalive = assemble(offsets, meta, sources, order)
    else:
        region, _keepalive = assemble(offsets, meta, sources, order[1:])
        region = _comp.compress(codec, region)
        # numpy's allocator, not bytearray's: a fresh large bytearray page-faults as it fills
        out = np.empty(V2_HEADER_SIZE + len(region), dtype=np.uint8)
        out[V2_HEADER_SIZE:] = np.frombuffer(region, dtype=np.uint8)
        out = out.data  # a memoryview of the array, no copy
    attrs = codec | (ATTR_TRANSACTIONAL if is_transactional else 0)
    _V2_HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        2,
        0,
        attrs,
        n - 1,
        first_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        n,
    )
    struct.pack_into(">I", out, _V2_CRC_OFFSET, _crc32c(out[_V2_ATTRIBUTES_OFFSET:]))
    return out


def _binary_field(column, n, what, lengths=None):
    """(length varints, bytes per record, binary chunks) of a key or value column
    (``lengths`` given: ``column`` is already its binary chunks); ``None`` keys are all
    null."""
    if column is None:
        return Varints(1), 0, [pa.nulls(n, pa.binary())]  # zigzag(-1): null
    chunks = column
    if lengths is None:
        chunks = _binary_chunks(column, what)
        lengths = _chunk_lengths(chunks)
        if len(lengths) != n:
            raise KafkaProtocolError(f"{what} has {len(lengths)} rows, values has {n}")
    has_nulls = any(chunk.null_count for chunk in chunks)
    field = Varints(_zigzag_lengths(lengths, has_nulls))
    return field, np.maximum(lengths, 0) if has_nulls else lengths, chunks


def _timestamps(timestamps_ms, n, now_ms):
    """int64 epoch milliseconds per record (nulls and ``None``: now)."""
    if timestamps_ms is None:
        return np.full(n, now_ms, dtype=np.int64)
    if isinstance(timestamps_ms, (pa.Array, pa.ChunkedArray)):
        tarr = timestamps_ms
        if pa.types.is_timestamp(tarr.type):
            tarr = pc.cast(tarr, pa.timestamp("ms", tz=tarr.type.tz)).cast(pa.int64())
        ts = np.asarray(tarr.cast(pa.int64()).fill_null(now_ms), dtype=np.int64)
    else:
        ts = np.asarray(timestamps_ms, dtype=np.int64)
    if len(ts) != n:
        raise KafkaProtocolError(f"timestamps_ms has {len(ts)} rows, values has {n}")
    return ts
