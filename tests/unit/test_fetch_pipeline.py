"""The pipelined fetch of ``read_range`` (kafka_ds/read/fetch_pipeline.py), in memory.

* ``next_offset_from_headers`` (the guess of the next Fetch offset) against the
  decoder's own ``next_offset``: golden cases and a hypothesis property over real
  encoded batches cut anywhere;
* :class:`FetchAhead` over a partition log held in memory (real encoded batches, a
  Fetch cut at the fetch size like a broker's): at most two answers alive, guesses
  used and checked, errors raised in the caller as the same object, close().

``read_range`` on the mock cluster: tests/integration/test_fetch_pipeline.py.
"""

from __future__ import annotations

import struct
import threading
import time
import zlib

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_ds.errors import KafkaError
from kafka_ds.protocol.errors import error_for_code
from kafka_ds.protocol.records import decode_records
from kafka_ds.protocol.records_encode import encode_record_batch
from kafka_ds.read.fetch_pipeline import FetchAhead, next_offset_from_headers

THREAD_PREFIX = "kafka_ds-fetch"


def batch(base, count, codec=0, size=20):
    return encode_record_batch(
        keys=pa.array([b"k%d" % i for i in range(count)]),
        values=pa.array([(b"v%d-" % (base + i)).ljust(size, b"x") for i in range(count)]),
        timestamps_ms=pa.array([1_700_000_000_000 + i for i in range(count)], pa.int64()),
        base_offset=base,
        compression=codec,
    )


def legacy_message(magic, offset, value):
    body = struct.pack(">bb", magic, 0)
    if magic == 1:
        body += struct.pack(">q", 1_700_000_000_000)
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def decoded_next(records, fetch_offset):
    return decode_records(records, topic="t", partition=0, fetch_offset=fetch_offset).next_offset


def fetch_threads():
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]


# --- the guess: next_offset_from_headers ----------------------------------------------------


def test_next_offset_golden():
    log = batch(100, 5) + batch(105, 3, codec=1) + batch(110, 1)  # a gap (compaction)
    assert next_offset_from_headers(log, 100) == 111
    assert next_offset_from_headers(log[:-1], 100) == 108  # last batch cut
    assert next_offset_from_headers(log[:10], 100) == 100  # not even a header
    assert next_offset_from_headers(b"", 7) == 7
    assert next_offset_from_headers(None, 7) == 7
    assert next_offset_from_headers(memoryview(bytearray(log)), 100) == 111
    legacy = legacy_message(0, 40, b"a") + legacy_message(1, 41, b"bb")
    assert next_offset_from_headers(legacy + batch(42, 2), 40) == 44
    assert decoded_next(legacy + batch(42, 2), 40) == 44
    # nonsense never raises: the decoder is the one that reports it
    assert next_offset_from_headers(b"\xff" * 64, 3) == 3


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 40), st.integers(0, 3), st.sampled_from([0, 1, 3])),
        min_size=1,
        max_size=6,
    ),
    st.integers(0, 10_000),
    st.integers(0, 100),
    st.floats(0, 1),
)
def test_next_offset_is_the_decoders(batches, base, fetch_skip, cut_at):
    parts, offset = [], base
    for count, gap, codec in batches:
        parts.append(batch(offset, count, codec))
        offset += count + gap
    log = b"".join(parts)
    cut = log[: int(len(log) * cut_at)]
    fetch_offset = base + min(fetch_skip, batches[0][0] - 1)  # inside the first batch
    assert next_offset_from_headers(cut, fetch_offset) == decoded_next(cut, fetch_offset)


# --- FetchAhead over a log in memory ------------------------------------------------------


