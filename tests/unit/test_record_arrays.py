"""The numpy/Arrow helpers shared by the record encoder, the writer and the partitioner
(kafka_ds.protocol.records_arrays, records_encode): null handling, varint sizes, header sizes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ds.errors import KafkaProtocolError
from kafka_ds.protocol import primitives as p
from kafka_ds.protocol.records import decode_records
from kafka_ds.protocol.records_arrays import (
    as_binary_array,
    binary_lengths,
    varint_sizes,
    zigzag_encode,
)
from kafka_ds.protocol.records_encode import encode_record_batch
from kafka_ds.protocol.records_headers import flatten_headers, header_sizes
from kafka_ds.protocol.records_layout import HEADERS_TYPE
from kafka_ds.write.partitioner import murmur2, murmur2_array


def _null_spanning_bytes():
    """["abc", null (its slot spans 3 bytes "def"), "", "gh"]: Arrow allows a null
    value to cover bytes; they are not the value."""
    offsets = np.array([0, 3, 6, 6, 8], dtype=np.int32)
    validity = np.packbits(np.array([1, 0, 1, 1], dtype=bool), bitorder="little")
    return pa.Array.from_buffers(
        pa.binary(), 4, [pa.py_buffer(validity), pa.py_buffer(offsets), pa.py_buffer(b"abcdefgh")]
    )


def test_binary_lengths_nulls_are_minus_one():
    """-1 is what the record format writes for a null key/value/header value."""
    assert binary_lengths(pa.array([b"ab", None, b"", b"xyz"])).tolist() == [2, -1, 0, 3]
    assert binary_lengths(_null_spanning_bytes()).tolist() == [3, -1, 0, 2]
    assert binary_lengths(_null_spanning_bytes().slice(1, 3)).tolist() == [-1, 0, 2]
    assert binary_lengths(pa.array([], pa.binary())).tolist() == []
    assert binary_lengths(pa.nulls(3, pa.binary())).tolist() == [-1, -1, -1]
    # large offsets and strings too (the typed encoders' string columns)
    assert binary_lengths(pa.array(["é", None, "abc"], pa.large_string())).tolist() == [2, -1, 3]
    assert binary_lengths(pa.array([b"xy", b""], pa.large_binary()).slice(1)).tolist() == [0]


def test_as_binary_array():
    assert as_binary_array(None, "keys") is None
    s = as_binary_array(pa.array(["é", None, ""]), "keys")
    assert s.type == pa.binary() and s.to_pylist() == ["é".encode(), None, b""]
    chunked = pa.chunked_array(
        [pa.array([b"a"]), pa.array([None, b"bc"], pa.large_binary()).cast(pa.binary())]
    )
    assert as_binary_array(chunked, "keys").to_pylist() == [b"a", None, b"bc"]
    assert as_binary_array(pa.array(["x"], pa.large_string()), "keys").to_pylist() == [b"x"]
    assert as_binary_array(pa.nulls(2), "keys").type == pa.binary()
    assert as_binary_array([b"a", None], "keys").to_pylist() == [b"a", None]
    with pytest.raises(KafkaProtocolError, match="keys must be a binary or string array"):
        as_binary_array(pa.array([1, 2]), "keys")


EDGES = [
    0,
    1,
    -1,
    63,
    -64,
    64,
    -65,
    8191,
    8192,
    -8193,
    2**31 - 1,
    -(2**31),
    2**62,
    2**63 - 1,
    -(2**63),
]


def test_varint_sizes_match_the_scalar_primitive():
    values = np.array(EDGES, dtype=np.int64)
    expected = [p.varint_size(v) for v in EDGES]
    assert varint_sizes(values, zigzag=True).tolist() == expected
    assert varint_sizes(zigzag_encode(values), zigzag=False).tolist() == expected
    for v, size in zip(EDGES, expected, strict=True):
        out = bytearray()
        p.write_varint(out, v)
        assert len(out) == size


@given(st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=50))
def test_varint_sizes_property(values):
    arr = np.array(values, dtype=np.int64)
    # an int when every value has the same size
    sizes = varint_sizes(arr, zigzag=True) if values else []
    assert np.broadcast_to(sizes, len(values)).tolist() == [p.varint_size(v) for v in values]
    assert isinstance(sizes, int) == (len({p.varint_size(v) for v in values}) == 1)


def _headers_with_null_spanning_list():
    """4 records: [h1, h2], null (its slot spans one entry, h3), [], [h4 with a null value]."""
    entries = pa.array(
        [
            {"key": "h1", "value": b"v1"},
            {"key": "h2", "value": b""},
            {"key": "h3", "value": b"not a header"},
            {"key": "h4", "value": None},
        ],
        type=HEADERS_TYPE.value_type,
    )
    offsets = np.array([0, 2, 3, 3, 4], dtype=np.int32)
    validity = np.packbits(np.array([1, 0, 1, 1], dtype=bool), bitorder="little")
    return pa.Array.from_buffers(
        HEADERS_TYPE, 4, [pa.py_buffer(validity), pa.py_buffer(offsets)], children=[entries]
    )


def _expected_header_bytes(rows):
    out = []
    for headers in rows:
        blob = bytearray()
        for key, value in headers or []:
            key = key.encode()
            p.write_varint(blob, len(key))
            blob += key
            p.write_varint(blob, -1 if value is None else len(value))
            blob += value or b""
        out.append(len(blob))
    return out


@pytest.mark.parametrize("shape", ["plain", "null-lists", "null-spanning", "sliced"])
def test_header_sizes_per_record(shape):
    if shape == "plain":
        headers = pa.array(
            [[("a", b"1")], [("bb", b"x" * 200), ("c", None)], []],
            type=pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
        )
    elif shape == "null-lists":
        headers = pa.array([None, [{"key": "k", "value": b"v"}], None], type=HEADERS_TYPE)
    elif shape == "null-spanning":
        headers = _headers_with_null_spanning_list()
    else:
        headers = _headers_with_null_spanning_list().slice(1, 3)
    rows = [None if h is None else [(e["key"], e["value"]) for e in h] for h in headers.to_pylist()]
    record_offsets, flat = flatten_headers(headers)
    assert np.diff(record_offsets).tolist() == [len(h or []) for h in rows]
    sizes = header_sizes(
        as_binary_array(flat.field("key"), "k"),
        as_binary_array(flat.field("value"), "v"),
        record_offsets,
    )
    assert np.diff(sizes.record_offsets).tolist() == _expected_header_bytes(rows)
    # and the encoder writes exactly these headers
    batch = encode_record_batch(keys=None, values=pa.array([b"v"] * len(headers)), headers=headers)
    decoded = decode_records(batch, topic="t", partition=0, fetch_offset=0).batch
    got = [
        None if h is None else [(e["key"], e["value"]) for e in h]
        for h in decoded.column("headers").to_pylist()
    ]
    assert got == [h or None for h in rows]


def test_murmur2_nulls_hash_like_empty_keys():
    keys = _null_spanning_bytes()
    assert murmur2_array(keys).tolist() == [
        murmur2(b"abc"),
        murmur2(b""),
        murmur2(b""),
        murmur2(b"gh"),
    ]
    assert murmur2_array(pa.array([None, "abcde"])).tolist() == [murmur2(b""), murmur2(b"abcde")]


@pytest.mark.parametrize("with_keys,with_headers", [(True, False), (False, False), (True, True)])
def test_record_size_estimates(with_keys, with_headers):
    """The writer's per-record size bound (kafka_ds.write.rows), whose varint sizes are
    counted per size class, against a record-by-record count: lengths across the 64 and
    8192 varint boundaries, nulls, headers."""
    from kafka_ds.write.rows import _record_sizes

    lengths = [None, 0, 1, 63, 64, 65, 8191, 8192, 8193, 70_000, 30]
    n = len(lengths)
    values = pa.array([None if v is None else b"v" * v for v in lengths], pa.binary())
    keys = (
        pa.array([None if v is None else b"k" * v for v in reversed(lengths)], pa.binary())
        if with_keys
        else None
    )
    headers = (
        pa.array(
            [[{"key": "h", "value": b"x" * 70}] * (i * 7) or None for i in range(n)], HEADERS_TYPE
        )
        if with_headers
        else None
    )
    ts = np.array([1_700_000_000_000 + i * 999 for i in range(n)])
    got = _record_sizes(keys, values, headers, ts, 1 << 20, 0, None)

    zz = p.varint_size  # bytes of a zigzag varint
    span = int(ts.max() - ts.min()) + 1_000_000
    for i in range(n):
        key = keys[i].as_py() if keys is not None else None
        value = values[i].as_py()
        count = i * 7 if with_headers else 0
        header_bytes = count * (zz(1) + 1 + zz(70) + 70)
        body = (
            1
            + zz(span)
            + zz(1 << 20)
            + zz(-1 if key is None else len(key))
            + len(key or b"")
            + zz(-1 if value is None else len(value))
            + len(value or b"")
            + zz(count)
            + header_bytes
        )
        assert int(got[i]) == body + zz(body), i


@given(st.lists(st.integers(min_value=0, max_value=(1 << 64) - 1), min_size=1, max_size=40))
def test_peek_uvarints_reads_every_varint_at_its_start(values):
    from kafka_ds.protocol.primitives import uvarint_bytes
    from kafka_ds.protocol.records_arrays import peek_uvarints

    encoded = [uvarint_bytes(v) for v in values]
    starts = np.cumsum([0] + [len(e) for e in encoded[:-1]]).astype(np.int64)
    data = np.frombuffer(b"".join(encoded), np.uint8)
    got, sizes = peek_uvarints(data, starts)
    assert got.tolist() == values
    assert sizes.tolist() == [len(e) for e in encoded]


def test_peek_uvarints_gives_size_0_to_a_varint_longer_than_10_bytes():
    from kafka_ds.protocol.records_arrays import peek_uvarints

    data = np.frombuffer(b"\x05" + b"\xff" * 11 + b"\x01", np.uint8)
    _, sizes = peek_uvarints(data, np.array([0, 1], np.int64))
    assert sizes.tolist() == [1, 0]
