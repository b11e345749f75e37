"""Tests for kafka_ds.protocol.records: decode (column-wise) and encode of record batches.

Cross-checked against two independent implementations (aiokafka's Cython
reader/builder, kafka-python's pure-Python reader/builder), plus a hand-built
golden byte vector.
"""

from __future__ import annotations

import os
import random
import struct
import warnings
import zlib

import lz4.frame
import numpy as np
import pyarrow as pa
import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():  # kafka-python's imports emit DeprecationWarnings
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record._crc32c import crc as py_crc32c  # pure-Python, independent of ours
    from kafka.record.default_records import DefaultRecordBatch as KpBatch
    from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
    from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder
    from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

from kafka_ds.errors import CorruptRecordError, KafkaProtocolError
from kafka_ds.protocol import records_starts
from kafka_ds.protocol.lz4_legacy import xxh32
from kafka_ds.protocol.records import decode_records
from kafka_ds.protocol.records_encode import encode_record_batch
from kafka_ds.protocol.records_layout import HEADERS_TYPE, DecodeResult, record_schema

TOPIC = "orders-topic"
PARTITION = 7
TS0 = 1_700_000_000_000
CODECS = [0, 1, 2, 3, 4]


# --- helpers -------------------------------------------------------------------------


def decode(data, fetch_offset=0, **kw):
    result = decode_records(data, topic=TOPIC, partition=PARTITION, fetch_offset=fetch_offset, **kw)
    assert isinstance(result, DecodeResult)
    result.batch.validate(full=True)
    assert result.record_count == result.batch.num_rows
    assert result.batch.schema == record_schema(kw.get("include_headers", True))
    return result


