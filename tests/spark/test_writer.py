"""df.write.format("pykafka") and writeStream on Apache Kafka.

The main dataset: 30k rows with keys, null keys, tombstones, headers (incl. empty and
null header values), explicit partitions and timestamps, written once per codec to a
fresh 6-partition topic, read back with confluent-kafka and with kafka-python and
compared byte for byte with the input (key, value, headers, partition, timestamp),
then read with format("pykafka") and compared with chispa to what confluent-kafka read.
Expected partitions come from ``java_murmur2`` (tests/unit/test_partitioner.py), not from
kafka_ds. The write path without Spark: tests/unit/test_writer.py and
tests/integration/test_writer.py.
"""

import datetime as dt
import os
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality

from kafka_ds.errors import ConfigurationError
from kafka_ds.options import parse_write_options
from kafka_ds.write.plan import plan_columns
from tests.integration.test_writer import batch_headers
from tests.support.brokers import consume_confluent, kafka_python_api_version
from tests.support.faultproxy import FaultProxy
from tests.support.spark_support import (
    make_spark,
    spark,  # noqa: F401  (fixture)
)
from tests.unit.test_partitioner import java_partition

# 30k rows: 2,500 a partition from each of the two tasks, several batches of more than
# 1,000 records each; 100k proved nothing more and cost the suite about a minute of CPU
# (five codecs, each read back by two clients and compared row by row).
N = 30_000
PARTITIONS = 6
BASE_TS = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

HEADERS_SQL = """CASE
  WHEN id % 3 = 0 THEN array(
    named_struct('key', 'trace', 'value', cast(cast(id AS string) AS binary)),
    named_struct('key', 'empty', 'value', X''),
    named_struct('key', 'nothing', 'value', cast(NULL AS binary)))
  WHEN id % 3 = 1 THEN filter(array(named_struct('key', 'x', 'value', X'')), h -> false)
END"""


# --- the 30k-row dataset --------------------------------------------------------------------


class Dataset:
    """The DataFrame and, per row, what a consumer must see."""

    def __init__(self, spark):
        self.df = spark.range(0, N, 1, 2).selectExpr(
            "id",  # not a Kafka column: ignored by the sink, as in Spark's Kafka sink
            "CASE WHEN id % 97 = 0 THEN cast(concat('tomb-', id) AS binary) "
            "     WHEN id % 10 = 0 THEN NULL "
            "     ELSE cast(concat('key-', id % 5000) AS binary) END AS key",
            "CASE WHEN id % 97 = 0 THEN NULL "
            "     ELSE cast(concat('v', id, '-', repeat('x', id % 40)) AS binary) END AS value",
            f"{HEADERS_SQL} AS headers",
            f"CASE WHEN id % 11 = 0 THEN cast(id % {PARTITIONS} AS int) END AS partition",
            f"CASE WHEN id % 13 = 0 THEN NULL ELSE timestamp_millis({BASE_TS} + id) END "
            "AS timestamp",
        )
        table = self.df.toArrow()
        self.rows = {}  # match id (value, or key of a tombstone) -> expectation
        for i, key, value, headers, partition, ts in zip(
            *(
                table.column(c).to_pylist()
                for c in ("id", "key", "value", "headers", "partition", "timestamp")
            ),
            strict=True,
        ):
            if partition is None and key is not None:
                partition = java_partition(key, PARTITIONS)
            self.rows[value if value is not None else key] = (
                i,
                key,
                value,
                [(h["key"], h["value"]) for h in headers or []],
                partition,
                None if ts is None else BASE_TS + i,
            )
        assert len(self.rows) == N

    def check(self, records, written_from_ms, written_to_ms, client):
        """records: (key, value, headers, partition, offset, timestamp_ms, create_time)."""
        assert len(records) == N, f"{client} read {len(records)} records, expected {N}"
        seen = set()
        last_id = {}  # (partition, task) -> id of the last record seen, offsets ascending
        for key, value, headers, partition, offset, ts, create_time in sorted(
            records, key=lambda r: (r[3], r[4])
        ):
            i, e_key, e_value, e_headers, e_partition, e_ts = self.rows[
                value if value is not None else key
            ]
            where = f"{client}: row {i} at {partition}/{offset}"
            assert i not in seen, f"{where} is a duplicate"
            seen.add(i)
            assert (key, value) == (e_key, e_value), where
            assert headers == e_headers, where
            if e_partition is not None:
                assert partition == e_partition, where
            assert create_time, where
            if e_ts is not None:
                assert ts == e_ts, where
            else:
                assert written_from_ms <= ts <= written_to_ms, where
            # each Spark task's rows keep their input order within a partition
            task = 0 if i < N // 2 else 1
            assert last_id.get((partition, task), -1) < i, where
            last_id[(partition, task)] = i


