"""The pipelined fetch of ``read_range`` (kafka_ds/read/fetch_pipeline.py).

* ``next_offset_from_headers`` (the guess of the next Fetch offset) against the
  decoder's own ``next_offset``: golden cases and a hypothesis property over real
  encoded batches cut anywhere;
* :class:`FetchAhead` over a partition log held in memory (real encoded batches, a
  Fetch cut at the fetch size like a broker's): at most two answers alive, guesses
  used and checked, errors raised in the caller as the same object, close();
* ``read_range`` on the mock cluster through the fault proxy: many Fetches per task
  give exactly the produced rows with every guess right; a generator closed early
  (a Fetch under way, stalled by the proxy, or not) leaves no thread and no open
  connection, and returns at once; a broker error mid-stream is raised in the consumer
  with its type and message.
"""
from __future__ import annotations

import logging
import struct
import threading
import time
import uuid
import zlib

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_ds.client import KafkaClient
from kafka_ds.read.fetch_pipeline import FetchAhead, next_offset_from_headers
from kafka_ds.options import parse_read_options
from kafka_ds.errors import KafkaError
from kafka_ds.protocol.errors import error_for_code
from kafka_ds.protocol.records import decode_records
from kafka_ds.protocol.records_encode import encode_record_batch
from kafka_ds.read.ranges import OffsetRange, read_range
from tests.support.brokers import produce_confluent
from tests.support.faultproxy import FaultProxy

FETCH = 1
THREAD_PREFIX = "kafka_ds-fetch"


def batch(base, count, codec=0, size=20):
    return encode_record_batch(
        keys=pa.array([b"k%d" % i for i in range(count)]),
        values=pa.array([(b"v%d-" % (base + i)).ljust(size, b"x") for i in range(count)]),
        timestamps_ms=pa.array([1_700_000_000_000 + i for i in range(count)], pa.int64()),
        base_offset=base, compression=codec)


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
    log = batch(100, 5) + batch(105, 3, codec=1) + batch(110, 1)   # a gap (compaction)
    assert next_offset_from_headers(log, 100) == 111
    assert next_offset_from_headers(log[:-1], 100) == 108          # last batch cut
    assert next_offset_from_headers(log[:10], 100) == 100          # not even a header
    assert next_offset_from_headers(b"", 7) == 7
    assert next_offset_from_headers(None, 7) == 7
    assert next_offset_from_headers(memoryview(bytearray(log)), 100) == 111
    legacy = legacy_message(0, 40, b"a") + legacy_message(1, 41, b"bb")
    assert next_offset_from_headers(legacy + batch(42, 2), 40) == 44
    assert decoded_next(legacy + batch(42, 2), 40) == 44
    # nonsense never raises: the decoder is the one that reports it
    assert next_offset_from_headers(b"\xff" * 64, 3) == 3


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(0, 3), st.sampled_from([0, 1, 3])),
                min_size=1, max_size=6),
       st.integers(0, 10_000), st.integers(0, 100), st.floats(0, 1))
def test_next_offset_is_the_decoders(batches, base, fetch_skip, cut_at):
    parts, offset = [], base
    for count, gap, codec in batches:
        parts.append(batch(offset, count, codec))
        offset += count + gap
    log = b"".join(parts)
    cut = log[:int(len(log) * cut_at)]
    fetch_offset = base + min(fetch_skip, batches[0][0] - 1)   # inside the first batch
    assert next_offset_from_headers(cut, fetch_offset) == decoded_next(cut, fetch_offset)


# --- FetchAhead over a log in memory ------------------------------------------------------

class MemoryLog:
    """Fetch answers from real encoded batches, cut at ``fetch_bytes`` like a broker."""

    def __init__(self, batches):
        self.batches = []          # (base, next, bytes)
        for b in batches:
            result = decode_records(b, topic="t", partition=0, fetch_offset=0)
            self.batches.append((result.batch.column("offset")[0].as_py(), result.next_offset, b))
        self.end = self.batches[-1][1]
        self.fetched = []          # offsets fetched, in order
        self.lock = threading.Lock()

    def fetch(self, offset, fetch_bytes):
        with self.lock:
            self.fetched.append(offset)
        out = b""
        for base, following, raw in self.batches:
            if following <= offset:
                continue
            if out and len(out) + len(raw) > fetch_bytes:
                out += raw[:len(raw) // 2]      # the last batch cut, as brokers send it
                break
            out += raw
        return {"error_code": 0, "records": out, "high_watermark": self.end,
                "last_stable_offset": self.end}


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
        offsets = read_all(fa, 0, log.end, 1000, pause=0.003)   # a slow consumer
    finally:
        fa.close()
    assert offsets == list(range(300))
    assert violations == []
    assert fa.guessed_right == len(log.fetched) - 1 >= 10 and fa.guessed_wrong == 0
    assert log.fetched == sorted(set(log.fetched))          # each answer fetched once
    assert not fetch_threads()


def test_fetch_ahead_drops_a_wrong_guess_and_fetches_what_is_asked():
    log = MemoryLog([batch(i * 10, 10) for i in range(6)])
    fa = FetchAhead(log.fetch, limit=log.end, name=f"{THREAD_PREFIX} unit")
    try:
        first = fa.get(0, 100)                  # one batch per answer: the thread guesses 10
        assert decoded_next(first["records"], 0) == 10
        time.sleep(0.05)
        second = fa.get(30, 100)                # the caller jumps (say, after data loss)
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


# --- read_range on the mock cluster ---------------------------------------------------------

PER_PARTITION = 600


@pytest.fixture(scope="module")
def filled(mock_cluster):
    """One partition of PER_PARTITION records, 20 per batch."""
    topic = f"fp{uuid.uuid4().hex[:8]}"
    mock_cluster.create_topic(topic, partitions=1)
    values = [b"value-%04d" % i for i in range(PER_PARTITION)]
    produce_confluent(mock_cluster.bootstrap_servers, topic, [{"value": v} for v in values],
                      partition=0, **{"batch.num.messages": 20, "linger.ms": 50})
    return topic, values


def options(bootstrap, topic, **extra):
    return parse_read_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                               "kafka.max.partition.fetch.bytes": "2048", **extra},
                              streaming=False)


