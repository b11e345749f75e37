"""Kafka record batches -> Apache Arrow, column-wise, and back.  Pure, no I/O.

This module is the top-level decode (:func:`decode_records`) and the public face of
the sibling modules it re-exports: ``records_layout`` (wire layout, constants, the
result type), ``records_arrays`` (numpy/Arrow helpers for binary columns and varints,
also used by the writer and the partitioner), ``records_starts`` (v2 record start
discovery), ``records_v2`` (v2 column decode), ``records_legacy`` (v0/v1 decode) and
``records_encode`` (:func:`encode_record_batch`).

Decoding (:func:`decode_records`) takes one partition's ``records`` field from a
Fetch response (any mix of v2 record batches and legacy v0/v1 message sets; the
last batch may be truncated) and returns a :class:`pyarrow.RecordBatch` with the
columns Spark's Kafka source exposes for the record itself::

    key binary, value binary, offset int64, timestamp timestamp[us, UTC],
    timestampType int32 [, headers list<struct<key: string, value: binary>>]

No Python object is created per record on the v2 path:

1. the batch headers are parsed in a short Python loop (one ``struct`` call and
   one CRC-32C call per batch, on the original compressed bytes);
2. the record regions of all batches are made contiguous-ish in one buffer:
   uncompressed input is used in place, compressed batches are decompressed
   back to back into one reusable numpy buffer;
3. the record starts are found -- the only sequential step (each record begins
   with its varint length).  First speculatively and vectorised: records
   without headers end with a 0x00 header count and start with a varint length
   followed by a 0x00 attributes byte, so the starts are among the positions
   after "00 <varint> 00" patterns; the candidates are verified as a chain
   (``start[i] + size[i] == start[i+1]`` from the batch's first byte to its
   last, with the exact record count), which proves them right whatever the
   payload contains.  Batches that fail (records with headers) get a second
   vectorised try: every start is "<1-3 byte varint> 00", impossible
   candidates are pruned, the survivors must pass the same proof.  Only what
   is still unproven (e.g. huge records, payloads crafted to look like
   records) is walked by a tight Python loop with lookup tables for 1- and
   2-byte varints;
4. every other field is decoded for all records of all batches at once with
   numpy (zigzag varints via a 64 Ki-entry table for the 1-2 byte case);
5. key, value, header key and header value columns are built with one
   ``take`` each from an "interleaved" binary array whose offsets point into
   the work buffer (``[start0, end0, start1, end1, ...]``): Arrow copies the
   bytes with one memcpy per value, null keys/values get validity bits.

Conventions (matching what Spark's Kafka source yields through the Java consumer):

* legacy v0 messages have no timestamp: ``timestamp`` is -1 ms (i.e.
  1969-12-31T23:59:59.999 UTC, what ``new java.sql.Timestamp(-1)`` gives) and
  ``timestampType`` is -1 (``NO_TIMESTAMP_TYPE``), not null;
* ``headers`` is null (not an empty list) for a record without headers, like
  Spark; header keys that are not valid UTF-8 are decoded with U+FFFD
  replacement (as Java's ``new String(bytes, UTF_8)`` does);
* ``next_offset`` never goes below ``fetch_offset``.

Encoding (:func:`encode_record_batch`) builds one v2 batch from Arrow arrays,
also column-wise: varints are sized and written with numpy, and the record
bytes are assembled with one Arrow ``take`` over [per-record varint pieces,
keys, values, headers] in output order.
"""
from __future__ import annotations

import heapq

import pyarrow as pa
from crc32c import crc32c as _crc32c

