"""What only a real broker can prove, on Apache Kafka itself (the ``kafka_broker`` fixture),
without Spark: the broker's transaction timeout ending a stream's zombie transaction, the
aborted-transactions index read by ``read_committed``, compacted topics written in
transactions, and the group commit of an AvailableNow run's last batch through a slow
coordinator (a fault proxy holding OffsetCommit answers). The same data read by Spark
queries: tests/spark/test_apache_kafka.py.

The reference is confluent-kafka's ``read_committed`` consumer; the raw log is judged by
``txlog.verdict`` (a transactional batch counts only when its producer's next marker in
that partition is a COMMIT). Neither Tansu nor the librdkafka mock sends the Fetch
aborted-transactions list, aborts a timed-out transaction or compacts a log
(tests/README.md, deviations), so none of this can run there.
"""

import re
import time
import uuid

import pyarrow as pa
import pytest

from kafka_ds.client import KafkaClient
from kafka_ds.client.reads import LATEST, READ_COMMITTED
from kafka_ds.client.transactions import TransactionError
from kafka_ds.write.exactly_once import check_open, stream_prefix, transactional_id
from kafka_ds.write.plan import ColumnPlan
from kafka_ds.write.task import write_batches
from tests.integration.test_transactions import read_committed_both
from tests.support.brokers import produce_confluent
from tests.support.txlog import nothing_open, read_log, verdict, verdict_when
from tests.unit.test_transactions import eos_options

ABORT, COMMIT = 0, 1


# --- helpers (tests/spark/test_apache_kafka.py uses them too) --------------------------------


@pytest.fixture
def kafka_topics(kafka_broker):
    """Factory ``kafka_topics(prefix, partitions=1, config=None) -> name`` on Apache Kafka;
    the topics are deleted after the test."""
    made = []

    def make(prefix, partitions=1, config=None):
        name = kafka_broker.unique_topic(prefix)
        kafka_broker.create_topic(name, partitions, config=config)
        made.append(name)
        return name

    yield make
    for name in made:
        try:
            kafka_broker.delete_topic(name, wait=False)
        except Exception:
            pass


