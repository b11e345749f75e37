"""Drop-in parity with Spark's own Kafka source (issue 14), case by case: the cases that
need Spark (the partitions of a DataFrame, late binding of offsets, queries).

Expected values come from Spark's code and its test suites (KafkaOffsetRangeCalculatorSuite,
KafkaSourceProvider's messages, KafkaMicroBatchStream's AvailableNow checks). The
cases without Spark: tests/unit/test_parity.py and tests/integration/test_parity.py.
"""

import json

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from tests.integration.test_parity import options, produce, sizes, stream_reader
from tests.support.spark_support import spark  # noqa: F401  (fixture)

# --- 1. minPartitions: Spark's KafkaOffsetRangeCalculator, round half up -------------


def test_min_partitions_batch_and_stream_like_spark(spark, broker, new_topic):
    topic = new_topic(partitions=3)
    for partition, count in ((0, 10), (1, 10), (2, 1)):
        produce(broker, topic, partition, count)
    df = (
        spark.read.format("pykafka")
        .options(**options(broker, subscribe=topic, minPartitions="6"))
        .load()
    )
    assert df.rdd.getNumPartitions() == 7  # Spark: 3 + 3 + 1 (Python's round(): 5)
    assert df.count() == 21
    reader = stream_reader(broker, subscribe=topic, startingOffsets="earliest", minPartitions="6")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    got = sizes(reader.partitions(start, end))
    assert [(p, b - a) for _t, p, a, b in got] == [
        (0, 3),
        (0, 3),
        (0, 4),
        (1, 3),
        (1, 3),
        (1, 4),
        (2, 1),
    ]
    reader.stop()


# --- 2. late binding: offsets resolved when each scan runs -------------------------------


def test_every_action_reads_up_to_the_latest_offsets_of_its_time(spark, broker, new_topic):
    topic = new_topic(partitions=2)
    produce(broker, topic, 0, 3)  # partition 1 stays empty at planning

    def reader():  # DataFrameReader.option() changes the reader: a new one each time
        return spark.read.format("pykafka").options(**options(broker, subscribe=topic))

    df = reader().load()
    pinned = reader().option("endingOffsets", json.dumps({topic: {"0": 2, "1": -1}})).load()
    assert df.count() == 3
    assert pinned.count() == 2
    produce(broker, topic, 0, 2, start=3)
    produce(broker, topic, 1, 4)
    assert df.count() == 9  # the same DataFrame, a new execution
    assert sorted(r.offset for r in df.filter("partition = 1").collect()) == [0, 1, 2, 3]
    assert pinned.count() == 6  # 2 (explicit end) + 4 ("-1": latest)
    with_min = reader().option("minPartitions", "3").load()
    assert with_min.count() == 9
    produce(broker, topic, 0, 1, start=5)
    assert with_min.count() == 10


# --- 4. AvailableNow: an uncommitted batch re-runs with its recorded offsets -------------


def test_available_now_query_recovers_after_a_failed_batch(spark, broker, tmp_path):
    # The whole SPARK-53560 story through Spark: batch 0 fails, a new topic matching the
    # pattern appears, the restarted query re-runs batch 0 and then reads the new topic.
    stem = broker.unique_topic("crash")
    first, later = f"{stem}-a", f"{stem}-b"
    broker.create_topic(first, 1)
    seen, fail = [], [True]

    def sink(batch, _batch_id):
        if fail[0]:
            raise RuntimeError("sink down")
        seen.extend((r.topic, r.offset) for r in batch.select("topic", "offset").collect())

    def run():
        df = (
            spark.readStream.format("pykafka")
            .options(**options(broker, subscribePattern=f"{stem}-.*", startingOffsets="earliest"))
            .load()
        )
        query = (
            df.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(120), "AvailableNow query did not finish"
        except AssertionError:
            raise
        except Exception:  # noqa: BLE001 - the failed run; query.exception() has it
            pass
        return query

    try:
        produce(broker, first, 0, 3)
        assert run().exception() is not None
        broker.create_topic(later, 1)
        produce(broker, later, 0, 2)
        fail[0] = False
        query = run()
        assert query.exception() is None, query.exception()
        assert sorted(seen) == [(first, 0), (first, 1), (first, 2), (later, 0), (later, 1)]
    finally:
        broker.delete_topic(later)
        broker.delete_topic(first)


# --- 6. inconsistent offset JSON, rejected before any broker is asked ---------------------


def test_inconsistent_offsets_fail_even_for_a_missing_topic(spark, broker):
    missing = broker.unique_topic("missing")
    df = spark.read.format("pykafka").options(
        **options(
            broker,
            subscribe=missing,
            startingOffsets=json.dumps({missing: {"0": 9}}),
            endingOffsets=json.dumps({missing: {"0": 3}}),
        )
    )
    with pytest.raises(Exception, match="start offset 9 is greater than the end offset 3"):
        df.load().collect()


# --- 7. topic-level offsets (SPARK-58774) --------------------------------------------------


def test_topic_level_offsets_in_a_batch_read(spark, broker, new_topic):
    whole, part = new_topic(partitions=2), new_topic()
    produce(broker, whole, 0, 3)
    produce(broker, whole, 1, 2)
    produce(broker, part, 0, 5)
    df = (
        spark.read.format("pykafka")
        .options(
            **options(
                broker,
                subscribe=f"{whole},{part}",
                startingOffsets=json.dumps({whole: "earliest", part: {"0": 1}}),
                endingOffsets=json.dumps({whole: "latest", part: {"0": 4}}),
            )
        )
        .load()
    )
    got = sorted((r.topic == whole, r.partition, r.offset) for r in df.collect())
    assert got == (
        [(False, 0, o) for o in (1, 2, 3)]
        + [(True, 0, o) for o in range(3)]
        + [(True, 1, o) for o in range(2)]
    )


# --- 9. option errors of streams reach the user ---------------------------------------------


def test_batch_only_option_on_a_stream_fails_with_its_message(spark, mock_cluster, tmp_path):
    df = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", mock_cluster.bootstrap_servers)
        .option("subscribe", "x")
        .option("endingOffsets", "latest")
        .load()
    )
    query = (
        df.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception) as info:
        query.awaitTermination(120)
    text = str(info.value)
    assert "ending offset not valid in streaming queries" in text
    assert "UnboundLocalError" not in text


def test_update_output_mode_is_refused_by_spark_for_the_sink(spark, mock_cluster, tmp_path):
    # Pins an API limit listed in README's deviations: Spark refuses it before Python runs.
    counts = (
        spark.readStream.format("rate")
        .load()
        .groupBy("value")
        .count()
        .selectExpr("cast(value as string) as key", "cast(count as string) as value")
    )
    query = (
        counts.writeStream.format("pykafka")
        .option("kafka.bootstrap.servers", mock_cluster.bootstrap_servers)
        .option("topic", "never")
        .outputMode("update")
        .option("checkpointLocation", str(tmp_path))
        .start()
    )
    with pytest.raises(Exception, match="pykafka does not support Update mode"):
        query.awaitTermination(120)
