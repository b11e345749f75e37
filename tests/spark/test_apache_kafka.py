"""What only a real broker can prove, read by Spark queries on Apache Kafka itself (the
``kafka_broker`` fixture): ``read_committed`` batch reads and streams over interleaved
committed and aborted transactions, compacted topics written in transactions, records
deleted (DeleteRecords) and partitions added (CreatePartitions) under a running stream,
a subscribed topic deleted under one, and an AvailableNow query's consumer group when its
driver exits right after the query (tests/support/stream_child.py, heavy). The reference is
confluent-kafka's consumer; the client-level checks of the same data:
tests/integration/test_apache_kafka.py.
"""

import re
import uuid

import pytest
from chispa import assert_df_equality

from tests.integration.test_apache_kafka import (
    COMPACTED,
    interleaved_transactions,
    kafka_topics,
    wait_compacted,
    write_compacted,
)
from tests.spark.test_stream import check_records_removed_under_a_running_query, wait_for
from tests.support.brokers import consume_confluent, produce_confluent
from tests.support.spark_support import spark  # noqa: F401  (fixture)

__all__ = ["kafka_topics"]  # fixture, imported for the tests below

ROW = "key binary, value binary, partition int, offset long"
COLUMNS = ["key", "value", "partition", "offset"]


def reference(spark, bootstrap, topic, **conf):
    """confluent-kafka's reading of the whole topic as a DataFrame of ROW."""
    rows = [
        (m.key, m.value, m.partition, m.offset)
        for m in consume_confluent(bootstrap, topic, timeout=60, **conf)
    ]
    return spark.createDataFrame(rows, ROW), rows


