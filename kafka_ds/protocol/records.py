"""Kafka record batches -> Apache Arrow, column-wise: :func:`decode_records`, the top-level
decode of one partition's ``records`` from a Fetch answer. Pure, no I/O.

It walks the batch headers and hands the work to its siblings: ``records_starts`` (v2
record starts), ``records_v2`` (v2 columns), ``records_legacy`` (v0/v1 message sets);
``records_layout`` has the wire layout and the result type, ``records_encode`` the other
direction. How the decode avoids a Python object per record, and the conventions it keeps
with Spark's Kafka source: docs/records.md.
"""

from __future__ import annotations

import heapq
from typing import Any

import pyarrow as pa
from crc32c import crc32c as _crc32c

from .compression import DEFAULT_MAX_DECOMPRESSED_SIZE
from .records_arrays import _empty_columns
from .records_layout import (
    _LEGACY_MIN_LENGTH,
    _OFFSET_LENGTH,
    _V2_ATTRIBUTES_OFFSET,
    _V2_HEADER,
    ATTR_CODEC_MASK,
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    LOG_OVERHEAD,
    V2_MIN_BATCH_LENGTH,
    DecodeResult,
    _corrupt,
    record_schema,
)
from .records_legacy import _decode_legacy, _LegacyRows
from .records_v2 import _Batch, _control_type, _decode_v2_segment

# --- top level decode ----------------------------------------------------------------------------


def decode_records(
    data,
    *,
    topic,
    partition,
    fetch_offset,
    include_headers=True,
    read_committed=False,
    aborted_transactions=(),
    max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> DecodeResult:
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

    segments: list[tuple[str, Any]] = []  # ("v2", [_Batch]) | ("legacy", _LegacyRows)
    current: Any = None  # what is being filled for the current segment
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
            raise _corrupt(
                topic,
                partition,
                base,
                f"batch length {length} exceeds the {max_decompressed_size}-byte limit",
            )
        magic = mv[pos + 16] if n - pos > 16 else None
        if magic is not None:
            if magic > 2:
                raise _corrupt(topic, partition, base, f"unknown record batch magic {magic}")
            minimum = V2_MIN_BATCH_LENGTH if magic == 2 else _LEGACY_MIN_LENGTH[magic]
            if length < minimum:
                raise _corrupt(
                    topic,
                    partition,
                    base,
                    f"batch length {length} below the minimum {minimum} for magic {magic}",
                )
        end = pos + LOG_OVERHEAD + length
        if end > n:
            truncated = True
            break

        if magic == 2:
            (
                base,
                _blen,
                _ple,
                _magic,
                crc,
                attrs,
                last_delta,
                first_ts,
                max_ts,
                pid,
                _epoch,
                _seq,
                count,
            ) = unpack_v2(mv, pos)
            if _crc32c(mv[pos + _V2_ATTRIBUTES_OFFSET : end]) != crc:
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
                current.append(
                    _Batch(
                        pos,
                        end,
                        base,
                        count,
                        attrs & ATTR_CODEC_MASK,
                        bool(attrs & ATTR_TIMESTAMP_TYPE),
                        first_ts,
                        max_ts,
                    )
                )
            if batch_next > next_offset:
                next_offset = batch_next
        else:
            if current_kind != "legacy":
                current = _LegacyRows()
                current_kind = "legacy"
                segments.append(("legacy", current))
            batch_next = _decode_legacy(
                mv, pos, end, current, topic, partition, fetch_offset, max_decompressed_size
            )
            if batch_next > next_offset:
                next_offset = batch_next
        pos = end

    parts = []
    for kind, payload in segments:
        if kind == "v2":
            parts.append(
                _decode_v2_segment(
                    data,
                    mv,
                    payload,
                    topic,
                    partition,
                    fetch_offset,
                    include_headers,
                    max_decompressed_size,
                )
            )
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
    return DecodeResult(
        batch=batch,
        next_offset=int(next_offset),
        truncated=truncated,
        record_count=batch.num_rows,
        bytes_consumed=pos,
    )
