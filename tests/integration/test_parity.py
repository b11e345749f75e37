"""Drop-in parity with Spark's own Kafka source (issue 14), case by case: the cases on the
brokers without a Spark query. Streaming cases drive ``KafkaStreamReader`` the way Spark's
engine does (initialOffset, latestOffset, partitions).

Expected values come from Spark's code and its test suites (KafkaOffsetRangeCalculatorSuite,
KafkaSourceProvider's messages, KafkaMicroBatchStream's AvailableNow checks). The
cases without a broker: tests/unit/test_parity.py; in Spark: tests/spark/test_parity.py.
"""

import json

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from kafka_ds.errors import CorruptRecordError, DataLossError, KafkaError
from kafka_ds.options import parse_read_options
from kafka_ds.read.ranges import OffsetRange, read_range
from kafka_ds.read.stream_offsets import from_offset_dict
from kafka_ds.stream import KafkaStreamReader
from tests.support.brokers import produce_confluent
from tests.unit.test_parity import NANOS

ONE_PER_BATCH = {"batch.num.messages": 1}  # Tansu's ListOffsets (tests/README.md)


def produce(broker, topic, partition, count, start=0, **extra):
    records = [{"value": f"{partition}-{i}".encode(), **extra} for i in range(start, start + count)]
    return produce_confluent(
        broker.bootstrap_servers, topic, records, partition=partition, **ONE_PER_BATCH
    )


def options(broker, **extra):
    return {"kafka.bootstrap.servers": broker.bootstrap_servers, **extra}


def stream_reader(broker, **extra):
    opts = options(broker, **extra)
    return KafkaStreamReader(parse_read_options(opts, streaming=True), opts)


def sizes(partitions):
    return [(p.topic, p.partition, p.start, p.end) for p in partitions]


# --- 3. malformed record timestamps (SPARK-56243) ----------------------------------------


def test_malformed_timestamp_fails_the_read(broker, new_topic):
    # Kafka 4 refuses timestamps more than an hour ahead (message.timestamp.after.max.ms);
    # a topic that allows them, or an older broker, stores nanoseconds as given
    topic = new_topic(config={"message.timestamp.after.max.ms": str(2**63 - 1)})
    produce_confluent(
        broker.bootstrap_servers,
        topic,
        [
            {"value": b"ok", "timestamp_ms": 1_700_000_000_000},
            {"value": b"bad", "timestamp_ms": NANOS},
        ],
        partition=0,
        **ONE_PER_BATCH,
    )
    opts = parse_read_options(options(broker, subscribe=topic), streaming=False)
    with pytest.raises(
        CorruptRecordError, match=rf"{topic}.*partition 0 at offset 1: raw value {NANOS}"
    ):
        list(read_range(opts, OffsetRange(topic, 0, 0, 2)))
    assert sum(b.num_rows for b in read_range(opts, OffsetRange(topic, 0, 0, 1))) == 1


# --- 4. AvailableNow: an uncommitted batch re-runs with its recorded offsets -------------


def test_available_now_reruns_the_uncommitted_batch_after_a_new_partition(broker):
    stem = broker.unique_topic("an")
    first, later = f"{stem}-a", f"{stem}-b"
    broker.create_topic(first, 1)
    try:
        produce(broker, first, 0, 3)
        run1 = stream_reader(broker, subscribePattern=f"{stem}-.*", startingOffsets="earliest")
        run1.prepareForTriggerAvailableNow()
        start = run1.initialOffset()
        end = run1.latestOffset(start, ReadAllAvailable())
        assert sizes(run1.partitions(start, end)) == [(first, 0, 0, 3)]
        run1.stop()  # the batch failed; not in the commit log
        broker.create_topic(later, 1)
        produce(broker, later, 0, 2)
        run2 = stream_reader(broker, subscribePattern=f"{stem}-.*", startingOffsets="earliest")
        run2.prepareForTriggerAvailableNow()
        # Spark re-runs batch 0 from its offset log without asking latestOffset first; its
        # start comes from initialOffset() again and now names the new topic too.
        restart = run2.initialOffset()
        assert set(from_offset_dict(restart)) == {(first, 0), (later, 0)}
        assert sizes(run2.partitions(restart, end)) == [(first, 0, 0, 3)]
        end2 = run2.latestOffset(end, ReadAllAvailable())
        assert sizes(run2.partitions(end, end2)) == [(later, 0, 0, 2)]
        assert run2.latestOffset(end2, ReadAllAvailable()) == end2
        run2.stop()
    finally:
        broker.delete_topic(later)
        broker.delete_topic(first)