@pytest.fixture(scope="module")
def dataset(spark):
    return Dataset(spark)


def confluent_records(bootstrap, topic):
    return [
        (m.key, m.value, m.headers, m.partition, m.offset, m.timestamp[1], m.timestamp[0] == 1)
        for m in consume_confluent(bootstrap, topic, timeout=60)
    ]  # to the end: no extras


def kafka_python_records(bootstrap, topic, expected, timeout=60.0):
    from kafka import KafkaConsumer, TopicPartition

    servers = bootstrap.split(",")
    consumer = KafkaConsumer(
        bootstrap_servers=servers,
        enable_auto_commit=False,
        group_id=None,
        api_version=kafka_python_api_version(servers[0]),
    )
    try:
        partitions = [
            TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))
        ]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=expected).values():
                out.extend(
                    (
                        r.key,
                        r.value,
                        list(r.headers or []),
                        r.partition,
                        r.offset,
                        r.timestamp,
                        r.timestamp_type == 0,
                    )
                    for r in records
                )
        return out
    finally:
        consumer.close()


def writer(df, bootstrap, **options):
    w = df.write.format("pykafka").option("kafka.bootstrap.servers", bootstrap).mode("append")
    for key, value in options.items():
        w = w.option(key.replace("_", "."), value)
    return w


# --- the main round trip -----------------------------------------------------------------------


# Apache Kafka only: the mock adds nothing to what Kafka, which re-validates every
# compressed batch, checks here (and it cost the suite 51 s of a worker).
@pytest.mark.only_brokers("kafka")
@pytest.mark.parametrize("codec", CODECS)
def test_dataframe_round_trip_byte_exact(spark, dataset, broker, new_topic, codec):
    topic = new_topic(partitions=PARTITIONS)
    bootstrap = broker.bootstrap_servers
    started = int(time.time() * 1000)
    writer(dataset.df, bootstrap, topic=topic, kafka_compression_type=codec).save()
    finished = int(time.time() * 1000)

    confluent = confluent_records(bootstrap, topic)
    dataset.check(confluent, started, finished, "confluent-kafka")
    kafka_python = kafka_python_records(bootstrap, topic, N)
    dataset.check(kafka_python, started, finished, "kafka-python")
    assert sorted(kafka_python, key=lambda r: (r[3], r[4])) == sorted(
        confluent, key=lambda r: (r[3], r[4])
    )

    # the codec really is the one asked for, and batches are big (not one per record)
    for partition in range(PARTITIONS):
        batches = batch_headers(bootstrap, topic, partition)
        assert {attributes & 7 for _size, attributes, _count in batches} == {CODECS.index(codec)}
        assert max(count for _size, _attributes, count in batches) > 1000

    if codec == "lz4":  # one codec per broker: the Spark round trip
        reader = (
            spark.read.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("includeHeaders", "true")
        )
        actual = reader.load()
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
        expected = spark.createDataFrame(
            [
                (
                    key,
                    value,
                    topic,
                    partition,
                    offset,
                    epoch + dt.timedelta(milliseconds=ts),
                    0,
                    headers or None,
                )
                for key, value, headers, partition, offset, ts, _c in confluent
            ],
            actual.schema,
        )
        order = ["partition", "offset"]
        assert_df_equality(actual.orderBy(order), expected.orderBy(order), ignore_nullable=True)


def test_topic_column_string_columns_and_several_topics(spark, broker, new_topic):
    """Rows go to the topic of their row; string key/value are written as UTF-8."""
    topics = [new_topic(partitions=3), new_topic(partitions=2)]
    df = spark.range(0, 3000, 1, 2).selectExpr(
        f"CASE WHEN id % 2 = 0 THEN '{topics[0]}' ELSE '{topics[1]}' END AS TOPIC",
        "concat('ключ-', id % 50) AS key",
        "concat('значение ', id) AS value",
    )
    writer(df, broker.bootstrap_servers).save()
    for index, topic in enumerate(topics):
        msgs = consume_confluent(broker.bootstrap_servers, topic, timeout=30)
        assert len(msgs) == 1500
        ids = sorted(int(m.value.decode().split()[1]) for m in msgs)
        assert ids == list(range(index, 3000, 2))
        for m in msgs:
            i = int(m.value.decode().split()[1])
            assert m.key == f"ключ-{i % 50}".encode()
            assert m.partition == java_partition(m.key, 3 - index)


def test_topic_option_overrides_the_column(spark, broker, new_topic):
    topic = new_topic(partitions=1)
    df = spark.range(0, 10, 1, 1).selectExpr(
        "'no-such-topic' AS topic", "cast(id AS string) AS value"
    )
    writer(df, broker.bootstrap_servers, topic=topic).save()
    assert sorted(int(m.value) for m in consume_confluent(broker.bootstrap_servers, topic)) == list(
        range(10)
    )