def source(spark, stream, bootstrap, **options):
    reader = (spark.readStream if stream else spark.read).format("pykafka")
    reader = reader.option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def available_now(df, checkpoint, timeout=180):
    """Every micro-batch's rows of an AvailableNow run, and the query."""
    rows = []

    def collect(batch, _batch_id):
        rows.extend(tuple(r) for r in batch.select(*COLUMNS).collect())

    query = (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(timeout), "AvailableNow query did not finish"
    assert query.exception() is None, query.exception()
    return query, rows


def assert_same(spark, actual_rows_or_df, expected_df):
    actual = actual_rows_or_df
    if isinstance(actual, list):
        actual = spark.createDataFrame(actual, ROW)
    order = ["partition", "offset"]
    assert_df_equality(
        actual.select(*COLUMNS).orderBy(order), expected_df.orderBy(order), ignore_nullable=True
    )


# --- transactions --------------------------------------------------------------------------


def test_read_committed_batch_and_stream_skip_aborted_transactions(
    spark, kafka_broker, kafka_topics, tmp_path
):
    """Interleaved committed and aborted transactions of three producers in three
    partitions: the batch read and every micro-batch of a stream (5 offsets per trigger, so
    batches end inside transactions and at markers) return exactly confluent-kafka's
    read_committed rows: no aborted record, none twice."""
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topics("rcspark", partitions=3)
    visible, hidden = interleaved_transactions(bs, topic)
    expected, rows = reference(spark, bs, topic, **{"isolation.level": "read_committed"})
    assert {value for _k, value, _p, _o in rows} == visible and len(rows) == len(visible)
    options = {
        "subscribe": topic,
        "startingOffsets": "earliest",
        "kafka.isolation.level": "read_committed",
    }
    assert_same(spark, source(spark, False, bs, **options), expected)
    query, streamed = available_now(
        source(spark, True, bs, maxOffsetsPerTrigger=5, **options), tmp_path / "ck"
    )
    assert len([p for p in query.recentProgress if p["numInputRows"]]) > 3
    assert not {value for _k, value, _p, _o in streamed} & hidden
    assert_same(spark, streamed, expected)


# --- compacted topics ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compacted_topic(kafka_broker):
    """A compacted topic written in transactions (markers among the records, aborted
    overwrites, tombstones), once the cleaner has compacted it completely (offset gaps);
    shared by the tests of this module, which only read it."""
    name = kafka_broker.unique_topic("cmpspark")
    kafka_broker.create_topic(name, 2, config=COMPACTED)
    wait_compacted(
        kafka_broker.bootstrap_servers, name, write_compacted(kafka_broker.bootstrap_servers, name)
    )
    yield name
    kafka_broker.delete_topic(name, wait=False)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_compacted_topic_batch_and_stream_read_what_confluent_reads(
    spark, kafka_broker, compacted_topic, tmp_path, isolation
):
    """A compacted topic written in transactions, read once the cleaner has left offset
    gaps: the batch read and a stream of 8 offsets per trigger with failOnDataLoss=true
    return confluent-kafka's rows, tombstones as null values: neither gaps nor markers are
    taken for data loss."""
    bs, topic = kafka_broker.bootstrap_servers, compacted_topic
    expected, rows = reference(spark, bs, topic, **{"isolation.level": isolation})
    assert any(value is None for _k, value, _p, _o in rows)
    assert len(rows) < max(o for *_x, o in rows)  # gaps below the end
    options = {
        "subscribe": topic,
        "startingOffsets": "earliest",
        "failOnDataLoss": "true",
        "kafka.isolation.level": isolation,
    }
    assert_same(spark, source(spark, False, bs, **options), expected)
    query, streamed = available_now(
        source(spark, True, bs, maxOffsetsPerTrigger=8, **options), tmp_path / "ck"
    )
    assert len([p for p in query.recentProgress if p["numInputRows"]]) > 3
    assert_same(spark, streamed, expected)


# --- records deleted under a running stream ----------------------------------------------------


def numbered(prefix, count):
    return [
        {"key": f"{prefix}{i}".encode(), "value": f"value {prefix}{i}".encode()}
        for i in range(count)
    ]


def delete_records(kafka_broker, topic, partition, before):
    from confluent_kafka import TopicPartition

    futures = kafka_broker.admin().delete_records(
        [TopicPartition(topic, partition, before)], request_timeout=30
    )
    for future in futures.values():
        assert future.result(30).low_watermark == before  # the new log start offset


def set_retention_ms(kafka_broker, topic, retention_ms):
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(
                "retention.ms",
                str(retention_ms),
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    for future in kafka_broker.admin().incremental_alter_configs([resource]).values():
        future.result(30)


def expire_by_retention(kafka_broker, topic, partition, end):
    """Time retention of 1 ms until the broker's retention check (every second in the test
    broker) has deleted every record before ``end``, then no time retention again."""
    from confluent_kafka import Consumer, TopicPartition

    set_retention_ms(kafka_broker, topic, 1)
    consumer = Consumer(
        {"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "wm", "log_level": 3}
    )
    try:
        wait_for(
            lambda: consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)[0] >= end,
            60,
            what=f"retention to delete {topic}-{partition} up to {end}",
        )
    finally:
        consumer.close()
        set_retention_ms(kafka_broker, topic, -1)


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
@pytest.mark.parametrize("deleted_by", ["DeleteRecords", "retention"])
def test_delete_records_under_a_running_stream(
    spark, kafka_broker, kafka_topics, tmp_path, fail_on_data_loss, deleted_by
):
    """While the first micro-batch (offsets 0-4) holds, DeleteRecords moves the log start
    to 8 (or time retention deletes all 10 records), past the stream's position (5), and 3
    more records are written (10-12): failOnDataLoss=true fails naming the offsets lost,
    false goes on from the new log start
    (tests/spark/test_stream.py::check_records_removed_under_a_running_query)."""
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topics("delrec")
    produce_confluent(bs, topic, numbered("s", 10), partition=0)
    earliest = 8 if deleted_by == "DeleteRecords" else 10

    def remove():
        if deleted_by == "DeleteRecords":
            delete_records(kafka_broker, topic, 0, earliest)
        else:
            expire_by_retention(kafka_broker, topic, 0, earliest)
        produce_confluent(bs, topic, numbered("t", 3), partition=0)  # offsets 10-12

    check_records_removed_under_a_running_query(
        spark,
        bs,
        topic,
        tmp_path,
        fail_on_data_loss,
        remove,
        lost_until=earliest,
        earliest=earliest,
        last=12,
    )


# --- partitions added, topics deleted -----------------------------------------------------------


@pytest.mark.parametrize("subscription", ["subscribe", "subscribePattern"])
def test_partitions_added_under_a_running_stream_are_read_from_earliest(
    spark, kafka_broker, kafka_topics, subscription
):
    """CreatePartitions on a subscribed topic while its query runs: records written to the
    new partitions before the query saw them are read too, from offset 0 (Spark's connector
    reads new partitions from earliest), at a following trigger."""
    from confluent_kafka.admin import NewPartitions

    bs = kafka_broker.bootstrap_servers
    topic = kafka_topics("grow")
    rows = [
        (k, v, 0, o)
        for (k, v), (_p, o) in zip(
            [(r["key"], r["value"]) for r in numbered("a", 3)],
            produce_confluent(bs, topic, numbered("a", 3), partition=0),
            strict=True,
        )
    ]
    name = f"grow{uuid.uuid4().hex[:8]}"
    what = topic if subscription == "subscribe" else re.escape(topic) + "$"
    query = (
        source(spark, True, bs, startingOffsets="earliest", **{subscription: what})
        .select(*COLUMNS)
        .writeStream.format("memory")
        .queryName(name)
        .start()
    )
    try:
        query.processAllAvailable()
        for future in (
            kafka_broker.admin()
            .create_partitions([NewPartitions(topic, 3)], request_timeout=30)
            .values()
        ):
            future.result(30)
        wait_for(
            lambda: len(kafka_broker.topic_metadata(topic) or {}) == 3, 30, what="3 partitions"
        )
        for p in (1, 2, 0):
            records = numbered(f"p{p}-", 2)
            placed = produce_confluent(bs, topic, records, partition=p)
            rows += [
                (r["key"], r["value"], p, o) for r, (_p, o) in zip(records, placed, strict=True)
            ]
        wait_for(
            lambda: spark.table(name).count() >= len(rows), 90, what="the new partitions' records"
        )
        assert query.exception() is None
        assert_same(spark, spark.table(name), spark.createDataFrame(rows, ROW))
    finally:
        query.stop()


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_subscribed_topic_deleted_under_a_running_stream(
    spark, kafka_broker, kafka_topics, fail_on_data_loss
):
    """One of two subscribed topics is deleted while the query runs: failOnDataLoss=true
    fails the query naming the deleted topic's partition; false reads on from the other."""
    from pyspark.errors import StreamingQueryException

    bs = kafka_broker.bootstrap_servers
    kept, gone = kafka_topics("kept"), kafka_topics("gone")
    produce_confluent(bs, kept, numbered("k", 2), partition=0)
    produce_confluent(bs, gone, numbered("g", 2), partition=0)
    name = f"del{uuid.uuid4().hex[:8]}"
    query = (
        source(
            spark,
            True,
            bs,
            subscribe=f"{kept},{gone}",
            startingOffsets="earliest",
            failOnDataLoss=str(fail_on_data_loss).lower(),
        )
        .select("topic", *COLUMNS)
        .writeStream.format("memory")
        .queryName(name)
        .start()
    )
    try:
        query.processAllAvailable()
        assert spark.table(name).count() == 4
        kafka_broker.delete_topic(gone)
        produce_confluent(bs, kept, numbered("k-later", 3), partition=0)
        if fail_on_data_loss:
            with pytest.raises(StreamingQueryException) as failure:
                query.awaitTermination(120)
            assert re.search(rf"DataLossError: Partitions {gone}-0 are gone", str(failure.value)), (
                failure.value
            )
        else:
            wait_for(lambda: spark.table(name).count() == 7, 90, what="the kept topic's records")
            assert query.exception() is None
            assert {r.topic for r in spark.table(name).where("offset >= 2").collect()} == {kept}
    finally:
        query.stop()


# --- group commits under load -------------------------------------------------------------------

OFFSET_COMMIT = 8


@pytest.mark.heavy
def test_available_now_group_ends_at_the_last_batch_when_the_driver_exits_at_once(
    kafka_broker, kafka_topics, tmp_path
):
    """An AvailableNow query with ``kafka.group.id`` in a driver process of its own
    (tests/support/stream_child.py), through a fault proxy that holds every OffsetCommit
    answer 2 s (the commit reaches the broker, its answer comes late: a slow coordinator):
    the driver's Python process exits as soon as the query has ended, and its whole process
    group is SIGKILLed then (nothing of the driver outlives its script). The group must hold
    the end of the last batch: the reader waits, bounded, for its last commit before it lets
    the run end."""
    import json
    import os
    import signal
    import subprocess
    import sys

    from tests.integration.test_stream import group_offsets
    from tests.support import PROJECT_ROOT
    from tests.support.faultproxy import FaultProxy

    bs = kafka_broker.bootstrap_servers
    topic = kafka_topics("gexit", partitions=2)
    for p in (0, 1):
        produce_confluent(bs, topic, numbered(f"p{p}-", 12), partition=p)
    ends = {(topic, 0): 12, (topic, 1): 12}
    group = f"gexit-{uuid.uuid4().hex[:8]}"
    with FaultProxy(bs) as proxy:
        proxy.inject(OFFSET_COMMIT, "stall", count=1000, seconds=2.0)
        options = {
            "kafka.bootstrap.servers": proxy.bootstrap_servers,
            "subscribe": topic,
            "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": "6",
            "kafka.group.id": group,
        }
        spec = {
            "options": options,
            "sink": str(tmp_path / "sink"),
            "checkpoint": str(tmp_path / "ck"),
            "available_now": True,
        }
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        log_path = tmp_path / "child.log"
        with open(log_path, "wb") as log:
            child = subprocess.Popen(
                [sys.executable, "-m", "tests.support.stream_child", json.dumps(spec)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                cwd=PROJECT_ROOT,
            )
        try:
            child.wait(240)
        finally:
            try:  # the driver's JVM, its Python workers: whatever outlived the script
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            child.wait(30)
        output = log_path.read_text()
        assert child.returncode == 0, output[-3000:]
        done = [line for line in output.splitlines() if line.startswith("DONE ")]
        assert done and json.loads(done[0][5:]) == {topic: {"0": 12, "1": 12}}, output[-3000:]
        assert proxy.injected["stall"] >= 2, "the commits did not go through the proxy"
    assert group_offsets(kafka_broker, group, list(ends)) == ends