# --- 5. no partitions left: keep the previous offsets (SPARK-41375) -----------------------


def test_deleting_the_only_topic_keeps_the_previous_offsets(broker, new_topic):
    topic = new_topic()
    produce(broker, topic, 0, 2)
    reader = stream_reader(broker, subscribe=topic, startingOffsets="earliest")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {topic: {"0": 2}}
    broker.delete_topic(topic)
    assert reader.latestOffset(end, ReadAllAvailable()) == end
    assert reader.reportLatestOffset() is None
    reader.stop()


# --- 7. topic-level offsets (SPARK-58774) --------------------------------------------------


def test_topic_level_latest_for_a_topic_matched_later(broker):
    stem = broker.unique_topic("tl")
    first, tail, whole = f"{stem}-a", f"{stem}-tail", f"{stem}-whole"
    broker.create_topic(first, 1)
    try:
        produce(broker, first, 0, 2)
        reader = stream_reader(
            broker,
            subscribePattern=f"{stem}-.*",
            startingOffsets=json.dumps({first: "earliest", tail: "latest"}),
        )
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        assert sizes(reader.partitions(start, end)) == [(first, 0, 0, 2)]
        for topic in (tail, whole):  # both appear later, with 3 records each
            broker.create_topic(topic, 1)
            produce(broker, topic, 0, 3)
        end2 = reader.latestOffset(end, ReadAllAvailable())
        # "latest" for the tail topic: its old records are skipped; the other one from earliest.
        assert sizes(reader.partitions(end, end2)) == [(whole, 0, 0, 3)]
        produce(broker, tail, 0, 1, start=3)
        end3 = reader.latestOffset(end2, ReadAllAvailable())
        assert sizes(reader.partitions(end2, end3)) == [(tail, 0, 3, 4)]
        reader.stop()
    finally:
        for topic in (first, tail, whole):
            broker.delete_topic(topic)


# --- 8. AvailableNow end checks ------------------------------------------------------------


def _available_now_run(broker, topic):
    reader = stream_reader(
        broker, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="1"
    )
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(1))
    assert sum(p.end - p.start for p in reader.partitions(start, end)) == 1
    return reader, end


def test_available_now_fails_when_planned_partitions_are_lost(broker):
    topic = broker.unique_topic("lost")
    broker.create_topic(topic, 2)  # partition 1 never holds data
    try:
        produce(broker, topic, 0, 3)
        reader, end = _available_now_run(broker, topic)
        broker.delete_topic(topic)
        broker.create_topic(topic, 1)  # partition 1 is gone, 0 went back
        nxt = reader.latestOffset(end, ReadMaxRows(1))
        with pytest.raises(
            DataLossError,
            match=rf"have been lost during running query with "
            rf"Trigger.AvailableNow: {topic}-1\.",
        ):
            reader.partitions(end, nxt)
        reader.stop()
    finally:
        broker.delete_topic(topic)


def test_available_now_fails_when_offsets_go_back(broker):
    topic = broker.unique_topic("back")
    broker.create_topic(topic, 2)
    try:
        produce(broker, topic, 0, 3)
        reader, end = _available_now_run(broker, topic)
        broker.delete_topic(topic)
        broker.create_topic(topic, 2)  # same partitions, all empty again
        nxt = reader.latestOffset(end, ReadMaxRows(1))
        with pytest.raises(
            DataLossError,
            match=rf"available offset which is less than end "
            rf"offset .*Trigger.AvailableNow: {topic}-0\.",
        ):
            reader.partitions(end, nxt)
        reader.stop()
    finally:
        broker.delete_topic(topic)


# --- 10. Spark's key words in our messages ---------------------------------------------------


def test_specific_offsets_not_matching_assigned_partitions_use_sparks_words(broker, new_topic):
    topic = new_topic(partitions=2)
    opts = parse_read_options(
        options(broker, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 0}})),
        streaming=False,
    )
    from kafka_ds.reader import KafkaBatchReader

    with pytest.raises(
        KafkaError,
        match="Partitions specified for Kafka start offsets don't match what are assigned",
    ):
        KafkaBatchReader(opts).partitions()
