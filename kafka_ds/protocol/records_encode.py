"""One v2 record batch from Arrow arrays, column-wise (the encoder)."""
from __future__ import annotations

import struct
import time
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from crc32c import crc32c as _crc32c

from . import compression as _comp
from .errors import KafkaProtocolError
from .records_arrays import (
    as_binary_array, binary_lengths, varint_sizes, write_varints, zigzag_encode,
)
from .records_layout import (
    _V2_ATTRIBUTES_OFFSET, _V2_CRC_OFFSET, _V2_HEADER, ATTR_TRANSACTIONAL, HEADERS_TYPE,
    LOG_OVERHEAD, V2_HEADER_SIZE,
)


def _assemble(pieces_meta, meta_buf, sources, order):
    """Concatenate byte pieces in ``order`` with one Arrow take.

    ``pieces_meta`` are offsets (int64, len m+1) of m pieces in ``meta_buf``;
    ``sources`` are further binary arrays appended after the meta pieces.
    """
    meta = pa.Array.from_buffers(pa.binary(), len(pieces_meta) - 1,
                                 [None, pa.py_buffer(pieces_meta.astype(np.int32)),
                                  pa.py_buffer(meta_buf)])
    combined = pa.concat_arrays([meta] + [s for s in sources])
    out = pc.take(combined, pa.array(order), boundscheck=False)
    offs = np.frombuffer(out.buffers()[1], dtype=np.int32, count=len(out) + 1 + out.offset)
    lo = int(offs[out.offset])
    hi = int(offs[out.offset + len(out)])
    return memoryview(out.buffers()[2])[lo:hi], out


class HeaderSizes(NamedTuple):
    """Encoded sizes of flattened headers (see :func:`header_sizes`)."""

    key_zigzag: np.ndarray       # per header: zigzag key length (uint64)
    value_zigzag: np.ndarray     # per header: zigzag value length (null value: length -1)
    key_len_size: np.ndarray     # per header: bytes of the key length varint
    value_len_size: np.ndarray   # per header: bytes of the value length varint
    record_offsets: np.ndarray   # per record (n + 1): where its encoded headers start, from 0


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
    key_len_size = varint_sizes(key_zigzag)
    value_len_size = varint_sizes(value_zigzag)
    per_header = key_len_size + np.maximum(key_len, 0) + value_len_size + np.maximum(value_len, 0)
    cumulative = np.zeros(len(per_header) + 1, dtype=np.int64)
    np.cumsum(per_header, out=cumulative[1:])
    return HeaderSizes(key_zigzag, value_zigzag, key_len_size, value_len_size,
                       cumulative[record_offsets])


def _encode_headers(headers, n):
    """(per-record header count int64, per-record header bytes as a binary array)."""
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    if not isinstance(headers, pa.Array):
        headers = pa.array(
            [None if h is None else [{"key": k, "value": v} for k, v in h] for h in headers],
            type=HEADERS_TYPE)
    if len(headers) != n:
        raise KafkaProtocolError(f"headers has {len(headers)} rows, values has {n}")
    if not (pa.types.is_list(headers.type) or pa.types.is_large_list(headers.type)):
        raise KafkaProtocolError(f"headers must be a list<struct<key, value>> array, got {headers.type}")
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
    ku, vu, ks, vs = sizes.key_zigzag, sizes.value_zigzag, sizes.key_len_size, sizes.value_len_size
    # meta pieces per header: [key length varint], [value length varint]
    piece = np.empty(2 * H, dtype=np.int64)
    piece[0::2] = ks
    piece[1::2] = vs
    moffs = np.zeros(2 * H + 1, dtype=np.int64)
    np.cumsum(piece, out=moffs[1:])
    meta = np.zeros(int(moffs[-1]), dtype=np.uint8)
    write_varints(meta, moffs[0:-1:2], ku, ks)
    write_varints(meta, moffs[1:-1:2], vu, vs)
    idx = np.arange(H, dtype=np.int64)
    order = np.empty(4 * H, dtype=np.int64)
    order[0::4] = 2 * idx
    order[1::4] = 2 * H + idx
    order[2::4] = 2 * idx + 1
    order[3::4] = 3 * H + idx
    region, out = _assemble(moffs, meta, [hkeys, hvals], order)
    rec_offs = sizes.record_offsets
    blob = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(rec_offs.astype(np.int32)),
                                                  pa.py_buffer(region)])
    return counts, blob


def encode_record_batch(*, keys, values, headers=None, timestamps_ms=None, base_offset=0,
                        compression=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                        is_transactional=False, partition_leader_epoch=-1, now_ms=None) -> bytes:
    """Build one v2 record batch (magic 2) from Arrow arrays, as ``bytes``; the arguments
    are those of :func:`encode_record_batch_buffer`."""
    return bytes(encode_record_batch_buffer(
        keys=keys, values=values, headers=headers, timestamps_ms=timestamps_ms,
        base_offset=base_offset, compression=compression, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence,
        is_transactional=is_transactional, partition_leader_epoch=partition_leader_epoch,
        now_ms=now_ms))


