"""Kafka primitive types: pure encode/decode, no I/O.

Decoders take ``(buffer, position)`` (``buffer`` is a ``memoryview`` or ``bytes``)
and return ``(value, new_position)``. Encoders append to one ``bytearray``.
Every decoder raises :class:`KafkaProtocolError` (never ``IndexError`` or
``struct.error``) when the buffer is too short or a length is absurd, so that
callers can wrap the error with context (topic, partition, offset).
"""

from __future__ import annotations

import struct
import uuid as _uuid

from ..errors import KafkaProtocolError

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")

# Upper bound for any single length-prefixed field we agree to allocate for.
MAX_FIELD_LENGTH = 1 << 30


def _need(buf, pos: int, size: int, what: str) -> None:
    if pos + size > len(buf):
        raise KafkaProtocolError(
            f"truncated {what}: need {size} bytes at position {pos}, buffer has {len(buf)}"
        )


def _fixed(st: struct.Struct, what: str):
    size = st.size
    unpack_from = st.unpack_from
    pack = st.pack

    def read(buf, pos):
        if pos + size > len(buf):
            _need(buf, pos, size, what)
        return unpack_from(buf, pos)[0], pos + size

    def write(out: bytearray, value) -> None:
        try:
            out += pack(value)
        except struct.error as exc:
            raise KafkaProtocolError(f"cannot encode {value!r} as {what}: {exc}") from None

    return read, write


read_int8, write_int8 = _fixed(INT8, "int8")
read_int16, write_int16 = _fixed(INT16, "int16")
read_int32, write_int32 = _fixed(INT32, "int32")
read_int64, write_int64 = _fixed(INT64, "int64")
read_uint16, write_uint16 = _fixed(UINT16, "uint16")
read_uint32, write_uint32 = _fixed(UINT32, "uint32")
read_float64, write_float64 = _fixed(FLOAT64, "float64")


def read_bool(buf, pos):
    value, pos = read_int8(buf, pos)
    return value != 0, pos


def write_bool(out: bytearray, value) -> None:
    out.append(1 if value else 0)


# --- variable-length integers -------------------------------------------------


