"""The streaming source and sink without a Spark query, on both brokers: the
``KafkaStreamReader`` called directly the way Spark's engine calls it (offset planning,
read limits, data-loss checks, group commits) and the sink's per-batch planning. The
queries themselves: tests/spark/test_stream.py.

Data is produced with ``batch.num.messages=1``: Tansu's ListOffsets LATEST is wrong
after a multi-record batch (tests/README.md, Tansu deviation 1).
"""

import time
import uuid

import pytest

from kafka_ds.errors import DataLossError
from kafka_ds.options import parse_read_options
from kafka_ds.read.group_commits import GroupCommitter
from kafka_ds.stream import KafkaStreamReader
from tests.support.brokers import produce_confluent

ONE_PER_BATCH = {"batch.num.messages": 1, "linger.ms": 0}
COLUMNS = ["key", "value", "topic", "partition", "offset"]


# --- helpers ------------------------------------------------------------------------


def group_offsets(broker, group, tps):
    """Committed offsets of ``group`` as an independent client sees them (confluent admin,
    OffsetFetch); partitions without a commit are left out."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in tps])
    future = broker.admin().list_consumer_group_offsets([request], request_timeout=10)[group]
    return {
        (tp.topic, tp.partition): tp.offset
        for tp in future.result().topic_partitions
        if tp.offset >= 0
    }


def produce(broker, topic, records, partition=None):
    """Produce; returns rows (key, value, topic, partition, offset)."""
    records = [r if isinstance(r, dict) else {"value": r} for r in records]
    placed = produce_confluent(
        broker.bootstrap_servers, topic, records, partition=partition, **ONE_PER_BATCH
    )
    return [
        (r.get("key"), r.get("value"), topic, p, o)
        for r, (p, o) in zip(records, placed, strict=True)
    ]


def numbered(prefix, count, partition=None):
    return [
        {
            "key": f"{prefix}{i}".encode(),
            "value": f"value {prefix}{i}".encode(),
            **({} if partition is None else {"partition": partition}),
        }
        for i in range(count)
    ]


def reader_for(broker, **options):
    """A KafkaStreamReader made the way the data source makes it, to call directly."""
    raw = {
        "kafka.bootstrap.servers": broker.bootstrap_servers,
        **{k: str(v) for k, v in options.items()},
    }
    return KafkaStreamReader(parse_read_options(raw, streaming=True), raw)


# --- the reader called directly (no Spark) ------------------------------------------------


def test_reader_offsets_are_stable_and_limited_like_spark(broker, new_topic):
    topic = new_topic(partitions=2, prefix="plan")
    produce(broker, topic, numbered("a", 8, partition=0) + numbered("b", 2, partition=1))
    reader = reader_for(broker, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=5)
    try:
        start = reader.initialOffset()
        assert start == {topic: {"0": 0, "1": 0}}
        assert reader.initialOffset() is start  # cached: Spark asks on every trigger
        limit = reader.getDefaultReadLimit()
        end = reader.latestOffset(start, limit)
        assert end == {topic: {"0": 4, "1": 1}}  # 5 * 8/10 = 4, 5 * 2/10 = 1
        assert reader.reportLatestOffset() == {topic: {"0": 8, "1": 2}}
        parts = reader.partitions(start, end)
        assert len(parts) == 1  # a small batch: one task reads both ranges
        assert [(p.partition, p.start, p.end) for p in parts[0].ranges] == [(0, 0, 4), (1, 0, 1)]
        assert reader.partitions(end, end) == []  # Spark's setLatestSeenOffset on restart
        end2 = reader.latestOffset(end, limit)
        end3 = reader.latestOffset(end2, limit)
        assert reader.latestOffset(end3, limit) == end3 == {topic: {"0": 8, "1": 2}}
    finally:
        reader.stop()


@pytest.mark.smoke
@pytest.mark.parametrize("small_batch_records", [0, 10000])
def test_reader_tasks_read_every_planned_record_in_partition_order(
    broker, new_topic, small_batch_records
):
    # One task per partition (0) or one task for the whole small batch: the same rows,
    # each partition's in offset order, read by a pickled copy as on an executor.
    import pickle

    topic = new_topic(partitions=3, prefix="tasks")
    expected = []
    for partition, count in ((0, 4), (1, 0), (2, 3)):
        expected += produce(broker, topic, numbered(f"p{partition}-", count), partition=partition)
    reader = reader_for(
        broker, subscribe=topic, startingOffsets="earliest", smallBatchRecords=small_batch_records
    )
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, None)
        tasks = reader.partitions(start, end)
        assert len(tasks) == (1 if small_batch_records else 2)
        executor = pickle.loads(pickle.dumps(reader))
        rows = []
        for task in pickle.loads(pickle.dumps(tasks)):
            for batch in executor.read(task):
                rows += [tuple(r[c] for c in COLUMNS) for r in batch.to_pylist()]
        # in the log's order: a producer retrying a new partition's first batches (seen on
        # Apache Kafka 3.9) may store them in another order than it was handed them
        assert rows == sorted(expected, key=lambda row: (row[3], row[4]))
    finally:
        reader.stop()


def test_reader_min_offsets_waits_until_max_trigger_delay(broker, new_topic):
    topic = new_topic(partitions=1, prefix="min")
    produce(broker, topic, numbered("a", 3), partition=0)
    reader = reader_for(
        broker,
        subscribe=topic,
        startingOffsets="earliest",
        minOffsetsPerTrigger=5,
        maxTriggerDelay="1s",
        idlePollIntervalMs="0",
    )
    try:
        start = reader.initialOffset()
        limit = reader.getDefaultReadLimit()
        assert reader.latestOffset(start, limit) == start  # 3 < 5: wait
        produce(broker, topic, numbered("b", 2), partition=0)
        assert reader.latestOffset(start, limit) == {topic: {"0": 5}}
        produce(broker, topic, numbered("c", 1), partition=0)
        end = {topic: {"0": 5}}
        assert reader.latestOffset(end, limit) == end
        time.sleep(1.1)  # maxTriggerDelay passed
        assert reader.latestOffset(end, limit) == {topic: {"0": 6}}
    finally:
        reader.stop()


def test_idle_reader_asks_the_brokers_at_most_every_idle_poll_interval(broker, new_topic):
    topic = new_topic(partitions=2, prefix="idle")
    produce(broker, topic, numbered("a", 3), partition=0)
    reader = reader_for(
        broker, subscribe=topic, startingOffsets="earliest", idlePollIntervalMs="400"
    )
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, None)
        assert end == {topic: {"0": 3, "1": 0}}
        asked = []
        original = reader.client.list_offsets
        reader.client.list_offsets = lambda *a, **k: asked.append(1) or original(*a, **k)
        assert reader.latestOffset(end, None) == end  # nothing new: brokers asked
        assert len(asked) == 1
        produce(broker, topic, numbered("b", 2), partition=1)
        for _ in range(20):  # Spark's ~10 ms idle loop
            assert reader.latestOffset(end, None) == end
        assert len(asked) == 1, "no request within idlePollIntervalMs"
        time.sleep(0.45)
        assert reader.latestOffset(end, None) == {topic: {"0": 3, "1": 2}}
        assert len(asked) == 2
    finally:
        reader.stop()


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_reader_data_loss_when_offsets_go_back_or_partitions_vanish(
    broker, new_topic, fail_on_data_loss
):
    topic = new_topic(partitions=2, prefix="loss")
    produce(broker, topic, numbered("a", 3, partition=0) + numbered("b", 3, partition=1))
    # Metadata max age 0: the partition count is looked up every trigger. (By default
    # it is reused for kafka.metadata.max.age.ms; Kafka then answers ListOffsets for a
    # vanished partition with UNKNOWN_TOPIC_OR_PARTITION and the reader refreshes, but
    # Tansu answers offset 0.)
    reader = reader_for(
        broker,
        subscribe=topic,
        startingOffsets="earliest",
        failOnDataLoss=str(fail_on_data_loss).lower(),
        **{"kafka.metadata.max.age.ms": "0"},
    )
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        assert end == {topic: {"0": 3, "1": 3}}
        # Re-created with one partition and fewer records: 0 went back, 1 is gone.
        broker.delete_topic(topic)
        broker.create_topic(topic, partitions=1)
        produce(broker, topic, numbered("c", 1), partition=0)
        later = reader.latestOffset(end, reader.getDefaultReadLimit())
        assert later == {topic: {"0": 1}}
        if fail_on_data_loss:
            with pytest.raises(DataLossError, match=rf"{topic}-1 are gone"):
                reader.partitions(end, later)
        else:
            assert reader.partitions(end, later) == []
        back = {topic: {"0": 3}}
        if fail_on_data_loss:
            with pytest.raises(DataLossError, match="went backwards from offset 3 to 1"):
                reader.partitions(back, later)
        else:
            assert reader.partitions(back, later) == []
    finally:
        reader.stop()


def test_reader_group_start_with_latest_fallback(broker, new_topic):
    topic = new_topic(partitions=2, prefix="fb")
    group = f"fb-{uuid.uuid4().hex[:8]}"
    produce(broker, topic, numbered("a", 4, partition=0) + numbered("b", 3, partition=1))
    first = reader_for(broker, subscribe=topic, **{"kafka.group.id": group})
    try:
        first._commit_to_group({topic: {"0": 2}})
        first.stop()  # flushes the commit
        assert group_offsets(broker, group, [(topic, 0), (topic, 1)]) == {(topic, 0): 2}
        reader = reader_for(
            broker,
            subscribe=topic,
            startingOffsets="group",
            startingOffsetsFallback="latest",
            **{"kafka.group.id": group},
        )
        start = reader.initialOffset()
        assert start == {topic: {"0": 2, "1": -1}}  # -1: latest, pinned by the first batch
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        assert end == {topic: {"0": 2, "1": 3}}
        # nothing to read: one empty task (it starts the read's Python worker early)
        tasks = reader.partitions(start, end)
        assert len(tasks) == 1 and not hasattr(tasks[0], "topic")
        produce(broker, topic, numbered("c", 1, partition=1))
        assert reader.latestOffset(end, reader.getDefaultReadLimit()) == {topic: {"0": 4, "1": 4}}
        reader.stop()
    finally:
        first.stop()


def test_group_commit_failures_are_retried_never_raised(mock_cluster, tmp_path):
    broker = mock_cluster
    topic = broker.unique_topic("cf")
    broker.create_topic(topic, partitions=1)
    group = f"cf-{uuid.uuid4().hex[:8]}"
    opts = parse_read_options(
        {"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic}, streaming=True
    )
    # OffsetCommit (API 8) answers GROUP_AUTHORIZATION_FAILED (30, not retriable) 3 times.
    broker.push_request_errors(8, 30, 30, 30)
    committer = GroupCommitter(opts, group, max_backoff_s=0.5)
    committer.submit({(topic, 0): 1})
    committer.submit({(topic, 0): 0})  # older: ignored
    assert committer.flush(20)
    assert committer.failures == 3
    assert group_offsets(broker, group, [(topic, 0)]) == {(topic, 0): 1}
    committer.close(1)
    broker.delete_topic(topic, wait=False)


def test_reader_latest_marker_of_a_missing_topic_does_not_hold_up_the_others(broker, new_topic):
    topic = new_topic(partitions=1, prefix="here")
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    reader = reader_for(broker, subscribe=f"{topic},{missing}", startingOffsets="earliest")
    try:
        produce(broker, topic, numbered("a", 2), partition=0)
        start = {missing: {"0": -1}, topic: {"0": 0}}
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        assert end == {missing: {"0": -1}, topic: {"0": 2}}
        assert [(p.topic, p.start, p.end) for p in reader.partitions(start, end)] == [(topic, 0, 2)]
    finally:
        reader.stop()


# --- the sink's per-batch planning -------------------------------------------------------


def test_stream_writer_checks_its_topic_once_within_metadata_max_age(broker, new_topic):
    # Spark makes the stream writer for every micro-batch (twice); the topic check is made
    # again only after kafka.metadata.max.age.ms. Batch writes always check.
    from pyspark.sql.types import BinaryType, StructField, StructType

    from kafka_ds.errors import ConfigurationError
    from kafka_ds.source import KafkaDataSource

    schema = StructType([StructField("value", BinaryType())])
    cached, uncached = new_topic(prefix="sink-a"), new_topic(prefix="sink-b")
    base = {
        "kafka.bootstrap.servers": broker.bootstrap_servers,
        "kafka.allow.auto.create.topics": "false",
    }
    for topic, age in ((cached, "300000"), (uncached, "0")):
        options = {**base, "topic": topic, "kafka.metadata.max.age.ms": age}
        assert KafkaDataSource(options).streamWriter(schema, False).opts.topic == topic
        broker.delete_topic(topic)
    assert (
        KafkaDataSource({**base, "topic": cached, "kafka.metadata.max.age.ms": "300000"})
        .streamWriter(schema, False)
        .opts.topic
        == cached
    )
    for topic, make in ((uncached, "streamWriter"), (cached, "writer")):
        source = KafkaDataSource(
            {
                **base,
                "topic": topic,
                "kafka.metadata.max.age.ms": "0" if topic == uncached else "300000",
            }
        )
        with pytest.raises(ConfigurationError, match="does not exist"):
            getattr(source, make)(schema, False)