# Every name ``kafka_ds.protocol.records`` had as one module stays importable from here
# (but ``write_varints``: the encoder that used it writes its varints column-wise now).
# (Monkeypatching a decoder internal must target its module, e.g. ``records_v2``.)
from . import (  # noqa: F401
    records_arrays, records_encode, records_layout, records_legacy, records_starts, records_v2,
)
from . import compression as _comp  # noqa: F401
from .compression import (  # noqa: F401
    DEFAULT_MAX_DECOMPRESSED_SIZE, DecompressedSizeExceeded, OutputBuffer,
)
from .errors import CorruptRecordError, KafkaProtocolError  # noqa: F401
from .records_arrays import (  # noqa: F401
    _binary_to_string, _empty_columns, _headers_array, _int_array, _take_binary,
    as_binary_array, binary_lengths, varint_sizes, zigzag_encode,
)
from .records_encode import (  # noqa: F401
    _assemble, _encode_headers, encode_record_batch, encode_record_batch_buffer,
)
from .records_layout import (  # noqa: F401
    _INT16x2, _INT32, _LEGACY_MIN_LENGTH, _LEGACY_V0, _LEGACY_V1, _MIN_RECORD_BODY,
    _MIN_RECORD_SIZE, _OFFSET_LENGTH, _SCHEMA_HEADERS, _SCHEMA_NO_HEADERS, _V2_ATTRIBUTES_OFFSET,
    _V2_CRC_OFFSET, _V2_HEADER, ATTR_CODEC_MASK, ATTR_CONTROL, ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL, CREATE_TIME, HEADER_STRUCT_TYPE, HEADERS_TYPE, LOG_APPEND_TIME,
    LOG_OVERHEAD, NO_TIMESTAMP, NO_TIMESTAMP_TYPE, TIMESTAMP_TYPE, V2_HEADER_SIZE,
    V2_MIN_BATCH_LENGTH, DecodeResult, _corrupt, record_schema,
)
from .records_legacy import _decode_legacy, _legacy_message, _LegacyRows  # noqa: F401
from .records_starts import (  # noqa: F401
    _BIG, _KEEP_BUFFER_MAX, _STEP1, _STEP2, _ZERO_SCAN_MAX_AVG_RECORD, _ZV1, _ZV2, _build_tables,
    _check_chains, _chains_attr_zero, _chains_zero_pairs, _find_starts, _release_work_buffer,
    _scratch_bool, _tls, _walk_long, _walk_region, _with_heads, _work_buffer, _zero_positions,
    _zigzag, _zvarints,
)
from .records_v2 import (  # noqa: F401
    _CHUNK_BYTES, _CHUNK_RECORDS, _MAX_BUFFER, _VECTOR_HEADER_ROUNDS, _Batch, _chunk_bounds,
    _control_type, _decode_chunk, _decode_headers, _decode_v2_segment, _Fields, _merge_fields,
    _py_zvarint,
)

# the encoder's array helpers under their names from before the split
_as_binary_array = as_binary_array
_lengths = binary_lengths
_zz_encode = zigzag_encode
_varint_sizes = varint_sizes

__all__ = [
    "DecodeResult", "decode_records", "encode_record_batch", "encode_record_batch_buffer",
    "record_schema",
    "TIMESTAMP_TYPE", "HEADERS_TYPE", "HEADER_STRUCT_TYPE",
    "NO_TIMESTAMP_TYPE", "CREATE_TIME", "LOG_APPEND_TIME",
]


# --- top level decode ----------------------------------------------------------------------------