def rows_of(result):
    """Our decode result as (offset, ts_ms, ts_type, key, value, headers) tuples."""
    b = result.batch
    ts = b.column("timestamp").cast(pa.int64()).to_pylist()
    assert all(t % 1000 == 0 for t in ts)
    headers = (
        b.column("headers").to_pylist() if "headers" in b.schema.names else [None] * b.num_rows
    )
    return [
        (o, t // 1000, tt, k, v, [(h["key"], h["value"]) for h in (hs or [])])
        for o, t, tt, k, v, hs in zip(
            b.column("offset").to_pylist(),
            ts,
            b.column("timestampType").to_pylist(),
            b.column("key").to_pylist(),
            b.column("value").to_pylist(),
            headers,
            strict=True,
        )
    ]


def aio_rows(data):
    """Rows read by aiokafka's (Cython) reader; control batches skipped."""
    out = []
    mr = AioMemoryRecords(bytes(data))
    while (batch := mr.next_batch()) is not None:
        if getattr(batch, "is_control_batch", False):
            continue
        for r in batch:
            out.append(
                (
                    r.offset,
                    r.timestamp,
                    r.timestamp_type,
                    r.key,
                    r.value,
                    [(k, v) for k, v in r.headers],
                )
            )
    return out


def kp_rows(data):
    """Rows read by kafka-python's (pure Python) reader; control batches skipped."""
    out = []
    for batch in KpMemoryRecords(bytes(data)):
        if getattr(batch, "is_control_batch", False):
            continue
        for r in batch:
            ts = r.timestamp if r.timestamp is not None else -1
            tt = r.timestamp_type if r.timestamp_type is not None else -1
            out.append((r.offset, ts, tt, r.key, r.value, [(k, v) for k, v in r.headers]))
    return out


def refresh_crc_v2(buf: bytearray, pos: int = 0) -> None:
    """Recompute the CRC-32C of the v2 batch at ``pos`` with kafka-python's pure-Python crc."""
    (length,) = struct.unpack_from(">i", buf, pos + 8)
    end = pos + 12 + length
    struct.pack_into(">I", buf, pos + 17, py_crc32c(bytes(buf[pos + 21 : end])))


def patch_v2(batch, *, base_offset=None, attrs_or=0, max_ts=None, count=None):
    buf = bytearray(batch)
    if base_offset is not None:
        struct.pack_into(">q", buf, 0, base_offset)
    if attrs_or:
        (attrs,) = struct.unpack_from(">h", buf, 21)
        struct.pack_into(">h", buf, 21, attrs | attrs_or)
    if max_ts is not None:
        struct.pack_into(">q", buf, 35, max_ts)
    if count is not None:
        struct.pack_into(">i", buf, 57, count)
    refresh_crc_v2(buf)
    return bytes(buf)


def aio_batch(
    records, codec=0, base_offset=0, transactional=False, pid=-1, epoch=-1, seq=-1, offsets=None
):
    b = AioBuilder(2, codec, int(transactional), pid, epoch, seq, 1 << 30)
    for i, (ts, key, value, headers) in enumerate(records):
        b.append(i if offsets is None else offsets[i], ts, key, value, headers)
    return patch_v2(bytes(b.build()), base_offset=base_offset) if base_offset else bytes(b.build())


def kp_batch(records, codec=0, base_offset=0):
    b = KpBuilder(2, codec, False, -1, -1, -1, 1 << 30)
    for i, (ts, key, value, headers) in enumerate(records):
        b.append(i, ts, key, value, headers)
    out = bytearray(b.build())
    struct.pack_into(">q", out, 0, base_offset)
    return bytes(out)


def control_batch(base_offset, pid, abort: bool, epoch=0):
    key = struct.pack(">hh", 0, 0 if abort else 1)
    value = struct.pack(">hi", 0, 5)
    raw = aio_batch(
        [(TS0, key, value, [])],
        base_offset=base_offset,
        transactional=True,
        pid=pid,
        epoch=epoch,
        seq=-1,
    )
    return patch_v2(raw, attrs_or=0x20)


def simple_records(n, value_size=20, start=0, headers=None):
    return [
        (
            TS0 + i,
            b"k%d" % (start + i),
            (b"v%d-" % (start + i)).ljust(value_size, b"."),
            headers(i) if headers else [],
        )
        for i in range(n)
    ]


def expected_rows(records, base_offset, ts_type=0, offsets=None):
    return [
        (
            (base_offset + i) if offsets is None else base_offset + offsets[i],
            ts,
            ts_type,
            k,
            v,
            list(h),
        )
        for i, (ts, k, v, h) in enumerate(records)
    ]


RICH = [
    (TS0, b"key", b"value", []),
    (TS0 + 1, None, b"null key", []),
    (TS0 + 2, b"null value", None, []),
    (TS0 + 3, None, None, []),
    (TS0 - 4, b"", b"", []),  # empty, negative ts delta
    (TS0 + 5, b"h", b"dup headers", [("a", b"1"), ("a", b"2"), ("b", None), ("", b"")]),
    (TS0 + 6, b"unicode", "héllo".encode(), [("ключ", b"\x00\xff"), ("a", None)]),
    (TS0 + 70_000, b"big", os.urandom(1 << 20), []),  # 1 MiB value, 3-byte varints
    (TS0 + 8, b"x" * 300, b"\x00" * 200, [("h" * 100, b"y" * 1000)]),
] + [(TS0 + 9 + i, b"k%d" % i, bytes([i % 256]) * (i % 40), []) for i in range(100)]


# --- cross-checks against independent implementations ---------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_builder_all_codecs(codec):
    data = aio_batch(RICH, codec=codec, base_offset=1000)
    result = decode(data)
    ours = rows_of(result)
    assert ours == expected_rows(RICH, 1000)
    assert ours == aio_rows(data)
    assert result.next_offset == 1000 + len(RICH)
    assert not result.truncated
    assert result.bytes_consumed == len(data)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_builder_all_codecs(codec):
    recs = RICH[:7] + simple_records(300, value_size=100)
    data = kp_batch(recs, codec=codec, base_offset=5) + kp_batch(
        simple_records(50, start=300), codec=codec, base_offset=312
    )
    result = decode(data)
    assert rows_of(result) == kp_rows(data)
    assert rows_of(result) == aio_rows(data)
    assert result.next_offset == 362


@pytest.mark.parametrize("codec", CODECS)
def test_many_batches_one_blob_matches_readers(codec):
    rnd = random.Random(codec)
    blob = b""
    base = 0
    for _ in range(30):
        n = rnd.randint(1, 600)
        recs = [
            (
                TS0 + rnd.randint(-5000, 5000),
                None if rnd.random() < 0.1 else os.urandom(rnd.randint(0, 12)),
                None
                if rnd.random() < 0.05
                else bytes(rnd.choices(b"abc{}:,0123 ", k=rnd.randint(0, 300))),
                [],
            )
            for _ in range(n)
        ]
        blob += aio_batch(recs, codec=codec, base_offset=base)
        base += n
    result = decode(blob)
    assert rows_of(result) == aio_rows(blob)
    assert result.next_offset == base


@pytest.mark.parametrize("payload", ["zeros", "random", "embedded-records", "sparse-zero"])
def test_adversarial_payloads_for_the_speculative_walk(payload):
    """Values full of zero bytes / fake records must not fool the record-start search."""
    rnd = random.Random(7)
    fake = bytes(aio_batch(simple_records(5, value_size=3))[61:])  # serialized records
    make = {
        "zeros": lambda i: b"\x00" * (i % 50),
        "random": lambda i: bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 120))),
        "embedded-records": lambda i: fake[: (i * 7) % len(fake)] + fake,
        "sparse-zero": lambda i: b"ab\x00\x02\x00cd" * (i % 5),
    }[payload]
    recs = [(TS0 + i, make(i + 1), make(i), []) for i in range(400)]
    for codec in (0, 3):
        data = aio_batch(recs, codec=codec, base_offset=9) + aio_batch(
            recs[:50], codec=codec, base_offset=409
        )
        assert rows_of(decode(data)) == aio_rows(data)


def test_headers_many_shapes_vectorized_and_python_paths():
    def hdrs(i):
        return [
            (f"h{j % 3}", None if (i + j) % 4 == 0 else bytes([j]) * (j % 9)) for j in range(i % 45)
        ]

    recs = simple_records(200, headers=hdrs)
    data = aio_batch(recs, base_offset=50) + aio_batch(simple_records(30), codec=4, base_offset=250)
    result = decode(data)
    assert rows_of(result) == aio_rows(data)
    h = result.batch.column("headers")
    assert h.type == HEADERS_TYPE
    assert h.null_count == 200 // 45 + 1 + 30  # records without headers -> null, like Spark
    no_headers = decode(data, include_headers=False)
    assert no_headers.batch.schema.names == ["key", "value", "offset", "timestamp", "timestampType"]
    assert [r[:5] for r in rows_of(no_headers)] == [r[:5] for r in rows_of(result)]


def _forbid(monkeypatch, name):
    def boom(*args, **kwargs):
        raise AssertionError(f"{name} should not be needed here")

    monkeypatch.setattr(records_starts, name, boom)