def read_uvarint(buf, pos):
    """Unsigned LEB128 varint (at most 10 bytes, enough for 64 bits)."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise KafkaProtocolError(f"truncated varint at position {pos}")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise KafkaProtocolError(f"varint longer than 10 bytes at position {pos}")


def write_uvarint(out: bytearray, value: int) -> None:
    if value < 0:
        raise KafkaProtocolError(f"unsigned varint cannot encode negative {value}")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_varint(buf, pos):
    """Zigzag-encoded signed varint (also used for varlong)."""
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def uvarint_bytes(value: int) -> bytes:
    """The unsigned varint of ``value`` (>= 0), as bytes."""
    out = bytearray()
    write_uvarint(out, value)
    return bytes(out)


def write_varint(out: bytearray, value: int) -> None:
    # Zigzag for 64-bit range; Python ints are unbounded so mask explicitly.
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def uvarint_size(value: int) -> int:
    """Bytes of the unsigned varint of ``value`` (>= 0)."""
    return max(1, (value.bit_length() + 6) // 7)


def varint_size(value: int) -> int:
    """Bytes of the zigzag varint of ``value`` (a signed 64-bit integer)."""
    return uvarint_size(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


# --- strings and bytes ---------------------------------------------------------


def _read_len_prefixed(buf, pos, length, what, nullable):
    if length < 0:
        if nullable and length == -1:
            return None, pos
        raise KafkaProtocolError(f"invalid {what} length {length} at position {pos}")
    if length > MAX_FIELD_LENGTH or pos + length > len(buf):
        raise KafkaProtocolError(
            f"{what} length {length} at position {pos} exceeds buffer of {len(buf)} bytes"
        )
    return buf[pos : pos + length], pos + length


def _decode_utf8(raw, pos):
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KafkaProtocolError(f"invalid UTF-8 string at position {pos}: {exc}") from None


def read_string(buf, pos, nullable=False):
    length, pos = read_int16(buf, pos)
    raw, new_pos = _read_len_prefixed(buf, pos, length, "string", nullable)
    return (None if raw is None else _decode_utf8(raw, pos)), new_pos


def read_nullable_string(buf, pos):
    return read_string(buf, pos, nullable=True)


def read_compact_string(buf, pos, nullable=False):
    length, pos = read_uvarint(buf, pos)
    raw, new_pos = _read_len_prefixed(buf, pos, length - 1, "compact string", nullable)
    return (None if raw is None else _decode_utf8(raw, pos)), new_pos


def read_compact_nullable_string(buf, pos):
    return read_compact_string(buf, pos, nullable=True)


def read_bytes(buf, pos, nullable=False):
    """Returns a slice of ``buf`` (zero-copy when ``buf`` is a memoryview)."""
    length, pos = read_int32(buf, pos)
    return _read_len_prefixed(buf, pos, length, "bytes", nullable)


def read_nullable_bytes(buf, pos):
    return read_bytes(buf, pos, nullable=True)


def read_compact_bytes(buf, pos, nullable=False):
    length, pos = read_uvarint(buf, pos)
    return _read_len_prefixed(buf, pos, length - 1, "compact bytes", nullable)


def read_compact_nullable_bytes(buf, pos):
    return read_compact_bytes(buf, pos, nullable=True)


def _encode_text(value, what):
    if isinstance(value, str):
        return value.encode("utf-8")
    raise KafkaProtocolError(f"{what} expects str, got {type(value).__name__}")


def write_string(out: bytearray, value, nullable=False) -> None:
    if value is None:
        if not nullable:
            raise KafkaProtocolError("string is not nullable")
        out += INT16.pack(-1)
        return
    raw = _encode_text(value, "string")
    if len(raw) > 0x7FFF:
        raise KafkaProtocolError(f"string of {len(raw)} bytes is too long")
    out += INT16.pack(len(raw))
    out += raw


def write_nullable_string(out, value):
    write_string(out, value, nullable=True)


def write_compact_string(out: bytearray, value, nullable=False) -> None:
    if value is None:
        if not nullable:
            raise KafkaProtocolError("compact string is not nullable")
        out.append(0)
        return
    raw = _encode_text(value, "compact string")
    write_uvarint(out, len(raw) + 1)
    out += raw


def write_compact_nullable_string(out, value):
    write_compact_string(out, value, nullable=True)


def write_bytes(out: bytearray, value, nullable=False) -> None:
    if value is None:
        if not nullable:
            raise KafkaProtocolError("bytes is not nullable")
        out += INT32.pack(-1)
        return
    out += INT32.pack(len(value))
    out += value


def write_nullable_bytes(out, value):
    write_bytes(out, value, nullable=True)


def write_compact_bytes(out: bytearray, value, nullable=False) -> None:
    if value is None:
        if not nullable:
            raise KafkaProtocolError("compact bytes is not nullable")
        out.append(0)
        return
    write_uvarint(out, len(value) + 1)
    out += value


def write_compact_nullable_bytes(out, value):
    write_compact_bytes(out, value, nullable=True)


# --- uuid ----------------------------------------------------------------------

ZERO_UUID = _uuid.UUID(int=0)


def read_uuid(buf, pos):
    if pos + 16 > len(buf):
        _need(buf, pos, 16, "uuid")
    return _uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16


def write_uuid(out: bytearray, value) -> None:
    if value is None:
        value = ZERO_UUID
    if isinstance(value, (bytes, bytearray)):
        if len(value) != 16:
            raise KafkaProtocolError("uuid must be 16 bytes")
        out += value
    else:
        out += value.bytes


# --- array lengths ---------------------------------------------------------------


def read_array_length(buf, pos, compact: bool, nullable: bool = False):
    """Returns (count or None, pos). Compact arrays store count+1 as uvarint."""
    if compact:
        raw, pos = read_uvarint(buf, pos)
        count = raw - 1
    else:
        count, pos = read_int32(buf, pos)
    if count < 0:
        if count == -1:
            if nullable:
                return None, pos
            # Brokers send null arrays in a few non-nullable places; treat as empty.
            return 0, pos
        raise KafkaProtocolError(f"invalid array length {count} at position {pos}")
    # Each element takes at least one byte: a larger count cannot be honest.
    if count > len(buf) - pos:
        raise KafkaProtocolError(
            f"array length {count} at position {pos} exceeds remaining {len(buf) - pos} bytes"
        )
    return count, pos


def write_array_length(out: bytearray, count, compact: bool) -> None:
    if compact:
        write_uvarint(out, 0 if count is None else count + 1)
    else:
        out += INT32.pack(-1 if count is None else count)