def decode_records(data, *, topic, partition, fetch_offset, include_headers=True,
                   read_committed=False, aborted_transactions=(),
                   max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE) -> DecodeResult:
    """Decode one partition's ``records`` field of a Fetch response into Arrow.

    ``aborted_transactions`` is the Fetch response's list of
    ``(producer_id, first_offset)``; with ``read_committed`` the records of
    aborted transactions are dropped (the Java consumer's algorithm).
    ``max_decompressed_size`` caps the decompressed size of each batch.
    Raises :class:`CorruptRecordError` (naming topic, partition and offset)
    for bad CRCs, absurd lengths and inconsistent record structures.
    """
    if data is None:
        data = b""
    mv = memoryview(data)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    n = len(mv)
    if not isinstance(data, (bytes, bytearray)):
        data = None

    aborted_heap = []
    aborted_pids = set()
    if read_committed and aborted_transactions:
        aborted_heap = [(int(first), int(pid)) for pid, first in aborted_transactions]
        heapq.heapify(aborted_heap)

    segments = []          # ("v2", [_Batch]) | ("legacy", _LegacyRows)
    current = None         # list being filled for the current segment
    current_kind = None
    next_offset = fetch_offset
    truncated = False
    pos = 0
    unpack_v2 = _V2_HEADER.unpack_from
    unpack_ol = _OFFSET_LENGTH.unpack_from

    while pos < n:
        if n - pos < LOG_OVERHEAD:
            truncated = True
            break
        base, length = unpack_ol(mv, pos)
        if length < _LEGACY_MIN_LENGTH[0]:
            raise _corrupt(topic, partition, base, f"invalid batch length {length}")
        if length > max_decompressed_size:
            # Not a batch that is merely cut off by the fetch size: no broker sends
            # one this large, and waiting for "the rest" would never end.
            raise _corrupt(topic, partition, base,
                           f"batch length {length} exceeds the {max_decompressed_size}-byte limit")
        magic = mv[pos + 16] if n - pos > 16 else None
        if magic is not None:
            if magic > 2:
                raise _corrupt(topic, partition, base, f"unknown record batch magic {magic}")
            minimum = V2_MIN_BATCH_LENGTH if magic == 2 else _LEGACY_MIN_LENGTH[magic]
            if length < minimum:
                raise _corrupt(topic, partition, base,
                               f"batch length {length} below the minimum {minimum} for magic {magic}")
        end = pos + LOG_OVERHEAD + length
        if end > n:
            truncated = True
            break

        if magic == 2:
            (base, _blen, _ple, _magic, crc, attrs, last_delta, first_ts, max_ts,
             pid, _epoch, _seq, count) = unpack_v2(mv, pos)
            if _crc32c(mv[pos + _V2_ATTRIBUTES_OFFSET:end]) != crc:
                raise _corrupt(topic, partition, base, "CRC32C mismatch in record batch")
            if count < 0:
                raise _corrupt(topic, partition, base, f"negative record count {count}")
            batch_next = base + last_delta + 1
            control = attrs & ATTR_CONTROL
            skip = False
            if read_committed and pid >= 0:
                # KafkaConsumer's CompletedFetch: collect aborted transactions
                # that started at or before this batch's last offset.
                last_offset = base + last_delta
                while aborted_heap and aborted_heap[0][0] <= last_offset:
                    aborted_pids.add(heapq.heappop(aborted_heap)[1])
                if control:
                    b = _Batch(pos, end, base, count, attrs & ATTR_CODEC_MASK, False, 0, 0)
                    if _control_type(mv, b, topic, partition, max_decompressed_size) == 0:
                        aborted_pids.discard(pid)
                elif attrs & ATTR_TRANSACTIONAL and pid in aborted_pids:
                    skip = True
            if not control and not skip and count > 0 and batch_next > fetch_offset:
                if current_kind != "v2":
                    current = []
                    current_kind = "v2"
                    segments.append(("v2", current))
                current.append(_Batch(pos, end, base, count, attrs & ATTR_CODEC_MASK,
                                      bool(attrs & ATTR_TIMESTAMP_TYPE), first_ts, max_ts))
            if batch_next > next_offset:
                next_offset = batch_next
        else:
            if current_kind != "legacy":
                current = _LegacyRows()
                current_kind = "legacy"
                segments.append(("legacy", current))
            batch_next = _decode_legacy(mv, pos, end, current, topic, partition,
                                        fetch_offset, max_decompressed_size)
            if batch_next > next_offset:
                next_offset = batch_next
        pos = end

    parts = []
    for kind, payload in segments:
        if kind == "v2":
            parts.append(_decode_v2_segment(data, mv, payload, topic, partition, fetch_offset,
                                            include_headers, max_decompressed_size))
        elif payload.offsets:
            parts.append(payload.columns(include_headers))
    schema = record_schema(include_headers)
    if not parts:
        cols = _empty_columns(include_headers)
    elif len(parts) == 1:
        cols = parts[0]
    else:
        cols = {name: pa.concat_arrays([p[name] for p in parts]) for name in schema.names}
    batch = pa.RecordBatch.from_arrays([cols[name] for name in schema.names], schema=schema)
    return DecodeResult(batch=batch, next_offset=int(next_offset), truncated=truncated,
                        record_count=batch.num_rows, bytes_consumed=pos)