def test_fast_paths_are_taken(monkeypatch):
    """White box: typical batches never need the per-record Python walk."""
    plain = b"".join(
        aio_batch(simple_records(300, start=i * 300), codec=c, base_offset=i * 300)
        for i, c in enumerate([0, 3, 4, 0])
    )
    with_headers = b"".join(
        aio_batch(
            simple_records(200, headers=lambda i: [("trace", b"%032x" % i), ("src", b"a\x00b")]),
            codec=c,
            base_offset=i * 200,
        )
        for i, c in enumerate([0, 3])
    )
    # header values that look like a record whose successor is the next real
    # record: only the "nothing points to it" pruning removes these decoys
    decoy = aio_batch(
        simple_records(50, headers=lambda i: [("d", b"\x0c\x00abcde")]), base_offset=9
    )
    expected_plain = aio_rows(plain)
    expected_headers = aio_rows(with_headers)
    expected_decoy = aio_rows(decoy)
    _forbid(monkeypatch, "_walk_region")
    assert rows_of(decode(with_headers)) == expected_headers  # tier 2
    assert rows_of(decode(decoy)) == expected_decoy
    _forbid(monkeypatch, "_chains_attr_zero")
    assert rows_of(decode(plain)) == expected_plain  # tier 1


@pytest.mark.parametrize("shape", ["zero-values", "fake-records", "binary"])
def test_adversarial_headers_for_the_speculative_walk(shape):
    rnd = random.Random(11)
    fake = bytes(
        aio_batch(simple_records(4, value_size=2, headers=lambda i: [("h", b"\x00")]))[61:]
    )
    value = {
        "zero-values": lambda i: b"\x00" * (i % 9),
        "fake-records": lambda i: fake[(i * 5) % len(fake) :] + fake[: i % 7],
        "binary": lambda i: bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 40))),
    }[shape]
    recs = [
        (TS0 + i, value(i + 3), value(i), [(f"k{i % 3}", value(i + 1))] * (1 + i % 3))
        for i in range(300)
    ]
    data = aio_batch(recs, base_offset=1) + aio_batch(recs[:40], codec=3, base_offset=301)
    assert rows_of(decode(data)) == aio_rows(data)


def test_invalid_utf8_header_key_is_replaced():
    recs = [(TS0, b"k", b"v", [("ok", b"1")])]
    raw = bytearray(aio_batch(recs))
    i = raw.index(b"ok")
    raw[i] = 0xFF
    refresh_crc_v2(raw)
    result = decode(bytes(raw))
    assert result.batch.column("headers").to_pylist()[0][0]["key"] == "\ufffdk"


# --- legacy message sets ---------------------------------------------------------------------


def legacy_set(magic, codec, records, base_offset):
    """kafka-python legacy builder; wrapper offset patched like a broker would."""
    b = KpLegacyBuilder(magic, codec, 1 << 30)
    for i, (ts, key, value) in enumerate(records):
        inner_offset = i if (codec and magic == 1) else base_offset + i
        b.append(inner_offset, ts, key, value)
    out = bytearray(b.build())
    if codec:
        struct.pack_into(">q", out, 0, base_offset + len(records) - 1)  # not covered by the CRC
    return bytes(out)


def legacy_message(magic, attrs, offset, ts, key, value):
    body = bytearray(struct.pack(">bb", magic, attrs))
    if magic == 1:
        body += struct.pack(">q", ts)
    for f in (key, value):
        body += struct.pack(">i", -1) if f is None else struct.pack(">i", len(f)) + f
    crc = zlib.crc32(bytes(body))
    return struct.pack(">qiI", offset, len(body) + 4, crc) + bytes(body)


LEGACY_RECS = [
    (TS0 + i, None if i == 2 else b"lk%d" % i, None if i == 3 else b"legacy value %d" % i)
    for i in range(12)
]


# (v0 + lz4 needs xxhash in kafka-python: covered by test_legacy_v0_lz4_by_hand)
@pytest.mark.parametrize("magic, codec", [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)])
def test_legacy_kafka_python_builder(magic, codec):
    data = legacy_set(magic, codec, LEGACY_RECS, 200)
    result = decode(data)
    ours = rows_of(result)
    assert ours == kp_rows(data)
    assert [r[0] for r in ours] == list(range(200, 212))
    if magic == 0:
        assert all(r[1] == -1 and r[2] == -1 for r in ours)  # Spark: timestamp -1 ms, type -1
        assert result.batch.column("timestamp").cast(pa.int64()).to_pylist()[0] == -1000
    else:
        assert [r[1] for r in ours] == [ts for ts, _, _ in LEGACY_RECS]
        assert all(r[2] == 0 for r in ours)
    assert result.next_offset == 212
    assert result.batch.column("headers").null_count == 12


def test_legacy_v0_lz4_by_hand():
    inner = b"".join(
        legacy_message(0, 0, 300 + i, None, k, v) for i, (_, k, v) in enumerate(LEGACY_RECS)
    )
    frame = bytearray(lz4.frame.compress(inner, store_size=False, block_linked=False))
    frame[6] = (xxh32(bytes(frame[0:6])) >> 8) & 0xFF  # pre-KIP-57 broken checksum
    data = legacy_message(0, 3, 311, None, None, bytes(frame))
    result = decode(data)
    assert rows_of(result) == [
        (300 + i, -1, -1, k, v, []) for i, (_, k, v) in enumerate(LEGACY_RECS)
    ]