class MemoryLog:
    """Fetch answers from real encoded batches, cut at ``fetch_bytes`` like a broker."""

    def __init__(self, batches):
        self.batches = []  # (base, next, bytes)
        for b in batches:
            result = decode_records(b, topic="t", partition=0, fetch_offset=0)
            self.batches.append((result.batch.column("offset")[0].as_py(), result.next_offset, b))
        self.end = self.batches[-1][1]
        self.fetched = []  # offsets fetched, in order
        self.lock = threading.Lock()

    def fetch(self, offset, fetch_bytes):
        with self.lock:
            self.fetched.append(offset)
        out = b""
        for _base, following, raw in self.batches:
            if following <= offset:
                continue
            if out and len(out) + len(raw) > fetch_bytes:
                out += raw[: len(raw) // 2]  # the last batch cut, as brokers send it
                break
            out += raw
        return {
            "error_code": 0,
            "records": out,
            "high_watermark": self.end,
            "last_stable_offset": self.end,
        }


def read_all(fa, start, end, fetch_bytes, pause=0.0):
    offsets, offset = [], start
    while offset < end:
        part = fa.get(offset, fetch_bytes)
        result = decode_records(part["records"], topic="t", partition=0, fetch_offset=offset)
        offsets += result.batch.column("offset").to_pylist()
        time.sleep(pause)
        offset = result.next_offset
    return offsets


def test_fetch_ahead_reads_everything_two_answers_at_most():
    log = MemoryLog([batch(i * 10, 10) for i in range(30)])
    gets = [0]
    violations = []
    started = [0]

    def fetch(offset, fetch_bytes):
        # Answers alive once this one arrives: this one plus those fetched before and not
        # given up by the caller (each get() gives up the answer before).
        alive = started[0] + 1 - max(gets[0] - 1, 0)
        started[0] += 1
        if alive > 2:
            violations.append((offset, alive))
        return log.fetch(offset, fetch_bytes)

    fa = FetchAhead(fetch, limit=log.end, name=f"{THREAD_PREFIX} unit")
    original_get = fa.get

    def counted_get(offset, fetch_bytes):
        gets[0] += 1
        return original_get(offset, fetch_bytes)

    fa.get = counted_get
    try:
        offsets = read_all(fa, 0, log.end, 1000, pause=0.003)  # a slow consumer
    finally:
        fa.close()
    assert offsets == list(range(300))
    assert violations == []
    assert fa.guessed_right == len(log.fetched) - 1 >= 10 and fa.guessed_wrong == 0
    assert log.fetched == sorted(set(log.fetched))  # each answer fetched once
    assert not fetch_threads()


def test_fetch_ahead_drops_a_wrong_guess_and_fetches_what_is_asked():
    log = MemoryLog([batch(i * 10, 10) for i in range(6)])
    fa = FetchAhead(log.fetch, limit=log.end, name=f"{THREAD_PREFIX} unit")
    try:
        first = fa.get(0, 100)  # one batch per answer: the thread guesses 10
        assert decoded_next(first["records"], 0) == 10
        time.sleep(0.05)
        second = fa.get(30, 100)  # the caller jumps (say, after data loss)
        assert decoded_next(second["records"], 30) == 40
        assert fa.guessed_wrong == 1
        third = fa.get(40, 100)
        assert decoded_next(third["records"], 40) == 50
    finally:
        fa.close()
    assert not fetch_threads()


def test_fetch_ahead_raises_the_threads_error_in_the_caller():
    log = MemoryLog([batch(i * 10, 10) for i in range(6)])
    failure = error_for_code(29)("Fetch t-0 at offset 20")

    def fetch(offset, fetch_bytes):
        if offset == 20:
            raise failure
        return log.fetch(offset, fetch_bytes)

    fa = FetchAhead(fetch, limit=log.end, name=f"{THREAD_PREFIX} unit")
    try:
        fa.get(0, 100)
        fa.get(10, 100)
        with pytest.raises(KafkaError) as raised:
            fa.get(20, 100)
        assert raised.value is failure
    finally:
        fa.close()
    assert not fetch_threads()


def test_fetch_ahead_no_thread_for_a_single_answer_and_none_past_the_limit():
    log = MemoryLog([batch(0, 10), batch(10, 10)])
    fa = FetchAhead(log.fetch, limit=10, name=f"{THREAD_PREFIX} unit")
    fa.get(0, 100)
    assert not fetch_threads() and log.fetched == [0]
    fa.close()
