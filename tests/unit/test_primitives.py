"""Primitive types: golden bytes, round trips, and fuzz (only KafkaProtocolError)."""

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_ds.errors import KafkaProtocolError
from kafka_ds.protocol import primitives as p


def enc(write, value, *args):
    out = bytearray()
    write(out, value, *args)
    return bytes(out)


# Golden vectors: zigzag varints as in the Kafka protocol guide / protobuf spec.
@pytest.mark.parametrize(
    "value, hexed",
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (-2, "03"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (300, "d804"),
        (2147483647, "feffffff0f"),
        (-2147483648, "ffffffff0f"),
        (-(1 << 63), "ffffffffffffffffff01"),
        ((1 << 63) - 1, "feffffffffffffffff01"),
    ],
)
def test_varint_golden(value, hexed):
    assert enc(p.write_varint, value).hex() == hexed
    assert p.read_varint(bytes.fromhex(hexed), 0) == (value, len(hexed) // 2)
    assert p.varint_size(value) == len(hexed) // 2


@pytest.mark.parametrize(
    "value, hexed", [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (16384, "808001")]
)
def test_uvarint_golden(value, hexed):
    assert enc(p.write_uvarint, value).hex() == hexed
    assert p.read_uvarint(bytes.fromhex(hexed), 0) == (value, len(hexed) // 2)


def test_strings_golden():
    assert enc(p.write_string, "ab").hex() == "00026162"
    assert enc(p.write_nullable_string, None).hex() == "ffff"
    assert enc(p.write_compact_string, "ab").hex() == "036162"
    assert enc(p.write_compact_nullable_string, None).hex() == "00"
    assert enc(p.write_bytes, b"\x01").hex() == "0000000101"
    assert enc(p.write_nullable_bytes, None).hex() == "ffffffff"
    assert enc(p.write_compact_bytes, b"").hex() == "01"
    assert p.read_compact_nullable_bytes(b"\x00", 0) == (None, 1)
    assert p.read_nullable_string(b"\xff\xff", 0) == (None, 2)


def test_fixed_golden():
    assert enc(p.write_int16, -2).hex() == "fffe"
    assert enc(p.write_int32, 1).hex() == "00000001"
    assert enc(p.write_int64, -1).hex() == "ff" * 8
    assert enc(p.write_uint32, 0xFFFFFFFF).hex() == "ffffffff"
    assert enc(p.write_bool, True).hex() == "01"
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert enc(p.write_uuid, u).hex() == u.hex
    with pytest.raises(KafkaProtocolError):
        p.write_int16(bytearray(), 1 << 20)


def test_array_lengths():
    out = bytearray()
    p.write_array_length(out, 3, compact=True)
    p.write_array_length(out, None, compact=True)
    p.write_array_length(out, 2, compact=False)
    assert out.hex() == "040000000002"


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_varint_roundtrip(value):
    data = enc(p.write_varint, value)
    assert p.read_varint(data, 0) == (value, len(data))


@given(st.text(max_size=50), st.booleans())
def test_string_roundtrip(text, compact):
    write = p.write_compact_string if compact else p.write_string
    read = p.read_compact_string if compact else p.read_string
    data = enc(write, text)
    assert read(memoryview(data), 0) == (text, len(data))


READERS = [
    p.read_int8,
    p.read_int16,
    p.read_int32,
    p.read_int64,
    p.read_uvarint,
    p.read_varint,
    p.read_string,
    p.read_nullable_string,
    p.read_compact_string,
    p.read_compact_nullable_string,
    p.read_bytes,
    p.read_nullable_bytes,
    p.read_compact_bytes,
    p.read_compact_nullable_bytes,
    p.read_uuid,
    p.read_float64,
    lambda b, pos: p.read_array_length(b, pos, True),
    lambda b, pos: p.read_array_length(b, pos, False),
]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40), st.integers(min_value=0, max_value=41))
def test_readers_raise_only_protocol_errors(data, pos):
    for read in READERS:
        try:
            value, end = read(memoryview(data), pos)
        except KafkaProtocolError:
            continue
        assert end <= len(data)


def test_absurd_lengths_rejected():
    with pytest.raises(KafkaProtocolError, match="exceeds"):
        p.read_bytes(b"\x7f\xff\xff\xff", 0)
    with pytest.raises(KafkaProtocolError, match="array length"):
        p.read_array_length(b"\x7f\xff\xff\xff", 0, compact=False)
    with pytest.raises(KafkaProtocolError, match="varint"):
        p.read_uvarint(b"\xff" * 11, 0)
