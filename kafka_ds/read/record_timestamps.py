"""Record timestamps Spark's TimestampType cannot hold (SPARK-56243).

Spark's Kafka source turns a record's epoch milliseconds into microseconds with an
overflow-checked multiplication and, since SPARK-56243, fails with an error naming the
record (KAFKA_MALFORMED_RECORD_TIMESTAMP) when it overflows: typically a producer that
wrote micro- or nanoseconds. The decoder multiplies by 1000 in int64 columns, where an
overflow wraps silently; every valid value is a multiple of 1000 and a wrapped one is not
(2**64 mod 1000 = 616), unless the wrap count is a multiple of 125 (only for |ms| >= 2.3e18,
i.e. nanoseconds after the year 2042). So the check is one vectorised remainder per
Arrow batch; only on failure is the raw value looked up in the fetched bytes, to show it.
"""

from __future__ import annotations

import struct

import numpy as np

from ..errors import CorruptRecordError, KafkaProtocolError
from ..protocol.primitives import read_varint
from ..protocol.records_arrays import numpy_values
from ..protocol.records_layout import (
    _LEGACY_V0,
    _V2_HEADER,
    ATTR_CODEC_MASK,
    ATTR_TIMESTAMP_TYPE,
    V2_HEADER_SIZE,
)

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MAX_MS = INT64_MAX // 1000  # largest epoch ms whose microseconds fit in int64


def check_timestamps(batch, records, topic: str, partition: int, end: int | None = None) -> None:
    """Raise :class:`CorruptRecordError` for the first record of ``batch`` (Arrow, with
    ``offset`` and ``timestamp`` columns) below offset ``end`` whose timestamp overflowed;
    ``records`` are the fetched bytes it was decoded from (for the raw value shown)."""
    column = batch.column("timestamp")
    if column.null_count:
        column = column.fill_null(0)
    micros = numpy_values(column.view("int64"), np.int64)
    bad = np.flatnonzero(micros % 1000)
    if not len(bad):
        return
    offsets = numpy_values(batch.column("offset"), np.int64)
    if end is not None:
        bad = bad[offsets[bad] < end]
        if not len(bad):
            return
    offset = int(offsets[int(bad[0])])
    raw = raw_timestamp(records, offset)
    shown = "unknown" if raw is None else str(raw)
    raise CorruptRecordError(
        f"Malformed record timestamp in topic {topic!r} partition {partition} at offset "
        f"{offset}: raw value {shown} (epoch milliseconds) is outside what Spark's "
        f"TimestampType can hold (microseconds in a signed 64-bit integer, |ms| <= {MAX_MS}). "
        "The producer probably wrote the timestamp in another precision (micro- or "
        "nanoseconds); fix the producer, or skip these offsets with startingOffsets."
    )


def _wrap64(value: int) -> int:
    # Java's long arithmetic, as the producer's broker stored it.
    return ((value - INT64_MIN) % (1 << 64)) + INT64_MIN


def raw_timestamp(records, offset: int):
    """The timestamp (ms) of the record at ``offset`` in a Fetch ``records`` field, or None.
    Error path only: walks batch headers and, in the right batch, the records."""
    from ..protocol.compression import decompress

    if records is None:
        return None
    buf = (
        memoryview(records).cast("B")
        if not isinstance(records, (bytes, bytearray))
        else memoryview(records)
    )
    pos, end = 0, len(buf)
    try:
        while pos + 17 <= end:
            base, size, _epoch, magic = struct.unpack_from(">qiib", buf, pos)
            batch_end = pos + 12 + size
            if batch_end > end:
                return None
            if magic >= 2:
                (
                    _b,
                    _s,
                    _e,
                    _m,
                    _crc,
                    attrs,
                    last_delta,
                    first_ts,
                    max_ts,
                    _pid,
                    _pe,
                    _seq,
                    count,
                ) = _V2_HEADER.unpack_from(buf, pos)
                if base <= offset <= base + last_delta:
                    if attrs & ATTR_TIMESTAMP_TYPE:  # LOG_APPEND_TIME: one time for the batch
                        return max_ts
                    body = buf[pos + V2_HEADER_SIZE : batch_end]
                    if attrs & ATTR_CODEC_MASK:
                        body = memoryview(decompress(attrs & ATTR_CODEC_MASK, body))
                    p = 0
                    for _ in range(count):
                        length, p = read_varint(body, p)
                        record_end = p + length
                        p += 1  # attributes
                        ts_delta, p = read_varint(body, p)
                        offset_delta, p = read_varint(body, p)
                        if base + offset_delta == offset:
                            return _wrap64(first_ts + ts_delta)
                        p = record_end
                    return None
            elif base == offset and magic == 1:
                _o, _s, _crc, _m, attrs = _LEGACY_V0.unpack_from(buf, pos)
                if attrs & ATTR_CODEC_MASK == 0:
                    return struct.unpack_from(">q", buf, pos + 18)[0]
                return None
            pos = batch_end
    except (IndexError, struct.error, ValueError, KafkaProtocolError):
        return None
    return None