def test_read_range_many_fetches_every_guess_right(mock_cluster, filled, caplog):
    topic, values = filled
    opts = options(mock_cluster.bootstrap_servers, topic)
    seen_thread = False
    got = []
    with caplog.at_level(logging.DEBUG, logger="kafka_ds.read.ranges"):
        for b in read_range(opts, OffsetRange(topic, 0, 5, PER_PARTITION - 7)):
            seen_thread = seen_thread or bool(fetch_threads())
            assert b.column("topic").to_pylist() == [topic] * b.num_rows
            assert b.column("partition").to_pylist() == [0] * b.num_rows
            got += b.column("value").to_pylist()
    assert got == values[5:PER_PARTITION - 7]
    assert seen_thread and not fetch_threads()
    (summary,) = [r.getMessage() for r in caplog.records if "fetched ahead" in r.getMessage()]
    right, wrong = (int(x) for x in summary.split(":")[-1].split("/"))
    assert right >= 10 and wrong == 0, summary


def proxy_pairs_closed(proxy, timeout=3.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(pair.closed for pair in proxy.pairs):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("stalled", [True, False], ids=["fetch-under-way", "thread-idle"])
@pytest.mark.parametrize("own_client", [True, False], ids=["own-client", "given-client"])
def test_closing_the_generator_early_stops_the_thread_and_the_connection(
        mock_cluster, filled, stalled, own_client):
    topic, values = filled
    with FaultProxy(mock_cluster.bootstrap_servers) as proxy:
        if stalled:
            # The first Fetch answer passes; the next (the thread's) is held for 20 s.
            proxy.inject(FETCH, "stall", 1, seconds=0.0)
            proxy.inject(FETCH, "stall", 1, seconds=20.0)
        opts = options(proxy.bootstrap_servers, topic)
        client = None if own_client else KafkaClient(proxy.bootstrap_servers, opts.client)
        try:
            reader = read_range(opts, OffsetRange(topic, 0, 0, PER_PARTITION), client)
            first = next(reader)
            assert first.column("value").to_pylist() == values[:first.num_rows]
            deadline = time.monotonic() + 5
            while proxy.by_api[FETCH] < 2 and time.monotonic() < deadline:
                time.sleep(0.01)          # the thread's Fetch is on its way
            if not stalled:
                time.sleep(0.2)           # ... and answered: the thread waits for the caller
            started = time.monotonic()
            reader.close()                # Spark stops consuming (limit reached, task killed)
            assert time.monotonic() - started < 2.0
            assert not fetch_threads()
            if own_client:
                assert proxy_pairs_closed(proxy)     # the broker side saw the sockets close
            else:
                # The interrupted connection is closed; an idle one stays usable.
                for conn in client._connections.values():
                    assert conn.in_flight == 0
                    if stalled and conn.connected:
                        assert conn.node_id != client.leader_for(topic, 0)
                assert sum(1 for b in read_range(opts, OffsetRange(topic, 0, 0, 40), client)
                           for _ in range(b.num_rows)) == 40
        finally:
            if client is not None:
                client.close()
    assert not fetch_threads()


def test_a_broker_error_mid_stream_is_raised_in_the_consumer(mock_cluster, filled):
    topic, values = filled
    opts = options(mock_cluster.bootstrap_servers, topic)
    client = KafkaClient(mock_cluster.bootstrap_servers, opts.client)
    try:
        client.leader_for(topic, 0)
        # The first Fetch is answered, the second (the thread's) fails: not retriable.
        mock_cluster.push_request_errors(FETCH, 0, 29)     # TOPIC_AUTHORIZATION_FAILED
        reader = read_range(opts, OffsetRange(topic, 0, 0, PER_PARTITION), client)
        first = next(reader)
        with pytest.raises(error_for_code(29), match=rf"\(Fetch {topic}-0 at offset "
                                                      rf"{first.num_rows}\)$"):
            for _ in reader:
                pass
    finally:
        client.close()
    assert not fetch_threads()


def test_retriable_errors_of_the_thread_are_retried(mock_cluster, filled):
    topic, values = filled
    opts = options(mock_cluster.bootstrap_servers, topic,
                   **{"kafka.retry.backoff.max.ms": "50"})
    client = KafkaClient(mock_cluster.bootstrap_servers, opts.client)
    try:
        client.leader_for(topic, 0)
        mock_cluster.push_request_errors(FETCH, 0, 6, 6, 7)   # NOT_LEADER x2, TIMED_OUT
        got = [v for b in read_range(opts, OffsetRange(topic, 0, 0, PER_PARTITION), client)
               for v in b.column("value").to_pylist()]
        assert got == values
        assert client.retries >= 3
    finally:
        client.close()