# --- save modes, schema and options (Spark shows our messages) ---------------------------


def test_default_save_mode_and_overwrite_say_use_append(spark):
    df = spark.range(1).selectExpr("cast(id AS string) AS value")
    base = (
        df.write.format("pykafka")
        .option("kafka.bootstrap.servers", "127.0.0.1:9")
        .option("topic", "t")
    )
    # Spark refuses the default mode (ErrorIfExists) and Ignore itself, for every Python data
    # source, before the source is asked (docs/differences.md; the smoke set checks the
    # older releases); Spark's connector takes ErrorIfExists as Append.
    for mode in ("ErrorIfExists", "Ignore"):
        with pytest.raises(
            Exception,
            match=rf'UNSUPPORTED_DATA_SOURCE_SAVE_MODE.*cannot be written in the "{mode}" mode.*'
            r'"Append"',
        ):
            (base if mode == "ErrorIfExists" else base.mode(mode)).save()
    with pytest.raises(
        Exception,
        match=r"Save mode Overwrite is not supported by the pykafka "
        r"sink.*mode\(\"append\"\)",
    ):
        base.mode("overwrite").save()


def test_schema_errors_surface_before_any_task(spark):
    df = spark.range(1).selectExpr("id AS value")
    with pytest.raises(Exception, match=r"Column 'value' must be binary or string.*bigint.*cast"):
        writer(df, "127.0.0.1:9", topic="t").save()


def struct_type(ddl):
    # Spark parses a DDL string in its JVM: the session must run (getOrCreate, the one of
    # the spark fixture when a test already started it).
    make_spark()
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(ddl)


@pytest.mark.parametrize(
    "ddl,options,message",
    [
        ("key binary", {"topic": "t"}, r"needs a 'value' column.*columns are: key"),
        ("value int", {"topic": "t"}, r"Column 'value' must be binary or string.*int"),
        ("value binary, key array<int>", {"topic": "t"}, r"Column 'key' must be binary or string"),
        ("value binary", {}, r"set the option 'topic'.*or add a string 'topic' column"),
        ("value binary, topic binary", {}, r"Column 'topic' must be string.*binary"),
        (
            "value binary, partition bigint",
            {"topic": "t"},
            r"Column 'partition' must be int.*bigint",
        ),
        (
            "value binary, headers array<struct<key:string,value:string>>",
            {"topic": "t"},
            r"Column 'headers' must be array<struct<key:string,value:binary>>",
        ),
        ("value binary, headers map<string,binary>", {"topic": "t"}, r"Column 'headers' must be"),
        ("value binary, timestamp bigint", {"topic": "t"}, r"Column 'timestamp' must be timestamp"),
        ("value binary, VALUE string", {"topic": "t"}, r"two 'value' columns"),
    ],
)
def test_schema_validation(ddl, options, message):
    opts = parse_write_options({"kafka.bootstrap.servers": "h:1", **options})
    with pytest.raises(ConfigurationError, match=message):
        plan_columns(struct_type(ddl), opts)


def test_schema_validation_accepts_spark_kafka_sink_columns():
    opts = parse_write_options({"kafka.bootstrap.servers": "h:1"})
    plan = plan_columns(
        struct_type(
            "extra int, Key string, value binary, topic string, partition int, "
            "headers array<struct<key:string,value:binary>>, timestamp timestamp"
        ),
        opts,
    )
    assert (plan.key, plan.value, plan.topic, plan.partition, plan.headers, plan.timestamp) == (
        1,
        2,
        3,
        4,
        5,
        6,
    )
    # with the topic option, the topic column is not used (nor type-checked)
    opts = parse_write_options({"kafka.bootstrap.servers": "h:1", "topic": "t"})
    assert plan_columns(struct_type("value string, topic int"), opts).topic == -1


# --- errors in the data, naming topic / partition / row ------------------------------------


def test_missing_topic_is_created_as_the_java_producer_does(spark, broker):
    """Both test brokers create a topic named in a Metadata request with
    AllowAutoTopicCreation=true (tests/README.md), as Kafka brokers with
    auto.create.topics.enable do for Spark's format('kafka') sink."""
    topic = broker.unique_topic("auto")
    df = spark.range(20).selectExpr("cast(id AS string) AS value")
    writer(df, broker.bootstrap_servers, topic=topic).save()
    assert topic in broker.list_topics()
    got = consume_confluent(broker.bootstrap_servers, topic, expected=20)
    assert sorted(int(r.value) for r in got) == list(range(20))
    broker.delete_topic(topic)