def wait_until(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def stable_and_high(bootstrap, tp):
    """(last stable offset, high watermark) of a partition: ListOffsets LATEST with
    read_committed and with read_uncommitted."""
    with KafkaClient(bootstrap) as client:
        stable = client.list_offsets({tp: LATEST}, READ_COMMITTED)[tp][0]
        high = client.list_offsets({tp: LATEST})[tp][0]
    return stable, high


def confluent_watermarks(bootstrap, tp, isolation):
    """The high offset confluent-kafka's consumer reports with that isolation level
    (librdkafka asks ListOffsets with its isolation level: read_committed gives the LSO)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"wm-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "log_level": 3,
        }
    )
    try:
        return consumer.get_watermark_offsets(TopicPartition(*tp), timeout=10, cached=False)[1]
    finally:
        consumer.close()


def interleaved_transactions(bootstrap, topic, partitions=3, rounds=3):
    """Three confluent-kafka transactional producers whose transactions overlap in every
    partition (one record each in turn, flushed, so their batches interleave in the log),
    with non-transactional records in between; in each round some commit and some abort,
    and the last round's last transaction aborts. Returns (values a read_committed reader
    must see, values it must not), as sets."""
    from confluent_kafka import Producer

    base = {"bootstrap.servers": bootstrap, "linger.ms": 0, "log_level": 3}
    producers = [Producer({**base, "transactional.id": f"{topic}-tx{i}"}) for i in range(3)]
    plain = Producer({**base, "enable.idempotence": True})
    for producer in producers:
        producer.init_transactions(30)
    visible, hidden = set(), set()
    for r in range(rounds):
        outcomes = [(r + i) % 2 == 0 for i in range(3)]  # True: commit
        if r == rounds - 1:
            outcomes[-1] = False
        for producer in producers:
            producer.begin_transaction()
        for k in range(2):
            for i, producer in enumerate(producers):
                for p in range(partitions):
                    value = f"r{r}-tx{i}-p{p}-{k}".encode()
                    producer.produce(topic, value=value, partition=p)
                    (visible if outcomes[i] else hidden).add(value)
                assert producer.flush(30) == 0
            for p in range(partitions):
                value = f"r{r}-plain-p{p}-{k}".encode()
                plain.produce(topic, value=value, partition=p)
                visible.add(value)
            assert plain.flush(30) == 0
        for commit, producer in zip(outcomes, producers, strict=True):
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
    return visible, hidden


# The broker cleans a log within a second (log.cleaner.backoff.ms=500 in the test broker) once
# a segment rolled (after segment.ms) and any part of it is dirty; tombstones and transaction
# markers stay a day (delete.retention.ms), so the state is stable once cleaned.
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": "1000",
    "delete.retention.ms": "86400000",
}


def write_compacted(bootstrap, topic):
    """Keys written over in committed transactions, overwrites in an aborted one, tombstones
    (null values) committed, plain records between, in partitions 0 and 1; then, after
    segment.ms, a record that rolls the segment so the cleaner may compact all of it.
    Returns {partition: {key: value}}, what a compacted partition ends with (a tombstone's
    value None)."""
    from confluent_kafka import Producer

    base = {"bootstrap.servers": bootstrap, "linger.ms": 0, "log_level": 3}
    txn = Producer({**base, "transactional.id": f"{topic}-tx"})
    other = Producer({**base, "transactional.id": f"{topic}-other"})
    plain = Producer({**base, "enable.idempotence": True})
    txn.init_transactions(30)
    other.init_transactions(30)
    final = {0: {}, 1: {}}

    def send(producer, key, value, partition):
        producer.produce(topic, key=key, value=value, partition=partition)
        assert producer.flush(30) == 0
        if producer is not other:
            final[partition][key] = value

    for version in range(3):
        txn.begin_transaction()
        other.begin_transaction()
        for partition in (0, 1):
            for k in range(4):
                key = f"k{partition}-{k}".encode()
                send(txn, key, f"v{version}-{key.decode()}".encode(), partition)
                send(other, key, f"aborted{version}-{key.decode()}".encode(), partition)
            send(plain, f"plain{partition}-{version}".encode(), b"p", partition)
        txn.commit_transaction(30)
        other.abort_transaction(30)
        time.sleep(0.15)  # segment.ms: the next batch starts a new segment
    txn.begin_transaction()
    for partition in (0, 1):
        for k in (1, 2):  # tombstones
            send(txn, f"k{partition}-{k}".encode(), None, partition)
    txn.commit_transaction(30)
    time.sleep(0.15)
    for partition in (0, 1):
        send(plain, b"roll", b"last", partition)  # rolls the segment holding the rest
    return final


def wait_compacted(bootstrap, topic, final, timeout=60.0):
    """Until the cleaner has compacted both partitions completely: the raw log's records
    are exactly the last value of each key (tombstones kept), no overwritten or aborted
    record left. Returns the raw batches."""
    from collections import Counter

    def cleaned():
        batches = read_log(bootstrap, topic)
        for partition, last in final.items():
            values = Counter(
                v
                for b in batches
                if b.partition == partition and b.control is None
                for v in b.values
            )
            if values != Counter(last.values()):
                return None
        return batches

    return wait_until(cleaned, timeout, f"the log cleaner to compact {topic}")


# --- transactions ------------------------------------------------------------------------------


@pytest.mark.waits
def test_a_streams_zombie_transaction_is_aborted_by_the_transaction_timeout(
    kafka_broker, kafka_topics, tmp_path
):
    """docs/exactly_once.md: a stream's task whose transaction its driver never ends (the
    driver died, or the task began after its micro-batch's abort) is a zombie until the
    query restarts -- or until ``kafka.transaction.timeout.ms``, when the broker aborts it.
    The write task here is kafka_ds's own (write_batches with a streaming query's
    transactional id), its transaction left open as a dead driver leaves it."""
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topics("zombie")
    tp = (topic, 0)
    timeout_ms = 8000
    produce_confluent(bs, topic, [b"before-0", b"before-1"], partition=0)
    opts = eos_options(
        bs,
        topic=topic,
        checkpointLocation=str(tmp_path / "ck"),
        **{"kafka.transaction.timeout.ms": str(timeout_ms)},
    )
    txn_id = transactional_id(stream_prefix(opts), 0)
    values = [b"zombie-%d" % i for i in range(5)]
    table = pa.table({"value": pa.array(values)})
    begun = time.monotonic()
    message = write_batches(
        opts, ColumnPlan(value=0), table.to_batches(), task=0, transactional_id=txn_id
    )
    assert message.transactional_id == txn_id and message.records == 5
    produce_confluent(bs, topic, [b"after-0", b"after-1"], partition=0)

    # Open: read_committed readers stop at its first record (offset 2), below the 9 written.
    assert stable_and_high(bs, tp) == (2, 9), "the transaction was not open after the write"
    assert confluent_watermarks(bs, tp, "read_committed") == 2
    assert verdict(bs, topic).open == values

    # The broker aborts it (an ABORT marker: the high watermark moves to 10).
    wait_until(
        lambda: stable_and_high(bs, tp) == (10, 10),
        40,
        "the broker to abort the timed-out transaction",
    )
    ended = time.monotonic() - begun
    assert ended >= timeout_ms / 1000 - 0.5, f"aborted after {ended:.1f} s, before its timeout"
    result = verdict_when(bs, topic, nothing_open)
    assert result.open == [] and result.aborted == values
    assert result.committed == [b"before-0", b"before-1", b"after-0", b"after-1"]
    assert [types for (_p, pid), types in result.markers.items()] == [[ABORT]]
    assert confluent_watermarks(bs, tp, "read_committed") == 10
    ours, theirs = read_committed_both(bs, topic)
    assert (
        ours
        == theirs
        == [(0, 0, b"before-0"), (0, 1, b"before-1"), (0, 7, b"after-0"), (0, 8, b"after-1")]
    )
    # The driver, were it to come back, finds it ended before committing anything.
    with KafkaClient(bs) as client, pytest.raises(TransactionError, match=txn_id):
        check_open(client, opts, [message])


def test_read_committed_skips_aborted_transactions_interleaved(kafka_broker, kafka_topics):
    """Several producers' committed and aborted transactions overlapping in three
    partitions, with plain records between: kafka_ds's batch read (planned to the last
    stable offsets, read by the executors' read_range) returns exactly what confluent-kafka's
    read_committed consumer returns, offsets included, and that is every committed or plain
    record and no aborted one (the Spark reads: tests/spark/test_apache_kafka.py)."""
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topics("rc", partitions=3)
    visible, hidden = interleaved_transactions(bs, topic)
    ours, theirs = read_committed_both(bs, topic)
    assert {value for _p, _o, value in theirs} == visible  # the reference itself
    assert len(theirs) == len(visible)
    assert ours == theirs
    raw = verdict_when(bs, topic, nothing_open)
    assert set(raw.aborted) == hidden and raw.open == []


# --- compacted topics --------------------------------------------------------------------------


def test_compacted_topic_written_in_transactions_reads_as_confluent_does(
    kafka_broker, kafka_topics
):
    """After the cleaner ran (the first offsets, the overwritten records and the aborted
    transaction's records gone; markers and tombstones kept): kafka_ds's read_committed
    batch read returns what confluent-kafka's does, offsets and null values included."""
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topics("compact", partitions=2, config=COMPACTED)
    final = write_compacted(bs, topic)
    batches = wait_compacted(bs, topic, final)
    assert any(b.control is not None for b in batches), "no transaction marker left"
    ours, theirs = read_committed_both(bs, topic)
    assert ours == theirs
    assert None in {value for _p, _o, value in ours}  # tombstones, as nulls
    # offset gaps: fewer records left than offsets below the end
    assert len(ours) < max(o for _p, o, _v in ours)
    values = [v for _p, _o, v in ours]
    assert sorted(values, key=repr) == sorted(
        [v for last in final.values() for v in last.values()], key=repr
    )


# --- group commits at the end of an AvailableNow run ------------------------------------------

OFFSET_COMMIT = 8


def run_available_now_reader(reader):
    """Call the reader as Spark's engine calls it in a Trigger.AvailableNow run, up to the
    ``latestOffset`` answer that ends the run; returns the last batch's end."""
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    limit = reader.getDefaultReadLimit()
    for _ in range(100):
        end = reader.latestOffset(start, limit)
        if end == start:
            return end
        reader.partitions(start, end)
        start = end
    raise AssertionError("the AvailableNow run did not end")


@pytest.mark.waits
def test_available_now_end_waits_for_the_group_commit_of_its_last_batch(
    kafka_broker, kafka_topics, caplog
):
    """Every OffsetCommit answer held 1 s by a fault proxy (a slow coordinator): when the
    reader gives the answer that ends an AvailableNow run, the group already holds the end
    of the last batch (no waiting afterwards: a driver may exit right then). When the
    coordinator does not answer at all, that answer still comes, after
    ``kafka.request.timeout.ms`` at most, with a warning naming the offsets not committed.
    The same in a Spark driver that exits at once:
    tests/spark/test_apache_kafka.py::test_available_now_group_ends_at_the_last_batch_when_the_driver_exits_at_once."""
    from tests.integration.test_stream import group_offsets, reader_for
    from tests.support.faultproxy import FaultProxy

    bs = kafka_broker.bootstrap_servers
    topic = kafka_topics("avnend", partitions=2)
    for p in (0, 1):
        produce_confluent(bs, topic, [b"v%d" % i for i in range(10)], partition=p)
    ends = {(topic, 0): 10, (topic, 1): 10}
    with FaultProxy(bs) as proxy:
        proxy.inject(OFFSET_COMMIT, "stall", count=1000, seconds=1.0)
        group = f"avnend-{uuid.uuid4().hex[:8]}"
        reader = reader_for(
            proxy_broker(proxy),
            subscribe=topic,
            startingOffsets="earliest",
            maxOffsetsPerTrigger=4,
            **{"kafka.group.id": group},
        )
        try:
            assert run_available_now_reader(reader) == {topic: {"0": 10, "1": 10}}
            assert group_offsets(kafka_broker, group, list(ends)) == ends
            assert proxy.injected["stall"] >= 2
        finally:
            reader.stop()

        proxy.clear_faults()
        proxy.inject(OFFSET_COMMIT, "hold", count=1000)
        group = f"avnhold-{uuid.uuid4().hex[:8]}"
        reader = reader_for(
            proxy_broker(proxy),
            subscribe=topic,
            startingOffsets="earliest",
            **{"kafka.group.id": group, "kafka.request.timeout.ms": 1500},
        )
        try:
            with caplog.at_level("WARNING", logger="kafka_ds.stream"):
                assert run_available_now_reader(reader) == {topic: {"0": 10, "1": 10}}
            assert proxy.wait_held(0)
            assert re.search(
                rf"the AvailableNow run ended with the offsets .*{topic}.* of "
                rf"group '{group}' not committed yet",
                caplog.text,
            ), caplog.text
        finally:
            reader.stop()


def proxy_broker(proxy):
    """What reader_for needs of a broker: its bootstrap servers (here the proxy's)."""

    class Through:
        bootstrap_servers = proxy.bootstrap_servers

    return Through()
