"""Kafka record batches -> Apache Arrow, column-wise, and back.  Pure, no I/O.

Modules: :mod:`.layout` (wire layout, constants, result type), :mod:`.arrays` (numpy/Arrow
helpers for binary columns and varints, also used by the writer and the partitioner),
:mod:`.v2` (v2 column decode), :mod:`.legacy` (v0/v1 decode), :mod:`.decode` (the
top-level :func:`decode_records`), :mod:`.encode` (:func:`encode_record_batch`).

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

# Every name ``kafka_ds.protocol.records`` had as one module stays importable from here.
# (Monkeypatching a decoder internal must target its module, e.g. ``records.v2``.)
from . import arrays, decode, encode, layout, legacy, v2  # noqa: F401
from ..compression import (  # noqa: F401
    DEFAULT_MAX_DECOMPRESSED_SIZE, DecompressedSizeExceeded, OutputBuffer,
)
from ..errors import CorruptRecordError, KafkaProtocolError  # noqa: F401
from .arrays import (  # noqa: F401
    _binary_to_string, _empty_columns, _headers_array, _int_array, _take_binary,
    as_binary_array, binary_lengths, varint_sizes, write_varints, zigzag_encode,
)
from .decode import decode_records
from .encode import _assemble, _encode_headers, encode_record_batch  # noqa: F401
from .layout import (  # noqa: F401
    _INT16x2, _INT32, _LEGACY_MIN_LENGTH, _LEGACY_V0, _LEGACY_V1, _MIN_RECORD_BODY,
    _MIN_RECORD_SIZE, _OFFSET_LENGTH, _SCHEMA_HEADERS, _SCHEMA_NO_HEADERS, _V2_ATTRIBUTES_OFFSET,
    _V2_CRC_OFFSET, _V2_HEADER, ATTR_CODEC_MASK, ATTR_CONTROL, ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL, CREATE_TIME, HEADER_STRUCT_TYPE, HEADERS_TYPE, LOG_APPEND_TIME,
    LOG_OVERHEAD, NO_TIMESTAMP, NO_TIMESTAMP_TYPE, TIMESTAMP_TYPE, V2_HEADER_SIZE,
    V2_MIN_BATCH_LENGTH, DecodeResult, _corrupt, record_schema,
)
from .legacy import _decode_legacy, _legacy_message, _LegacyRows  # noqa: F401
from .v2 import (  # noqa: F401
    _BIG, _CHUNK_BYTES, _CHUNK_RECORDS, _KEEP_BUFFER_MAX, _MAX_BUFFER, _STEP1, _STEP2,
    _VECTOR_HEADER_ROUNDS, _ZERO_SCAN_MAX_AVG_RECORD, _ZV1, _ZV2, _Batch, _build_tables,
    _check_chains, _chains_attr_zero, _chains_zero_pairs, _chunk_bounds, _control_type,
    _decode_chunk, _decode_headers, _decode_v2_segment, _Fields, _find_starts, _merge_fields,
    _py_zvarint, _release_work_buffer, _scratch_bool, _tls, _walk_long, _walk_region,
    _with_heads, _work_buffer, _zero_positions, _zigzag, _zvarints,
)

# the encoder's array helpers under their names from before the split
_as_binary_array = as_binary_array
_lengths = binary_lengths
_zz_encode = zigzag_encode
_varint_sizes = varint_sizes
_write_varints = write_varints

__all__ = [
    "DecodeResult", "decode_records", "encode_record_batch", "record_schema",
    "TIMESTAMP_TYPE", "HEADERS_TYPE", "HEADER_STRUCT_TYPE",
    "NO_TIMESTAMP_TYPE", "CREATE_TIME", "LOG_APPEND_TIME",
]
