"""Wire layout of record batches and the constants every decoder and the encoder share."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pyarrow as pa

from ..columns import HEADERS, arrow_schema, arrow_type
from ..errors import CorruptRecordError

# --- schema ------------------------------------------------------------------------

# Derived from the one definition of the source's columns (kafka_ds/columns.py); the
# decoder fills the columns that come from the record itself.
TIMESTAMP_TYPE = arrow_type("timestamp")
HEADERS_TYPE = arrow_type(HEADERS)
HEADER_STRUCT_TYPE = HEADERS_TYPE.value_type

NO_TIMESTAMP_TYPE, CREATE_TIME, LOG_APPEND_TIME = -1, 0, 1
NO_TIMESTAMP = -1

_SCHEMA_NO_HEADERS = arrow_schema(False, record_only=True)
_SCHEMA_HEADERS = arrow_schema(True, record_only=True)


def record_schema(include_headers: bool = True) -> pa.Schema:
    """The Arrow schema of :attr:`DecodeResult.batch`."""
    return _SCHEMA_HEADERS if include_headers else _SCHEMA_NO_HEADERS


# --- wire layout ---------------------------------------------------------------------

LOG_OVERHEAD = 12  # baseOffset int64 + length int32
_OFFSET_LENGTH = struct.Struct(">qi")
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
# lastOffsetDelta, firstTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordCount
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
V2_HEADER_SIZE = _V2_HEADER.size  # 61
V2_MIN_BATCH_LENGTH = V2_HEADER_SIZE - LOG_OVERHEAD  # 49
_V2_CRC_OFFSET = 17
_V2_ATTRIBUTES_OFFSET = 21  # the CRC covers attributes .. end
_LEGACY_V0 = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes (18)
_LEGACY_V1 = struct.Struct(">qiIbbq")  # + timestamp (26)
_LEGACY_MIN_LENGTH = (14, 22)  # crc+magic+attr[+ts]+keylen+valuelen
_INT32 = struct.Struct(">i")
_INT16x2 = struct.Struct(">hh")

ATTR_CODEC_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

_MIN_RECORD_BODY = 6  # attributes + 5 one-byte varints
_MIN_RECORD_SIZE = 7  # + the length varint


@dataclass
class DecodeResult:
    """What :func:`decode_records` returns."""

    batch: pa.RecordBatch
    #: Offset to fetch next: last offset of the last complete batch + 1
    #: (control batches and fully dropped batches included), never below
    #: ``fetch_offset``; ``fetch_offset`` when no batch was complete.
    next_offset: int
    #: A partial batch at the end of the data was ignored.
    truncated: bool
    #: Rows in ``batch``.
    record_count: int
    #: Bytes of complete batches consumed from the start of the data.
    bytes_consumed: int


def _corrupt(topic, partition, offset, message) -> CorruptRecordError:
    return CorruptRecordError(
        f"corrupt record data in topic {topic!r} partition {partition} at offset {offset}: "
        f"{message}"
    )