def test_unknown_topic_option_fails_on_the_driver_without_auto_creation(spark, broker):
    df = spark.range(1).selectExpr("cast(id AS string) AS value")
    with pytest.raises(
        Exception,
        match=r"Topic 'no-such-topic-x' does not exist.*does not "
        r"create topics with 'kafka.allow.auto.create.topics'",
    ):
        writer(
            df,
            broker.bootstrap_servers,
            topic="no-such-topic-x",
            **{"kafka.allow.auto.create.topics": "false"},
        ).save()
    assert "no-such-topic-x" not in broker.list_topics()


def test_null_topic_value_fails_the_task_naming_the_row(spark, broker, new_topic):
    topic = new_topic()
    df = spark.range(0, 100, 1, 2).selectExpr(
        f"CASE WHEN id = 77 THEN NULL ELSE '{topic}' END AS topic", "cast(id AS string) AS value"
    )
    # rows 50..99 are Spark partition 1: id 77 is its row 27
    with pytest.raises(
        Exception,
        match=r"Column 'topic' is null at row 27 of Spark partition "
        r"1's input",
    ):
        writer(df, broker.bootstrap_servers).save()


@pytest.mark.only_brokers("kafka")  # kafka_ds's own check: the broker plays no part
def test_record_larger_than_the_request_limit_fails_the_write(spark, broker, new_topic):
    """A record that cannot fit 'kafka.max.request.size' (1 MiB by default) even alone: the
    write fails, naming topic, partition, size and the limit. (A broker's own limit:
    tests/integration/test_writer.py::test_a_record_the_broker_refuses_as_too_large_fails_the_write.)"""
    topic = new_topic(partitions=2)
    df = spark.range(0, 4, 1, 1).selectExpr(
        "CAST(id % 2 AS int) AS partition",
        "CASE WHEN id = 3 THEN repeat('x', 2 * 1024 * 1024) ELSE 'small' END AS value",
    )
    with pytest.raises(
        Exception,
        match=rf"record at row 3 of Spark partition 0's input for "
        rf"topic '{topic}' partition 1 is about 20972\d\d bytes, "
        r"more than 'kafka.max.request.size' \(1048576\)",
    ):
        writer(df, broker.bootstrap_servers, topic=topic).save()


# --- retries, idempotence, faults ----------------------------------------------------------


def test_lost_produce_answers_do_not_duplicate_rows(spark, broker, new_topic):
    topic = new_topic(partitions=3)
    df = spark.range(0, 20000, 1, 2).selectExpr(
        "cast(id AS string) AS key", "cast(id AS string) AS value"
    )
    with FaultProxy(broker.bootstrap_servers) as proxy:
        proxy.drop_produce_replies(count=2, skip=1)
        writer(df, proxy.bootstrap_servers, topic=topic, kafka_batch_size="16384").save()
        assert proxy.counters["dropped_produce_replies"] == 2
    values = [m.value for m in consume_confluent(broker.bootstrap_servers, topic, timeout=30)]
    assert sorted(values) == sorted(str(i).encode() for i in range(20000))


# --- streaming sink -------------------------------------------------------------------


@pytest.mark.smoke
def test_streaming_sink(spark, broker, new_topic):
    topic = new_topic(partitions=2)
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "in")
        os.makedirs(source)
        for part in range(3):
            ids = range(part * 500, (part + 1) * 500)
            pq.write_table(
                pa.table(
                    {
                        "key": pa.array([b"k%d" % (i % 9) for i in ids]),
                        "value": pa.array([b"row-%d" % i for i in ids]),
                        "timestamp": pa.array(
                            [BASE_TS + i for i in ids], pa.timestamp("ms", tz="UTC")
                        ),
                    }
                ),
                os.path.join(source, f"part-{part}.parquet"),
            )
        schema = spark.read.parquet(source).schema
        query = (
            spark.readStream.schema(schema)
            .option("maxFilesPerTrigger", 1)
            .parquet(source)
            .writeStream.format("pykafka")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("topic", topic)
            .option("checkpointLocation", os.path.join(tmp, "checkpoint"))
            .outputMode("append")
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120)
        assert query.exception() is None
        batches = [p["batchId"] for p in query.recentProgress if p["numInputRows"]]
        assert len(batches) == 3  # one micro-batch per file
    msgs = consume_confluent(broker.bootstrap_servers, topic, timeout=30)
    assert sorted(m.value for m in msgs) == sorted(b"row-%d" % i for i in range(1500))
    for m in msgs:
        i = int(m.value[4:])
        assert m.partition == java_partition(b"k%d" % (i % 9), 2)
        assert m.timestamp == (1, BASE_TS + i)