def test_legacy_v1_log_append_time_wrapper():
    data = bytearray(legacy_set(1, 1, LEGACY_RECS, 40))
    struct.pack_into(">b", data, 17, 1 | 0x08)  # gzip + LogAppendTime
    struct.pack_into(">q", data, 18, TS0 + 999)
    struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[16:])))
    data = bytes(data)
    ours = rows_of(decode(data))
    assert ours == kp_rows(data)
    assert all(r[1] == TS0 + 999 and r[2] == 1 for r in ours)


def test_mixed_legacy_and_v2_in_order():
    a = legacy_set(1, 0, LEGACY_RECS[:3], 0)
    b = aio_batch(simple_records(20), codec=3, base_offset=3)
    c = legacy_set(0, 2, LEGACY_RECS, 23)
    d = aio_batch(RICH[:7], base_offset=35)
    data = a + b + c + d
    result = decode(data, fetch_offset=1)
    expected = [r for part in (a, b, c, d) for r in rows_of(decode(part))]
    assert rows_of(result) == [r for r in expected if r[0] >= 1]
    assert result.next_offset == 42


def test_legacy_corruption():
    good = legacy_set(1, 1, LEGACY_RECS, 77)
    bad = bytearray(good)
    bad[-3] ^= 0x01
    with pytest.raises(CorruptRecordError, match="orders-topic") as exc:
        decode(bytes(bad))
    assert "77" in str(exc.value) or "88" in str(exc.value)
    # wrapper with a value that is not a message set
    junk = legacy_message(1, 1, 5, TS0, None, zlib.compress(b"x"))
    with pytest.raises(KafkaProtocolError):
        decode(junk)
    inner_garbage = legacy_message(1, 2, 5, TS0, None, b"\x00" * 3)
    with pytest.raises(KafkaProtocolError):
        decode(inner_garbage)


# --- encoder -----------------------------------------------------------------------------------

# A hand-built v2 batch: 2 records, uncompressed, no producer state.
GOLDEN_HEX = (
    "0000000000000010"  # baseOffset = 16
    "00000046"  # batchLength = 70 (bytes after this field)
    "ffffffff"  # partitionLeaderEpoch = -1
    "02"  # magic = 2
    "afcb73ba"  # CRC-32C over attributes..end
    "0000"  # attributes: no compression, CreateTime, not transactional/control
    "00000001"  # lastOffsetDelta = 1
    "0000018bcfe56800"  # firstTimestamp = 1700000000000
    "0000018bcfe56805"  # maxTimestamp = 1700000000005
    "ffffffffffffffff"  # producerId = -1
    "ffff"  # producerEpoch = -1
    "ffffffff"  # baseSequence = -1
    "00000002"  # records count = 2
    # record 0
    "12"  # length = 9 (zigzag 18)
    "00"  # attributes
    "00"  # timestampDelta = 0
    "00"  # offsetDelta = 0
    "02"
    "6b"  # keyLength = 1, key = b"k"
    "04"
    "7631"  # valueLength = 2, value = b"v1"
    "00"  # headers count = 0
    # record 1
    "14"  # length = 10 (zigzag 20)
    "00"  # attributes
    "0a"  # timestampDelta = 5
    "02"  # offsetDelta = 1
    "01"  # keyLength = -1 (null key)
    "00"  # valueLength = 0 (empty value)
    "02"  # headers count = 1
    "02"
    "68"  # header key length 1, "h"
    "02"
    "78"  # header value length 1, b"x"
)
GOLDEN = bytes.fromhex(GOLDEN_HEX)


def test_golden_vector_decode():
    assert len(GOLDEN) == 82
    assert int.from_bytes(GOLDEN[17:21], "big") == py_crc32c(GOLDEN[21:])  # independent CRC
    result = decode(GOLDEN)
    assert rows_of(result) == [
        (16, TS0, 0, b"k", b"v1", []),
        (17, TS0 + 5, 0, None, b"", [("h", b"x")]),
    ]
    assert result.next_offset == 18
    assert (
        result.batch.column("timestamp").to_pylist()[0].isoformat() == "2023-11-14T22:13:20+00:00"
    )


def test_golden_vector_encode():
    out = encode_record_batch(
        keys=pa.array([b"k", None], pa.binary()),
        values=pa.array([b"v1", b""], pa.binary()),
        headers=pa.array([None, [{"key": "h", "value": b"x"}]], HEADERS_TYPE),
        timestamps_ms=pa.array([TS0, TS0 + 5], pa.int64()),
        base_offset=16,
    )
    assert out.hex() == GOLDEN_HEX


