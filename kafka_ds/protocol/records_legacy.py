"""Legacy message sets (magic 0 and 1, possibly compressed) -> columns, one message at a time."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pyarrow as pa

from ..errors import KafkaProtocolError
from . import compression as _comp
from .compression import DecompressedSizeExceeded
from .records_arrays import int_array
from .records_layout import (
    _INT32,
    _LEGACY_MIN_LENGTH,
    _LEGACY_V0,
    _LEGACY_V1,
    _OFFSET_LENGTH,
    ATTR_CODEC_MASK,
    ATTR_TIMESTAMP_TYPE,
    CREATE_TIME,
    HEADERS_TYPE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    NO_TIMESTAMP_TYPE,
    TIMESTAMP_TYPE,
    _corrupt,
)

# --- legacy (magic 0/1) decode -------------------------------------------------------------


class _LegacyRows:
    __slots__ = ("keys", "values", "offsets", "ts", "ts_types")

    def __init__(self):
        self.keys = []
        self.values = []
        self.offsets = []
        self.ts = []
        self.ts_types = []

    def add(self, key, value, offset, timestamp, timestamp_type):
        self.keys.append(key)
        self.values.append(value)
        self.offsets.append(offset)
        self.ts.append(timestamp)
        self.ts_types.append(timestamp_type)

    def columns(self, include_headers):
        n = len(self.offsets)
        cols = {
            "key": pa.array(self.keys, pa.binary()),
            "value": pa.array(self.values, pa.binary()),
            "offset": pa.array(self.offsets, pa.int64()),
            "timestamp": int_array(np.array(self.ts, dtype=np.int64) * 1000, TIMESTAMP_TYPE),
            "timestampType": pa.array(self.ts_types, pa.int32()),
        }
        if include_headers:
            cols["headers"] = pa.nulls(n, HEADERS_TYPE)
        return cols


def _legacy_message(buf, pos, end):
    """Parse one legacy message in ``buf[pos:end]`` (``end`` = its exact end).

    Returns ``(offset, crc, magic, attributes, timestamp, key, value)``; raises
    ``ValueError`` when the structure is inconsistent.
    """
    if end - pos < LOG_OVERHEAD + _LEGACY_MIN_LENGTH[0]:
        raise ValueError("message too short")
    magic = buf[pos + 16]
    if magic == 0:
        offset, _size, crc, magic, attrs = _LEGACY_V0.unpack_from(buf, pos)
        ts = NO_TIMESTAMP
        p = pos + _LEGACY_V0.size
    elif magic == 1:
        if end - pos < LOG_OVERHEAD + _LEGACY_MIN_LENGTH[1]:
            raise ValueError("message too short")
        offset, _size, crc, magic, attrs, ts = _LEGACY_V1.unpack_from(buf, pos)
        p = pos + _LEGACY_V1.size
    else:
        raise ValueError(f"unexpected magic {magic} in a legacy message set")
    (klen,) = _INT32.unpack_from(buf, p)
    p += 4
    key = None
    if klen >= 0:
        if p + klen + 4 > end:
            raise ValueError("key length exceeds the message")
        key = bytes(buf[p : p + klen])
        p += klen
    elif klen != -1:
        raise ValueError(f"invalid key length {klen}")
    if p + 4 > end:
        raise ValueError("truncated value length")
    (vlen,) = _INT32.unpack_from(buf, p)
    p += 4
    value = None
    if vlen >= 0:
        if p + vlen > end:
            raise ValueError("value length exceeds the message")
        value = bytes(buf[p : p + vlen])
        p += vlen
    elif vlen != -1:
        raise ValueError(f"invalid value length {vlen}")
    if p != end:
        raise ValueError("message size does not match its fields")
    return offset, crc, magic, attrs, ts, key, value


def _decode_legacy(mv, pos, end, rows: _LegacyRows, topic, partition, fetch_offset, max_size):
    """Decode one legacy (v0/v1) top-level message; returns its next offset."""
    (offset0,) = struct.unpack_from(">q", mv, pos)
    try:
        offset, crc, magic, attrs, ts, key, value = _legacy_message(mv, pos, end)
    except ValueError as exc:
        raise _corrupt(topic, partition, offset0, str(exc)) from None
    if zlib.crc32(mv[pos + 16 : end]) != crc:
        raise _corrupt(topic, partition, offset, "CRC32 mismatch in legacy message")
    codec = attrs & ATTR_CODEC_MASK
    log_append = magic == 1 and bool(attrs & ATTR_TIMESTAMP_TYPE)
    ts_type = NO_TIMESTAMP_TYPE if magic == 0 else (LOG_APPEND_TIME if log_append else CREATE_TIME)
    if codec == 0:
        if offset >= fetch_offset:
            rows.add(key, value, offset, ts, ts_type)
        return offset + 1
    if value is None:
        raise _corrupt(topic, partition, offset, "compressed legacy message without a value")
    try:
        inner = _comp.decompress(codec, value, max_size, legacy_lz4=(magic == 0))
    except DecompressedSizeExceeded as exc:
        raise DecompressedSizeExceeded(
            f"topic {topic!r} partition {partition} offset {offset}: {exc}"
        ) from None
    except KafkaProtocolError as exc:
        raise _corrupt(topic, partition, offset, str(exc)) from None
    msgs = []
    p = 0
    n = len(inner)
    try:
        while p < n:
            if n - p < LOG_OVERHEAD:
                raise ValueError("truncated inner message")
            _o, size = _OFFSET_LENGTH.unpack_from(inner, p)
            if size < _LEGACY_MIN_LENGTH[0] or p + LOG_OVERHEAD + size > n:
                raise ValueError(f"invalid inner message size {size}")
            m = _legacy_message(inner, p, p + LOG_OVERHEAD + size)
            if zlib.crc32(inner[p + 16 : p + LOG_OVERHEAD + size]) != m[1]:
                raise ValueError("CRC32 mismatch in an inner message")
            if m[3] & ATTR_CODEC_MASK:
                raise ValueError("nested compression in an inner message")
            msgs.append(m)
            p += LOG_OVERHEAD + size
    except ValueError as exc:
        raise _corrupt(topic, partition, offset, str(exc)) from None
    if not msgs:
        return offset + 1
    # magic 1: inner offsets are relative, the wrapper carries the last one's
    # absolute offset; magic 0: inner offsets are absolute.
    delta = offset - msgs[-1][0] if magic >= 1 else 0
    for ioff, _crc, imagic, _iattrs, its, ikey, ivalue in msgs:
        absolute = ioff + delta
        if absolute < fetch_offset:
            continue
        if magic == 0 or imagic == 0:
            t, tt = NO_TIMESTAMP, NO_TIMESTAMP_TYPE
        elif log_append:
            t, tt = ts, LOG_APPEND_TIME
        else:
            t, tt = its, CREATE_TIME
        rows.add(ikey, ivalue, absolute, t, tt)
    return offset + 1
