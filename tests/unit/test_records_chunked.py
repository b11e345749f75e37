"""Chunked decoding of compressed responses (kafka_ds.protocol.records._CHUNK_*).

Compressed batches are decompressed and decoded in chunks of ~32k records; these
tests force tiny chunks and check that the result is exactly the one-chunk result
(and aiokafka's reading) for every column, across codecs, headers, log-append
time, a fetch offset inside a batch, mixed codecs and corrupt data in a later chunk.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords

from kafka_ds.errors import CorruptRecordError
from kafka_ds.protocol import records_v2
from kafka_ds.protocol.records import decode_records

TS0 = 1_700_000_000_000


def _batch(base, n, codec, headers=False, log_append=False, seed=0):
    b = AioBuilder(2, codec | (0x08 if log_append else 0), 0, -1, -1, -1, 1 << 30)
    for i in range(n):
        hdrs = [(f"h{i % 3}", b"v" * (i % 5))] * (i % 3) if headers else []
        key = None if (i + seed) % 7 == 0 else b"k%d" % (base + i)
        value = None if (i + seed) % 11 == 0 else b"value-%d-" % (base + i) * (1 + i % 4)
        b.append(i, TS0 + base + i, key, value, hdrs)
    out = bytearray(b.build())
    out[0:8] = base.to_bytes(8, "big")
    return bytes(out)


def _decode(data, fetch_offset=0, **kw):
    return decode_records(data, topic="t", partition=0, fetch_offset=fetch_offset, **kw)


@pytest.fixture
def tiny_chunks(monkeypatch):
    def set_chunks(records, nbytes=1 << 30):
        monkeypatch.setattr(records_v2, "_CHUNK_RECORDS", records)
        monkeypatch.setattr(records_v2, "_CHUNK_BYTES", nbytes)

    return set_chunks


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
@pytest.mark.parametrize("chunk", [1, 7, 50])
def test_chunked_equals_one_chunk(codec, chunk, tiny_chunks):
    blob = b"".join(
        _batch(
            base,
            20 + base % 13,
            codec,
            headers=(base // 40) % 2 == 1,
            log_append=(base // 40) % 3 == 2,
            seed=base,
        )
        for base in range(0, 400, 40)
    )
    whole = _decode(blob, fetch_offset=7)
    tiny_chunks(chunk)
    chunked = _decode(blob, fetch_offset=7)
    chunked.batch.validate(full=True)
    assert chunked.batch.equals(whole.batch)
    assert (chunked.next_offset, chunked.record_count) == (whole.next_offset, whole.record_count)
    # and both agree with aiokafka's reader
    expected = []
    mr = AioMemoryRecords(blob)
    while (b := mr.next_batch()) is not None:
        expected += [(r.offset, r.key, r.value) for r in b if r.offset >= 7]
    got = list(
        zip(
            chunked.batch.column("offset").to_pylist(),
            chunked.batch.column("key").to_pylist(),
            chunked.batch.column("value").to_pylist(),
            strict=True,
        )
    )
    assert got == expected


def test_chunk_limit_by_bytes_and_mixed_codecs(tiny_chunks):
    blob = b"".join(
        _batch(base, 30, codec, headers=True)
        for base, codec in zip(range(0, 300, 30), [3, 0, 4, 4, 1, 3, 2, 0, 0, 4], strict=True)
    )
    whole = _decode(blob)
    tiny_chunks(1 << 30, 200)
    assert _decode(blob).batch.equals(whole.batch)


def test_corruption_in_a_later_chunk_names_its_batch(tiny_chunks):
    good = b"".join(_batch(base, 25, 3) for base in range(0, 100, 25))
    bad = bytearray(_batch(100, 25, 3))
    bad[-3] ^= 0xFF  # inside the lz4 payload: CRC mismatch
    tiny_chunks(30)
    with pytest.raises(CorruptRecordError, match="offset 100"):
        _decode(good + bytes(bad))


def test_headers_only_in_some_chunks(tiny_chunks):
    blob = b"".join(_batch(base, 10, 4, headers=base in (20, 50)) for base in range(0, 80, 10))
    whole = _decode(blob)
    tiny_chunks(10)
    chunked = _decode(blob, include_headers=True)
    assert chunked.batch.equals(whole.batch)
    assert chunked.batch.column("headers").null_count == 80 - 2 * 6  # i % 3 != 0 have headers
    assert pa.types.is_list(chunked.batch.schema.field("headers").type)