@pytest.mark.parametrize("codec", CODECS)
def test_encode_read_by_aiokafka_and_kafka_python(codec):
    n = 700
    keys = pa.array([None if i % 7 == 0 else f"key-{i}" for i in range(n)], pa.string())
    values = pa.array([None if i % 11 == 0 else os.urandom(i % 300) for i in range(n)], pa.binary())
    headers = pa.array(
        [
            None
            if i % 3
            else [{"key": f"k{j}", "value": None if j == 1 else b"v" * j} for j in range(i % 5)]
            for i in range(n)
        ],
        HEADERS_TYPE,
    )
    ts = pa.array([TS0 + (i * 37 + 5000) % 10_000 - 5000 for i in range(n)], pa.int64())
    data = encode_record_batch(
        keys=keys,
        values=values,
        headers=headers,
        timestamps_ms=ts,
        base_offset=123,
        compression=codec,
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
        is_transactional=True,
        partition_leader_epoch=9,
    )
    expected = [
        (
            123 + i,
            ts[i].as_py(),
            0,
            None if keys[i].as_py() is None else keys[i].as_py().encode(),
            values[i].as_py(),
            [(h["key"], h["value"]) for h in (headers[i].as_py() or [])],
        )
        for i in range(n)
    ]
    aio = AioBatch(data)
    assert aio.validate_crc()
    assert (aio.base_offset, aio.producer_id, aio.producer_epoch, aio.base_sequence) == (
        123,
        42,
        3,
        17,
    )
    assert aio.is_transactional and not aio.is_control_batch
    assert aio.compression_type == codec
    assert aio.max_timestamp == max(t.as_py() for t in ts)
    assert aio_rows(data) == expected
    kp = KpBatch(data)
    assert kp.validate_crc()
    assert kp.leader_epoch == 9 and kp.last_offset_delta == n - 1 and kp.records_count == n
    assert kp.first_timestamp == ts[0].as_py() != min(t.as_py() for t in ts)
    assert kp_rows(data) == expected
    assert rows_of(decode(data)) == expected


def test_encode_variants():
    # strings, python lists, keys=None, timestamps None -> now_ms, chunked arrays, sliced arrays
    data = encode_record_batch(keys=None, values=["a", "bb", None], now_ms=TS0)
    assert aio_rows(data) == [
        (0, TS0, 0, None, b"a", []),
        (1, TS0, 0, None, b"bb", []),
        (2, TS0, 0, None, None, []),
    ]
    vals = pa.chunked_array([pa.array([b"x", b"y"]), pa.array([b"z"])])
    keys = pa.array([b"0", b"1", b"2", b"3"]).slice(1)
    data = encode_record_batch(
        keys=keys,
        values=vals,
        timestamps_ms=pa.array([5, None, 7]),
        now_ms=6,
        headers=[[("a", b"b")], None, []],
    )
    assert aio_rows(data) == [
        (0, 5, 0, b"1", b"x", [("a", b"b")]),
        (1, 6, 0, b"2", b"y", []),
        (2, 7, 0, b"3", b"z", []),
    ]
    with pytest.raises(KafkaProtocolError):
        encode_record_batch(keys=[b"a"], values=[b"a", b"b"])
    with pytest.raises(KafkaProtocolError):
        encode_record_batch(keys=None, values=[])
    with pytest.raises(KafkaProtocolError):
        encode_record_batch(keys=None, values=pa.array([1, 2]))


def _sized(length, i):
    return None if length is None else (b"%d:" % i).ljust(length, b"x")[:length]


# Cases of the column-wise encoder's fast paths and their edges: equal timestamps (one
# byte of delta each) or not, offset deltas past 63 (two bytes) and 8191 (three), key,
# value and record lengths crossing the 64 and 8192 varint boundaries, nulls, headers.
ENCODER_CASES = {
    "equal timestamps": (70, lambda i: 10, lambda i: 100, lambda i: TS0, None),
    "small deltas": (70, lambda i: 10, lambda i: 100, lambda i: TS0 + i % 50, None),
    "negative and wide deltas": (
        9,
        lambda i: 3,
        lambda i: 5,
        lambda i: TS0 + (-1) ** i * 10**i,
        None,
    ),
    "8193 records": (8193, lambda i: i % 3, lambda i: i % 70, lambda i: TS0, None),
    "lengths across 64": (
        300,
        lambda i: 60 + i % 8,
        lambda i: 58 + i % 12,
        lambda i: TS0 + i,
        None,
    ),
    "lengths across 8192": (
        40,
        lambda i: 8188 + i % 8,
        lambda i: 8180 + i % 20,
        lambda i: TS0,
        None,
    ),
    "uniform two-byte lengths": (200, lambda i: 64, lambda i: 8000, lambda i: TS0, None),
    "null keys and values": (
        100,
        lambda i: None if i % 3 else 4,
        lambda i: None if i % 7 == 0 else 9,
        lambda i: TS0,
        None,
    ),
    "all keys null": (100, lambda i: None, lambda i: 200, lambda i: TS0 - i, None),
    "headers": (
        100,
        lambda i: 5,
        lambda i: 70,
        lambda i: TS0,
        lambda i: [(f"h{j}", None if j == 1 else b"v" * (j * 40)) for j in range(i % 4)],
    ),
    "one record": (1, lambda i: 0, lambda i: 0, lambda i: 0, None),
}