def encode_record_batch_buffer(*, keys, values, headers=None, timestamps_ms=None,
                               base_offset=0, compression=0, producer_id=-1, producer_epoch=-1,
                               base_sequence=-1, is_transactional=False,
                               partition_leader_epoch=-1, now_ms=None) -> bytearray:
    """Build one v2 record batch (magic 2) from Arrow arrays, into a new ``bytearray``
    (the writer sends it as it is: no copy into ``bytes``).

    ``keys``/``values``: binary or string arrays (nullable; ``keys=None`` means
    all keys null).  ``headers``: ``list<struct<key: string, value: binary>>``
    array (or a list of ``[(key, value), ...]``/None per record) or None.
    ``timestamps_ms``: int64 array (nulls -> now) or None (all now).
    ``compression``: codec id or name.  Offsets deltas are 0..n-1.
    """
    values = as_binary_array(values, "values")
    if values is None:
        raise KafkaProtocolError("values is required")
    n = len(values)
    if n == 0:
        raise KafkaProtocolError("cannot encode an empty record batch")
    keys = as_binary_array(keys, "keys")
    if keys is None:
        keys = pa.nulls(n, pa.binary())
    if len(keys) != n:
        raise KafkaProtocolError(f"keys has {len(keys)} rows, values has {n}")
    codec = _comp.codec_id(compression)
    if now_ms is None:
        now_ms = int(time.time() * 1000)

    if timestamps_ms is None:
        ts = np.full(n, now_ms, dtype=np.int64)
    else:
        if isinstance(timestamps_ms, (pa.Array, pa.ChunkedArray)):
            tarr = timestamps_ms
            if pa.types.is_timestamp(tarr.type):
                tarr = pc.cast(tarr, pa.timestamp("ms", tz=tarr.type.tz)).cast(pa.int64())
            ts = np.asarray(tarr.cast(pa.int64()).fill_null(now_ms), dtype=np.int64)
        else:
            ts = np.asarray(timestamps_ms, dtype=np.int64)
        if len(ts) != n:
            raise KafkaProtocolError(f"timestamps_ms has {len(ts)} rows, values has {n}")
    first_ts = int(ts[0])
    max_ts = int(ts.max())

    kl = binary_lengths(keys)
    vl = binary_lengths(values)
    if headers is not None:
        hcount, hblob = _encode_headers(headers, n)
    else:
        hcount, hblob = np.zeros(n, dtype=np.int64), None
    hbytes = np.zeros(n, dtype=np.int64)
    if hblob is not None:
        ho = np.frombuffer(hblob.buffers()[1], dtype=np.int32, count=n + 1)
        hbytes = (ho[1:] - ho[:-1]).astype(np.int64)

    # One (6, n) matrix of zigzag varints: length, tsDelta, offsetDelta, keyLen,
    # valueLen, headerCount -- sized and written in one vectorised pass each.
    fields = np.empty((6, n), dtype=np.int64)
    np.subtract(ts, first_ts, out=fields[1])
    fields[2] = np.arange(n, dtype=np.int64)
    fields[3] = kl
    fields[4] = vl
    fields[5] = hcount
    u = zigzag_encode(fields)
    sizes = np.empty((6, n), dtype=np.int64)
    sizes[1:] = varint_sizes(u[1:].ravel()).reshape(5, n)
    s_len, s_ts, s_od, s_kl, s_vl, s_hc = sizes
    body = 1 + s_ts + s_od + s_kl + np.maximum(kl, 0) + s_vl + np.maximum(vl, 0) + s_hc + hbytes
    u[0] = zigzag_encode(body)
    s_len[:] = varint_sizes(u[0])

    # meta pieces per record: P1 = len, attributes, tsDelta, offsetDelta, keyLen;
    # P2 = valueLen; P3 = headerCount
    p1 = s_len + 1 + s_ts + s_od + s_kl
    per = p1 + s_vl + s_hc
    rec_meta = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per, out=rec_meta[1:])
    m0 = rec_meta[:-1]
    meta = np.zeros(int(rec_meta[-1]), dtype=np.uint8)
    at = np.empty((6, n), dtype=np.int64)
    at[0] = m0
    np.add(m0, s_len + 1, out=at[1])    # the attributes byte in between stays 0
    np.add(at[1], s_ts, out=at[2])
    np.add(at[2], s_od, out=at[3])
    np.add(at[3], s_kl, out=at[4])
    np.add(at[4], s_vl, out=at[5])
    write_varints(meta, at.ravel(), u.ravel(), sizes.ravel())
    poffs = np.empty(3 * n + 1, dtype=np.int64)
    poffs[0:-1:3] = m0
    poffs[1::3] = m0 + p1
    poffs[2::3] = m0 + p1 + s_vl
    poffs[-1] = rec_meta[-1]

    idx = np.arange(n, dtype=np.int64)
    k = 6 if hblob is not None else 5
    order = np.empty(k * n, dtype=np.int64)
    order[0::k] = 3 * idx                 # P1
    order[1::k] = 3 * n + idx             # key
    order[2::k] = 3 * idx + 1             # P2
    order[3::k] = 4 * n + idx             # value
    order[4::k] = 3 * idx + 2             # P3
    sources = [keys, values]
    if hblob is not None:
        order[5::k] = 5 * n + idx         # header bytes
        sources.append(hblob)
    region, _keepalive = _assemble(poffs, meta, sources, order)

    if codec != 0:
        region = _comp.compress(codec, region)
    attrs = codec | (ATTR_TRANSACTIONAL if is_transactional else 0)
    total = V2_HEADER_SIZE + len(region)
    out = bytearray(total)
    out[V2_HEADER_SIZE:] = region
    _V2_HEADER.pack_into(out, 0, base_offset, total - LOG_OVERHEAD, partition_leader_epoch, 2, 0,
                         attrs, n - 1, first_ts, max_ts, producer_id, producer_epoch,
                         base_sequence, n)
    crc = _crc32c(memoryview(out)[_V2_ATTRIBUTES_OFFSET:])
    struct.pack_into(">I", out, _V2_CRC_OFFSET, crc)
    return out