@pytest.mark.parametrize("case", ENCODER_CASES)
@pytest.mark.parametrize("chunked", [False, True])
def test_encode_bytes_equal_an_independent_builder(case, chunked):
    n, key_len, value_len, ts_of, headers_of = ENCODER_CASES[case]
    records = [
        (
            ts_of(i),
            _sized(key_len(i), i),
            _sized(value_len(i), i),
            headers_of(i) if headers_of else [],
        )
        for i in range(n)
    ]
    keys = pa.array([r[1] for r in records], pa.binary())
    values = pa.array([r[2] for r in records], pa.binary())
    if chunked:  # the writer passes a partition's buffered slices as chunks
        keys = pa.chunked_array([keys.slice(0, n // 3), keys.slice(n // 3)])
        values = pa.chunked_array([values.slice(0, n // 2), values.slice(n // 2)])
    if case == "all keys null":
        keys = None
    headers = [r[3] or None for r in records] if headers_of else None
    data = encode_record_batch(
        keys=keys,
        values=values,
        headers=headers,
        timestamps_ms=[r[0] for r in records],
        producer_id=5,
        producer_epoch=1,
        base_sequence=10,
    )
    assert data == aio_batch(records, pid=5, epoch=1, seq=10)
    for codec in (1, 3):
        compressed = encode_record_batch(
            keys=keys,
            values=values,
            headers=headers,
            timestamps_ms=[r[0] for r in records],
            compression=codec,
        )
        assert aio_rows(compressed) == aio_rows(data)


def test_encode_decode_large_round_trip():
    n = 5000
    values = pa.array([os.urandom(i % 2000) for i in range(n)])
    keys = pa.array([b"%d" % i for i in range(n)])
    for codec in CODECS:
        data = encode_record_batch(keys=keys, values=values, compression=codec, now_ms=TS0)
        batch = decode(data).batch
        assert batch.column("value").equals(values)
        assert batch.column("key").equals(keys)


# --- offsets, control batches, transactions, timestamps -----------------------------------------


def test_fetch_offset_in_the_middle_of_a_batch():
    data = aio_batch(simple_records(10), base_offset=100) + aio_batch(
        simple_records(10, start=10), codec=3, base_offset=110
    )
    result = decode(data, fetch_offset=105)
    assert [r[0] for r in rows_of(result)] == list(range(105, 120))
    assert result.next_offset == 120
    result = decode(data, fetch_offset=113)
    assert [r[0] for r in rows_of(result)] == list(range(113, 120))
    result = decode(data, fetch_offset=500)  # everything below the fetch offset
    assert result.record_count == 0 and result.next_offset == 500


def test_compaction_gaps_and_empty_batches():
    data = aio_batch(simple_records(4), base_offset=10, offsets=[0, 2, 5, 9])
    empty = bytearray(patch_v2(aio_batch(simple_records(1), base_offset=20), count=0))
    empty = bytearray(empty[:61])  # no records left after compaction
    struct.pack_into(">i", empty, 8, 49)
    struct.pack_into(">i", empty, 23, 4)  # lastOffsetDelta = 4
    refresh_crc_v2(empty)
    result = decode(data + bytes(empty))
    assert [r[0] for r in rows_of(result)] == [10, 12, 15, 19]
    assert result.next_offset == 25


def test_control_batch_skipped_but_next_offset_advances():
    data = aio_batch(
        simple_records(3), base_offset=0, transactional=True, pid=7, epoch=0, seq=0
    ) + control_batch(3, pid=7, abort=False)
    result = decode(data)
    assert [r[0] for r in rows_of(result)] == [0, 1, 2]
    assert result.next_offset == 4
    only_control = decode(control_batch(50, pid=1, abort=True), fetch_offset=50)
    assert only_control.record_count == 0 and only_control.next_offset == 51


def _txn_log():
    return [
        aio_batch(
            simple_records(3, start=0), base_offset=0, transactional=True, pid=1, epoch=0, seq=0
        ),
        aio_batch(
            simple_records(2, start=3), base_offset=3, transactional=True, pid=2, epoch=0, seq=0
        ),
        aio_batch(simple_records(1, start=5), base_offset=5),  # non-transactional
        control_batch(6, pid=1, abort=True),
        control_batch(7, pid=2, abort=False),
        aio_batch(
            simple_records(2, start=8), base_offset=8, transactional=True, pid=1, epoch=0, seq=3
        ),
        control_batch(10, pid=1, abort=False),
        aio_batch(
            simple_records(2, start=11),
            codec=3,
            base_offset=11,
            transactional=True,
            pid=1,
            epoch=0,
            seq=5,
        ),
        control_batch(13, pid=1, abort=True),
        aio_batch(simple_records(1, start=14), base_offset=14),
    ]


def test_read_committed_drops_aborted_transactions():
    data = b"".join(_txn_log())
    aborted = [(1, 0), (1, 11)]
    committed = decode(data, read_committed=True, aborted_transactions=aborted)
    assert [r[0] for r in rows_of(committed)] == [3, 4, 5, 8, 9, 14]
    assert committed.next_offset == 15
    uncommitted = decode(data, read_committed=False, aborted_transactions=aborted)
    assert [r[0] for r in rows_of(uncommitted)] == [0, 1, 2, 3, 4, 5, 8, 9, 11, 12, 14]
    # aborted list in any order, fetch starting mid-way
    mid = decode(data, fetch_offset=4, read_committed=True, aborted_transactions=[(1, 11), (1, 0)])
    assert [r[0] for r in rows_of(mid)] == [4, 5, 8, 9, 14]
    # a fetch starting after the first abort marker only gets the later aborted txn
    tail = decode(
        b"".join(_txn_log()[5:]),
        fetch_offset=8,
        read_committed=True,
        aborted_transactions=[(1, 11)],
    )
    assert [r[0] for r in rows_of(tail)] == [8, 9, 14]


def test_log_append_time():
    raw = aio_batch(simple_records(5), base_offset=3)
    data = patch_v2(raw, attrs_or=0x08, max_ts=TS0 + 12345)
    result = decode(data)
    assert all(r[1] == TS0 + 12345 and r[2] == 1 for r in rows_of(result))
    assert rows_of(result) == kp_rows(data)
    assert rows_of(result) == aio_rows(data)
    mixed = decode(data + aio_batch(simple_records(2), base_offset=8))
    assert [r[2] for r in rows_of(mixed)] == [1] * 5 + [0, 0]


# --- truncation and corruption -------------------------------------------------------------------


def test_truncated_last_batch_at_every_byte():
    a = aio_batch(simple_records(3), base_offset=0)
    b = aio_batch(simple_records(40, start=3), codec=3, base_offset=3)
    c = aio_batch(RICH[:9] and [(TS0, b"k", b"v" * 30, [("x", b"y")])] * 20, base_offset=43)
    d = legacy_set(1, 1, LEGACY_RECS, 63)
    prefix = a + b
    full_prefix = rows_of(decode(prefix))
    for last in (c, d):
        for cut in range(len(last)):
            result = decode(prefix + last[:cut])
            assert rows_of(result) == full_prefix
            assert result.next_offset == 43
            assert result.truncated == (cut > 0)
            assert result.bytes_consumed == len(prefix)
    for cut in range(len(a)):
        result = decode(a[:cut], fetch_offset=17)
        assert result.record_count == 0 and result.next_offset == 17
        assert result.truncated == (cut > 0) and result.bytes_consumed == 0
    empty = decode(b"", fetch_offset=9)
    assert empty.record_count == 0 and empty.next_offset == 9 and not empty.truncated


def test_corrupt_crc_names_topic_partition_offset():
    a = aio_batch(simple_records(3), base_offset=123450)
    b = bytearray(aio_batch(simple_records(30), codec=4, base_offset=123456))
    b[70] ^= 0x40
    with pytest.raises(CorruptRecordError) as exc:
        decode(a + bytes(b))
    msg = str(exc.value)
    assert TOPIC in msg and str(PARTITION) in msg and "123456" in msg
    assert "CRC" in msg


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 5, 13, 30, 48])
def test_absurd_batch_length(length):
    data = bytearray(aio_batch(simple_records(3), base_offset=4242))
    struct.pack_into(">i", data, 8, length)
    with pytest.raises(CorruptRecordError, match="4242"):
        decode(bytes(data))


def test_unknown_magic():
    data = bytearray(aio_batch(simple_records(3), base_offset=11))
    data[16] = 3
    with pytest.raises(CorruptRecordError, match="magic"):
        decode(bytes(data))


def _corrupt_record_region(mutate, records=None, codec=0):
    raw = bytearray(aio_batch(records or simple_records(20), codec=0, base_offset=555))
    region = bytearray(raw[61:])
    mutate(region)
    raw[61:] = region
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    refresh_crc_v2(raw)
    return bytes(raw)


@pytest.mark.parametrize(
    "case",
    [
        "length+1",
        "length-1",
        "length-negative",
        "key-length-negative",
        "value-too-long",
        "extra-bytes",
        "missing-record",
        "header-count-huge",
        "header-key-null",
        "null-key-length-minus-two",
        "null-value-length-minus-two",
        "header-count-negative",
        "trailing-byte-in-record",
    ],
)
def test_inconsistent_record_structure(case):
    recs = simple_records(
        20,
        headers=(lambda i: [("h", b"v")])
        if case.startswith("header-key") or case == "header-count-huge"
        else None,
    )
    if case == "null-key-length-minus-two":
        recs = [(TS0, None, b"v", [])] * 20
    elif case == "null-value-length-minus-two":
        recs = [(TS0, b"k0", None, [])] * 20

    def mutate(region):
        if case == "length+1":
            region[0] += 2  # zigzag: +1
        elif case == "length-1":
            region[0] -= 2
        elif case == "length-negative":
            region[0] = 0x03  # -2
        elif case == "key-length-negative":
            region[4] = 0x05  # key length -3
        elif case == "value-too-long":
            region[7] = 0x7E  # value length 63 (runs into next records)
        elif case == "extra-bytes":
            region += b"\x00\x00"
        elif case == "missing-record":
            del region[-(len(region) // 20) :]
        elif case == "header-count-huge":
            i = region.index(b"\x02\x02h")  # header count 1 followed by key length 1
            region[i] = 0x7E
        elif case == "header-key-null":
            i = region.index(b"\x02\x02h")
            region[i + 1] = 0x01  # header key length -1
        elif case == "null-key-length-minus-two":
            assert region[4] == 0x01
            region[4] = 0x03  # key length -2, otherwise consistent
        elif case == "null-value-length-minus-two":
            assert region[7] == 0x01
            region[7] = 0x03  # value length -2
        elif case == "header-count-negative":
            assert region[28] == 0x00
            region[28] = 0x01  # header count -1
        elif case == "trailing-byte-in-record":
            region[0] += 2  # record 0 claims one more byte ...
            region.insert(29, 0)  # ... which is there, but unused by its fields

    data = _corrupt_record_region(mutate, recs)
    with pytest.raises(CorruptRecordError) as exc:
        decode(data)
    assert TOPIC in str(exc.value) and "555" in str(exc.value)


def test_absurd_record_count():
    data = patch_v2(aio_batch(simple_records(5), base_offset=9), count=10**9)
    with pytest.raises(CorruptRecordError, match="9"):
        decode(data)
    data = patch_v2(aio_batch(simple_records(5), base_offset=9), count=-3)
    with pytest.raises(CorruptRecordError):
        decode(data)
    for n, count in ((5, 4), (5, 6), (20, 19), (20, 21), (40, 39)):
        data = patch_v2(aio_batch(simple_records(n), base_offset=9), count=count)
        with pytest.raises(CorruptRecordError, match="9"):
            decode(data)
        data = patch_v2(
            aio_batch(simple_records(n, headers=lambda i: [("h", b"v")]), base_offset=9),
            count=count,
        )
        with pytest.raises(CorruptRecordError, match="9"):
            decode(data)


def test_decompression_bomb_in_batch():
    data = aio_batch([(TS0, None, bytes(4 << 20), [])], codec=4)
    assert len(data) < 100_000
    with pytest.raises(KafkaProtocolError, match="max_size"):
        decode(data, max_decompressed_size=1 << 20)
    assert decode(data, max_decompressed_size=8 << 20).record_count == 1


def test_corrupt_compressed_payload():
    raw = bytearray(aio_batch(simple_records(50), codec=3, base_offset=31337))
    raw[75:85] = b"\xff" * 10
    refresh_crc_v2(raw)
    with pytest.raises(CorruptRecordError, match="31337"):
        decode(bytes(raw))


def test_accepts_memoryview_and_bytearray():
    data = aio_batch(simple_records(40), base_offset=1) + aio_batch(
        simple_records(3), codec=2, base_offset=41
    )
    expected = rows_of(decode(data))
    assert rows_of(decode(memoryview(data))) == expected
    assert rows_of(decode(bytearray(data))) == expected
    assert rows_of(decode(np.frombuffer(data, np.uint8))) == expected
    assert rows_of(decode(memoryview(b"xx" + data)[2:])) == expected


# --- fuzzing -------------------------------------------------------------------------------


def _seed_blobs():
    small = simple_records(24, value_size=8)
    with_headers = simple_records(6, headers=lambda i: [("k", b"v" * i)] * (i % 3))
    many_headers = simple_records(
        20, value_size=4, headers=lambda i: [("k", b"\x00" * (i % 3))] * (1 + i % 2)
    )
    return [
        aio_batch(small, base_offset=3),
        aio_batch(many_headers, base_offset=2),
        aio_batch(with_headers, base_offset=30) + aio_batch(small[:3], codec=3, base_offset=36),
        aio_batch(small, codec=1, base_offset=1) + control_batch(25, pid=4, abort=True),
        legacy_set(1, 1, LEGACY_RECS[:4], 5) + legacy_set(0, 0, LEGACY_RECS[:2], 9),
        aio_batch(small[:4], codec=4) + aio_batch(small[:2], codec=2, base_offset=4),
    ]


SEEDS = _seed_blobs()


def _refresh_all_crcs(buf: bytearray) -> None:
    pos = 0
    while pos + 21 <= len(buf):
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        end = pos + 12 + length
        if length < 14 or end > len(buf):
            return
        if buf[pos + 16] == 2 and length >= 49:
            refresh_crc_v2(buf, pos)
        elif buf[pos + 16] in (0, 1):
            struct.pack_into(">I", buf, pos + 12, zlib.crc32(bytes(buf[pos + 16 : end])))
        pos = end


def _decode_fuzzed(data, **kw):
    try:
        result = decode_records(
            data,
            topic="t",
            partition=0,
            fetch_offset=kw.pop("fetch_offset", 0),
            read_committed=True,
            aborted_transactions=[(4, 0)],
            max_decompressed_size=1 << 20,
            **kw,
        )
    except KafkaProtocolError:
        return None
    result.batch.validate(full=True)
    assert 0 <= result.bytes_consumed <= len(data)
    return result


@settings(max_examples=250, deadline=3000, suppress_health_check=list(HealthCheck))
@given(st.binary(max_size=400), st.integers(0, 50))
def test_fuzz_random_bytes(data, fetch_offset):
    _decode_fuzzed(data, fetch_offset=fetch_offset)
    # random bytes behind a plausible v2 header
    head = struct.pack(">qiib", 0, len(data) + 9, 0, 2) + b"\x00" * 5
    _decode_fuzzed(head + data)


@settings(max_examples=400, deadline=3000, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_fuzz_mutated_batches(data):
    blob = bytearray(data.draw(st.sampled_from(SEEDS)))
    mutations = data.draw(
        st.lists(
            st.tuples(st.integers(0, len(blob) - 1), st.integers(0, 255)), min_size=1, max_size=6
        )
    )
    for pos, value in mutations:
        blob[pos] = value
    if data.draw(st.booleans()):
        _refresh_all_crcs(blob)  # reach the record parser, not just the CRC check
    cut = data.draw(st.one_of(st.none(), st.integers(0, len(blob))))
    if cut is not None:
        blob = blob[:cut]
    _decode_fuzzed(bytes(blob), include_headers=data.draw(st.booleans()))


@settings(max_examples=150, deadline=3000, suppress_health_check=list(HealthCheck))
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=30)),
            st.one_of(st.none(), st.binary(max_size=300)),
            st.lists(
                st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))),
                max_size=3,
            ),
            st.integers(-(10**6), 10**6),
        ),
        min_size=1,
        max_size=60,
    ),
    st.sampled_from(CODECS),
)
def test_fuzz_encode_decode_round_trip(records, codec):
    keys = pa.array([r[0] for r in records], pa.binary())
    values = pa.array([r[1] for r in records], pa.binary())
    headers = [[(k, v) for k, v in r[2]] or None for r in records]
    ts = [TS0 + r[3] for r in records]
    data = encode_record_batch(
        keys=keys,
        values=values,
        headers=headers,
        timestamps_ms=ts,
        compression=codec,
        base_offset=77,
    )
    expected = [(77 + i, ts[i], 0, r[0], r[1], list(r[2])) for i, r in enumerate(records)]
    assert rows_of(decode(data)) == expected
    assert aio_rows(data) == expected
