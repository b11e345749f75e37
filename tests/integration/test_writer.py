"""df.write.format("pykafka") and writeStream on both brokers.

The main dataset: 100k rows with keys, null keys, tombstones, headers (incl. empty and
null header values), explicit partitions and timestamps, written once per codec to a
fresh 6-partition topic, read back with confluent-kafka and with kafka-python and
compared byte for byte with the input (key, value, headers, partition, timestamp),
then read with format("pykafka") and compared with chispa to what confluent-kafka read.
Expected partitions come from ``java_murmur2`` (test_partitioner.py), not from
kafka_ds.

Faults a broker cannot be made to show on demand go through ``faultproxy.FaultProxy``
(real sockets, between the writer and the broker) or the mock cluster's error
injection.
"""
import collections
import datetime as dt
import os
import struct
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality

from kafka_ds.client import KafkaClient
from kafka_ds.client.producer import ProduceError
from kafka_ds.options import parse_write_options
from kafka_ds.protocol import messages as m
from kafka_ds.errors import ConfigurationError
from kafka_ds.protocol.records_encode import encode_record_batch
from kafka_ds.write.plan import ColumnPlan, plan_columns
from kafka_ds.write.task import KafkaCommitMessage, TaskWriter, WriteSummary, write_batches
from tests.support.brokers import consume_confluent, kafka_python_api_version
from tests.support.faultproxy import FaultProxy
from tests.support.spark_support import spark  # noqa: F401  (fixture)
from tests.unit.test_partitioner import java_partition

N = 100_000
PARTITIONS = 6
BASE_TS = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PRODUCE = 0

HEADERS_SQL = """CASE
  WHEN id % 3 = 0 THEN array(
    named_struct('key', 'trace', 'value', cast(cast(id AS string) AS binary)),
    named_struct('key', 'empty', 'value', X''),
    named_struct('key', 'nothing', 'value', cast(NULL AS binary)))
  WHEN id % 3 = 1 THEN filter(array(named_struct('key', 'x', 'value', X'')), h -> false)
END"""


def quirk(request, broker, names, reason):
    """Strict xfail for the named brokers only (tests/README.md documents each)."""
    if broker.name in names:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"{broker.name}: {reason}"))


# --- the 100k-row dataset ------------------------------------------------------------------

class Dataset:
    """The DataFrame and, per row, what a consumer must see."""

    def __init__(self, spark):
        self.df = spark.range(0, N, 1, 2).selectExpr(
            "id",   # not a Kafka column: ignored by the sink, as in Spark's Kafka sink
            "CASE WHEN id % 97 = 0 THEN cast(concat('tomb-', id) AS binary) "
            "     WHEN id % 10 = 0 THEN NULL "
            "     ELSE cast(concat('key-', id % 5000) AS binary) END AS key",
            "CASE WHEN id % 97 = 0 THEN NULL "
            "     ELSE cast(concat('v', id, '-', repeat('x', id % 40)) AS binary) END AS value",
            f"{HEADERS_SQL} AS headers",
            f"CASE WHEN id % 11 = 0 THEN cast(id % {PARTITIONS} AS int) END AS partition",
            f"CASE WHEN id % 13 = 0 THEN NULL ELSE timestamp_millis({BASE_TS} + id) END "
            "AS timestamp")
        table = self.df.toArrow()
        self.rows = {}   # match id (value, or key of a tombstone) -> expectation
        for i, key, value, headers, partition, ts in zip(
                *(table.column(c).to_pylist() for c in
                  ("id", "key", "value", "headers", "partition", "timestamp"))):
            if partition is None and key is not None:
                partition = java_partition(key, PARTITIONS)
            self.rows[value if value is not None else key] = (
                i, key, value, [(h["key"], h["value"]) for h in headers or []], partition,
                None if ts is None else BASE_TS + i)
        assert len(self.rows) == N

    def check(self, records, written_from_ms, written_to_ms, client):
        """records: (key, value, headers, partition, offset, timestamp_ms, create_time)."""
        assert len(records) == N, f"{client} read {len(records)} records, expected {N}"
        seen = set()
        last_id = {}   # (partition, task) -> id of the last record seen, offsets ascending
        for key, value, headers, partition, offset, ts, create_time in sorted(
                records, key=lambda r: (r[3], r[4])):
            i, e_key, e_value, e_headers, e_partition, e_ts = self.rows[value if value is not None else key]
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
    return [(m.key, m.value, m.headers, m.partition, m.offset, m.timestamp[1], m.timestamp[0] == 1)
            for m in consume_confluent(bootstrap, topic, timeout=60)]   # to the end: no extras


def kafka_python_records(bootstrap, topic, expected, timeout=60.0):
    from kafka import KafkaConsumer, TopicPartition

    servers = bootstrap.split(",")
    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False,
                             group_id=None, api_version=kafka_python_api_version(servers[0]))
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500, max_records=expected).values():
                out.extend((r.key, r.value, list(r.headers or []), r.partition, r.offset,
                            r.timestamp, r.timestamp_type == 0) for r in records)
        return out
    finally:
        consumer.close()


def batch_headers(bootstrap, topic, partition):
    """(size in bytes, attributes, record count) of every record batch of a partition,
    read raw with Fetch (one batch per answer on the mock, so loop)."""
    client = KafkaClient(bootstrap)
    try:
        out, offset = [], 0
        while True:
            part = client.fetch(topic, partition, offset, max_bytes=8 << 20, max_wait_ms=50)
            data = part["records"] or b""
            pos = 0
            got = False
            while pos + 61 <= len(data):
                base_offset, length = struct.unpack_from(">qi", data, pos)
                if pos + 12 + length > len(data):
                    break
                attributes = struct.unpack_from(">h", data, pos + 21)[0]
                count = struct.unpack_from(">i", data, pos + 57)[0]
                if base_offset >= offset:
                    out.append((12 + length, attributes, count))
                    offset = base_offset + count
                    got = True
                pos += 12 + length
            if not got:
                return out
    finally:
        client.close()


def writer(df, bootstrap, **options):
    w = df.write.format("pykafka").option("kafka.bootstrap.servers", bootstrap).mode("append")
    for key, value in options.items():
        w = w.option(key.replace("_", "."), value)
    return w


# --- the main round trip -----------------------------------------------------------------------

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
    assert sorted(kafka_python, key=lambda r: (r[3], r[4])) == \
        sorted(confluent, key=lambda r: (r[3], r[4]))

    # the codec really is the one asked for, and batches are big (not one per record)
    for partition in range(PARTITIONS):
        batches = batch_headers(bootstrap, topic, partition)
        assert {attributes & 7 for _size, attributes, _count in batches} == {CODECS.index(codec)}
        assert max(count for _size, _attributes, count in batches) > 1000

    if codec == "lz4":   # one codec per broker: the Spark round trip
        reader = (spark.read.format("pykafka").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).option("includeHeaders", "true"))
        if broker.name == "tansu":
            # Tansu's ListOffsets LATEST is wrong after multi-record batches (README,
            # Tansu deviation 1); the reader can take the high watermark from Fetch.
            reader = reader.option("latestOffsetsVia", "fetch")
        actual = reader.load()
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
        expected = spark.createDataFrame(
            [(key, value, topic, partition, offset, epoch + dt.timedelta(milliseconds=ts), 0,
              headers or None)
             for key, value, headers, partition, offset, ts, _c in confluent],
            actual.schema)
        order = ["partition", "offset"]
        assert_df_equality(actual.orderBy(order), expected.orderBy(order), ignore_nullable=True)


def test_topic_column_string_columns_and_several_topics(spark, broker, new_topic):
    """Rows go to the topic of their row; string key/value are written as UTF-8."""
    topics = [new_topic(partitions=3), new_topic(partitions=2)]
    df = spark.range(0, 3000, 1, 2).selectExpr(
        f"CASE WHEN id % 2 = 0 THEN '{topics[0]}' ELSE '{topics[1]}' END AS TOPIC",
        "concat('ключ-', id % 50) AS key", "concat('значение ', id) AS value")
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
    df = spark.range(0, 10, 1, 1).selectExpr("'no-such-topic' AS topic",
                                             "cast(id AS string) AS value")
    writer(df, broker.bootstrap_servers, topic=topic).save()
    assert sorted(int(m.value) for m in consume_confluent(broker.bootstrap_servers, topic)) == \
        list(range(10))


# --- save modes, schema and options (Spark shows our messages) ---------------------------

def test_default_save_mode_and_overwrite_say_use_append(spark):
    df = spark.range(1).selectExpr("cast(id AS string) AS value")
    base = df.write.format("pykafka").option("kafka.bootstrap.servers", "127.0.0.1:9") \
        .option("topic", "t")
    # Spark refuses the default mode (ErrorIfExists) itself, before the source is asked.
    with pytest.raises(Exception, match=r'cannot be written in the "ErrorIfExists" mode.*'
                                        r'"Append"'):
        base.save()
    with pytest.raises(Exception, match=r"Save mode Overwrite is not supported by the pykafka "
                                        r"sink.*mode\(\"append\"\)"):
        base.mode("overwrite").save()


def test_schema_errors_surface_before_any_task(spark):
    df = spark.range(1).selectExpr("id AS value")
    with pytest.raises(Exception, match=r"Column 'value' must be binary or string.*bigint.*cast"):
        writer(df, "127.0.0.1:9", topic="t").save()


def struct_type(ddl):
    from pyspark.sql.types import _parse_datatype_string
    return _parse_datatype_string(ddl)


@pytest.mark.parametrize("ddl,options,message", [
    ("key binary", {"topic": "t"}, r"needs a 'value' column.*columns are: key"),
    ("value int", {"topic": "t"}, r"Column 'value' must be binary or string.*int"),
    ("value binary, key array<int>", {"topic": "t"}, r"Column 'key' must be binary or string"),
    ("value binary", {}, r"set the option 'topic'.*or add a string 'topic' column"),
    ("value binary, topic binary", {}, r"Column 'topic' must be string.*binary"),
    ("value binary, partition bigint", {"topic": "t"}, r"Column 'partition' must be int.*bigint"),
    ("value binary, headers array<struct<key:string,value:string>>", {"topic": "t"},
     r"Column 'headers' must be array<struct<key:string,value:binary>>"),
    ("value binary, headers map<string,binary>", {"topic": "t"}, r"Column 'headers' must be"),
    ("value binary, timestamp bigint", {"topic": "t"}, r"Column 'timestamp' must be timestamp"),
    ("value binary, VALUE string", {"topic": "t"}, r"two 'value' columns"),
])
def test_schema_validation(ddl, options, message):
    opts = parse_write_options({"kafka.bootstrap.servers": "h:1", **options})
    with pytest.raises(ConfigurationError, match=message):
        plan_columns(struct_type(ddl), opts)


def test_schema_validation_accepts_spark_kafka_sink_columns():
    opts = parse_write_options({"kafka.bootstrap.servers": "h:1"})
    plan = plan_columns(struct_type(
        "extra int, Key string, value binary, topic string, partition int, "
        "headers array<struct<key:string,value:binary>>, timestamp timestamp"), opts)
    assert (plan.key, plan.value, plan.topic, plan.partition, plan.headers, plan.timestamp) == \
        (1, 2, 3, 4, 5, 6)
    # with the topic option, the topic column is not used (nor type-checked)
    opts = parse_write_options({"kafka.bootstrap.servers": "h:1", "topic": "t"})
    assert plan_columns(struct_type("value string, topic int"), opts).topic == -1


@pytest.mark.parametrize("options,message", [
    ({"kafka.key.serializer": "x"}, r"Kafka option 'key.serializer' is not supported.*binary or string"),
    ({"kafka.value.serializer": "x"}, r"Kafka option 'value.serializer' is not supported"),
    ({"kafka.transactional.id": "x"}, r"transactional.id.*deliveryGuarantee.*exactly-once"),
    ({"kafka.partitioner.class": "x"}, r"compute a 'partition' column"),
    ({"kafka.acks": "2"}, r"'kafka.acks' must be '0', '1' or 'all'"),
    ({"kafka.compression.type": "brotli"}, r"'kafka.compression.type' must be one of"),
    ({"kafka.enable.idempotence": "true", "kafka.acks": "1"},
     r"'kafka.enable.idempotence' is 'true' but 'kafka.acks' is '1'"),
    ({"kafka.enable.idempotence": "true", "kafka.max.in.flight.requests.per.connection": "6"},
     r"idempotence allows at most 5"),
    ({"kafka.delivery.timeout.ms": "1000"}, r"'kafka.delivery.timeout.ms' \(1000\) must be at least"),
    ({"kafka.batch.size": "-1"}, r"'kafka.batch.size' must be at least 1"),
    ({"topic": " "}, r"Option 'topic' is empty"),
    ({"kafka.bootstrap.servers": ""}, r"'kafka.bootstrap.servers' must be set"),
    ({"deliveryGuarantee": "exactly_once"}, r"'deliveryGuarantee' must be 'at-least-once' or"),
    ({"deliveryGuarantee": "exactly-once", "kafka.acks": "1"},
     r"'deliveryGuarantee' is 'exactly-once'.*'kafka.acks' is '1'"),
    ({"deliveryGuarantee": "exactly-once", "kafka.enable.idempotence": "false"},
     r"'deliveryGuarantee' is 'exactly-once'.*'kafka.enable.idempotence' is 'false'"),
    ({"transactionalIdPrefix": " "}, r"'transactionalIdPrefix' is empty"),
    ({"kafka.transaction.timeout.ms": "0"}, r"'kafka.transaction.timeout.ms' must be at least 1"),
])
def test_write_option_errors(options, message):
    with pytest.raises(ConfigurationError, match=message):
        parse_write_options({"kafka.bootstrap.servers": "h:1", **options})


def test_write_option_defaults_follow_the_java_producer():
    opts = parse_write_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Topic": "t"})
    assert (opts.acks, opts.idempotent, opts.compression, opts.delivery_timeout_ms,
            opts.max_in_flight, opts.retries) == (-1, True, "none", 120000, 5, 2147483647)
    # acks=1 without an explicit idempotence setting quietly turns idempotence off
    assert not parse_write_options({"kafka.bootstrap.servers": "h:1", "kafka.acks": "1"}).idempotent
    assert parse_write_options({"kafka.bootstrap.servers": "h:1", "kafka.acks": "all"}).acks == -1


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
    with pytest.raises(Exception, match=r"Topic 'no-such-topic-x' does not exist.*does not "
                                        r"create topics with 'kafka.allow.auto.create.topics'"):
        writer(df, broker.bootstrap_servers, topic="no-such-topic-x",
               **{"kafka.allow.auto.create.topics": "false"}).save()
    assert "no-such-topic-x" not in broker.list_topics()


def test_missing_topic_on_a_broker_that_does_not_create_it():
    """A broker without auto.create.topics.enable answers UNKNOWN_TOPIC_OR_PARTITION even
    when creation is allowed (neither test broker can be set so: a fake one)."""
    from tests.support.fakebroker import serve_cluster
    from kafka_ds.write.topics import check_topic_exists

    fake = serve_cluster({"other": 1}, {})
    try:
        opts = parse_write_options({"kafka.bootstrap.servers": fake.address, "topic": "absent"})
        with pytest.raises(ConfigurationError, match=r"Topic 'absent' does not exist.*did not "
                                                     r"create it.*auto.create.topics.enable"):
            check_topic_exists(opts)
    finally:
        fake.close()


def test_allow_auto_create_topics_option_is_checked_on_the_driver():
    with pytest.raises(ConfigurationError, match="'kafka.allow.auto.create.topics'"):
        parse_write_options({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t",
                             "kafka.allow.auto.create.topics": "maybe"})
    assert parse_write_options({"kafka.bootstrap.servers": "h:1"}).allow_auto_create_topics
    assert not parse_write_options({"kafka.bootstrap.servers": "h:1",
                                    "kafka.allow.auto.create.topics": "false"}
                                   ).allow_auto_create_topics


def test_null_topic_value_fails_the_task_naming_the_row(spark, broker, new_topic):
    topic = new_topic()
    df = spark.range(0, 100, 1, 2).selectExpr(
        f"CASE WHEN id = 77 THEN NULL ELSE '{topic}' END AS topic", "cast(id AS string) AS value")
    # rows 50..99 are Spark partition 1: id 77 is its row 27
    with pytest.raises(Exception, match=r"Column 'topic' is null at row 27 of Spark partition "
                                        r"1's input"):
        writer(df, broker.bootstrap_servers).save()


def arrow_rows(n, value_size=20, **extra):
    columns = {"value": pa.array([b"%08d" % i + b"." * (value_size - 8) for i in range(n)])}
    columns.update(extra)
    return pa.table(columns)


def plan_of(table):
    return ColumnPlan(**{name: i for i, name in enumerate(table.column_names)})


def test_unknown_topic_in_column_and_partition_out_of_range(broker, new_topic):
    topic = new_topic(partitions=2)
    opts = parse_write_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                                "kafka.allow.auto.create.topics": "false"})
    table = arrow_rows(10, topic=pa.array([topic] * 9 + ["nowhere-topic"]))
    with pytest.raises(ConfigurationError, match=r"Topic 'nowhere-topic' does not exist"):
        write_batches(opts, plan_of(table), table.to_batches(), task=3)
    table = arrow_rows(10, topic=pa.array([topic] * 10),
                       partition=pa.array([0, 1, None, 1, 0, 2, 0, 0, 0, 0], pa.int32()))
    with pytest.raises(ConfigurationError, match=rf"Column 'partition' is 2 at row 5 of Spark "
                                                 rf"partition 3's input, but topic '{topic}' has "
                                                 r"partitions 0..1"):
        write_batches(opts, plan_of(table), table.to_batches(), task=3)
    table = arrow_rows(3, topic=pa.array([topic] * 3), partition=pa.array([0, -1, 0], pa.int32()))
    with pytest.raises(ConfigurationError, match=r"Column 'partition' is -1 at row 1"):
        write_batches(opts, plan_of(table), table.to_batches(), task=3)


def test_record_larger_than_max_request_size(broker, new_topic):
    topic = new_topic(partitions=3)
    opts = parse_write_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                                "topic": topic, "kafka.max.request.size": "5000"})
    values = [b"small"] * 20
    values[13] = b"x" * 6000
    table = pa.table({"value": pa.array(values), "partition": pa.array([2] * 20, pa.int32())})
    batches = [table.slice(0, 10).to_batches()[0], table.slice(10).to_batches()[0]]
    with pytest.raises(ConfigurationError,
                       match=rf"record at row 13 of Spark partition 0's input for topic '{topic}' "
                             r"partition 2 is about 60\d\d bytes, more than "
                             r"'kafka.max.request.size' \(5000\)"):
        write_batches(opts, plan_of(table), batches, task=0)


def test_negative_timestamp_and_null_header_key_are_rejected(broker, new_topic):
    topic = new_topic()
    opts = parse_write_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "topic": topic})
    table = arrow_rows(3, timestamp=pa.array([0, -5, None], pa.timestamp("ms")))
    with pytest.raises(ConfigurationError, match=r"before 1970-01-01 at row 1"):
        write_batches(opts, plan_of(table), table.to_batches(), task=0)
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    table = arrow_rows(3, headers=pa.array([[], None, [{"key": "a", "value": b""},
                                                       {"key": None, "value": b"v"}]], header_type))
    with pytest.raises(ConfigurationError, match=r"null key.*at row 2"):
        write_batches(opts, plan_of(table), table.to_batches(), task=0)


# --- batching, acks, commit messages ------------------------------------------------------

def test_batch_size_linger_and_commit_message(broker, new_topic):
    topic = new_topic(partitions=2)
    opts = parse_write_options({
        "kafka.bootstrap.servers": broker.bootstrap_servers, "topic": topic,
        "kafka.batch.size": "4000", "kafka.linger.ms": "60000"})
    table = arrow_rows(2000, partition=pa.array([i % 2 for i in range(2000)], pa.int32()))
    # 40 Arrow batches of 50 rows: with linger, rows wait for the next Arrow batch until a
    # partition has ~4000 bytes, so batches are built across Arrow batches.
    message = write_batches(opts, plan_of(table), table.to_batches(max_chunksize=50), task=5)
    assert isinstance(message, KafkaCommitMessage)
    assert message.task == 5 and message.records == 2000
    for partition in (0, 1):
        sizes = batch_headers(broker.bootstrap_servers, topic, partition)
        assert sum(count for _s, _a, count in sizes) == 1000
        assert all(size <= 4000 for size, _a, _c in sizes)
        assert max(count for _s, _a, count in sizes) > 100   # far more than 25 rows per batch
        assert len(sizes) < 12
    assert sorted(message.partitions) == [(topic, 0, 1000, 0, 999), (topic, 1, 1000, 0, 999)]

    # without linger every Arrow batch is sent at once: 25 rows per partition per batch
    topic2 = new_topic(partitions=2)
    opts = parse_write_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                                "topic": topic2, "kafka.batch.size": "4000",
                                "kafka.linger.ms": "0"})
    write_batches(opts, plan_of(table), table.to_batches(max_chunksize=50), task=5)
    assert {c for _s, _a, c in batch_headers(broker.bootstrap_servers, topic2, 0)} == {25}


def test_buffer_memory_bounds_what_lingers(broker, new_topic):
    """With a long linger and many partitions, rows waiting in the partition buffers stay
    under kafka.buffer.memory: past it the fullest buffers are sent at once (whole)."""
    topic = new_topic(partitions=12)
    limit = 20_000
    opts = parse_write_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                                "topic": topic, "kafka.linger.ms": "60000",
                                "kafka.buffer.memory": str(limit)})
    table = arrow_rows(3000, value_size=40,
                       partition=pa.array([i % 12 for i in range(3000)], pa.int32()))
    writer = TaskWriter(opts, plan_of(table), task=0)
    try:
        waiting = []
        for batch in table.to_batches(max_chunksize=200):   # ~11 KB of rows each
            writer.write_batch(batch)
            waiting.append(writer.batches.buffered_bytes)
            assert writer.batches.buffered_bytes == sum(
                b.bytes for b in writer.batches.buffers.values())
        assert max(waiting) <= limit
        sent_early = writer.producer.stats.requests
        assert sent_early > 0, "rows went out before the end of the task"
        message = writer.finish()
    finally:
        writer.close()
    assert message.records == 3000
    for partition in range(12):
        assert sum(c for _s, _a, c in batch_headers(broker.bootstrap_servers, topic,
                                                     partition)) == 250


def test_incompressible_batches_stay_within_max_request_size(broker, new_topic):
    """Random bytes grow a little in a codec: a batch filled up to the limit before
    compression is split rather than sent too large. Records of ~25 KB, 4 to a 100 KB
    batch; around the size where 4 just fit, the codec's framing tips some over."""
    limit = 100_000
    rnd = np.random.default_rng(4)
    halved = 0
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        topic = new_topic()
        opts = parse_write_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                                    "topic": topic, "kafka.compression.type": codec,
                                    "kafka.batch.size": str(limit),
                                    "kafka.max.request.size": str(limit)})
        sent = []
        for value_size in range(24_948, 24_972, 4):
            values = [rnd.bytes(value_size) for _ in range(8)]
            write_batches(opts, ColumnPlan(value=0), pa.table({"value": values}).to_batches(),
                          task=0)
            sent += values
        batches = batch_headers(broker.bootstrap_servers, topic, 0)
        assert all(size <= limit for size, _a, _c in batches), (codec, batches)
        halved += sum(1 for _s, _a, count in batches if count < 4)
        got = [m.value for m in consume_confluent(broker.bootstrap_servers, topic, timeout=30)]
        assert got == sent
    assert halved > 0


def test_commit_summary_folds_task_messages():
    messages = [KafkaCommitMessage(task=0, records=30, bytes=900, retries=1,
                                   partitions=[("a", 0, 10, 0, 9), ("a", 1, 20, 5, 24)]),
                None,
                KafkaCommitMessage(task=2, records=15, bytes=400,
                                   partitions=[("a", 0, 5, 10, 14), ("b", 0, 10, -1, -1)])]
    summary = WriteSummary.of(messages)
    assert (summary.records, summary.tasks, summary.failed_tasks, summary.retries) == (45, 2, 1, 1)
    assert summary.partitions == {("a", 0): [15, 0, 14], ("a", 1): [20, 5, 24],
                                  ("b", 0): [10, -1, -1]}
    text = summary.describe()
    assert "45 records" in text and "a-0: 15 offsets 0-14" in text and "b-0: 10" in text


@pytest.mark.parametrize("acks", ["0", "1"])
def test_acks_0_and_1(broker, new_topic, acks):
    topic = new_topic(partitions=3)
    opts = parse_write_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                                "topic": topic, "kafka.acks": acks})
    assert not opts.idempotent
    table = arrow_rows(3000, key=pa.array([b"k%d" % (i % 7) for i in range(3000)]))
    message = write_batches(opts, plan_of(table), table.to_batches(max_chunksize=1000), task=0)
    assert message.records == 3000
    offsets_known = {first >= 0 for _t, _p, _n, first, _last in message.partitions}
    assert offsets_known == ({False} if acks == "0" else {True})
    # With acks=0 nothing says when the broker has appended the records: a reader that
    # comes too early sees end-of-partition before all of them. Look again until then.
    deadline = time.monotonic() + 30
    while True:
        msgs = consume_confluent(broker.bootstrap_servers, topic, timeout=30)
        if len(msgs) >= 3000 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert sorted(m.value for m in msgs) == sorted(table.column("value").to_pylist())


def test_null_keys_are_sticky(broker, new_topic):
    topic = new_topic(partitions=4)
    opts = parse_write_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                                "topic": topic, "kafka.batch.size": "2000"})
    table = arrow_rows(1000, value_size=40)
    write_batches(opts, plan_of(table), table.to_batches(max_chunksize=300), task=0)
    msgs = consume_confluent(broker.bootstrap_servers, topic, timeout=30)
    partition_of = {int(m.value[:8]): m.partition for m in msgs}
    sequence = [partition_of[i] for i in range(1000)]
    runs = [1]
    for a, b in zip(sequence, sequence[1:]):
        if a == b:
            runs[-1] += 1
        else:
            runs.append(1)
    # ~48 bytes a record, a new partition after ~2000 bytes: runs of ~40 records
    assert len(set(sequence)) == 4
    assert all(35 <= r <= 45 for r in runs[:-1]), runs
    # and each partition's records are in input order
    for p in range(4):
        ids = [int(m.value[:8]) for m in msgs if m.partition == p]
        assert ids == sorted(ids)


# --- retries, idempotence, faults ----------------------------------------------------------

def test_fault_proxy_drops_after_the_broker_appended(broker, new_topic):
    """Control experiment: without idempotence, a lost Produce answer duplicates records --
    so the proxy really drops answers to appended batches."""
    topic = new_topic(partitions=3)
    table = arrow_rows(20000, key=pa.array([b"k%d" % i for i in range(20000)]))
    with FaultProxy(broker.bootstrap_servers) as proxy:
        proxy.drop_produce_replies(count=2, skip=1)
        opts = parse_write_options({"kafka.bootstrap.servers": proxy.bootstrap_servers,
                                    "topic": topic, "kafka.batch.size": "16384",
                                    "kafka.enable.idempotence": "false"})
        message = write_batches(opts, plan_of(table), table.to_batches(max_chunksize=5000), task=0)
        assert proxy.counters["dropped_produce_replies"] == 2
    assert message.retries > 0
    values = [m.value for m in consume_confluent(broker.bootstrap_servers, topic, timeout=30)]
    assert set(values) == set(table.column("value").to_pylist())
    assert len(values) > 20000


def test_lost_produce_answers_do_not_duplicate_rows(spark, broker, new_topic, request):
    quirk(request, broker, ["mock"],
          "the mock checks producer sequences only for transactional producers, so a resent "
          "batch is appended again (tests/README.md, mock deviation 8)")
    topic = new_topic(partitions=3)
    df = spark.range(0, 20000, 1, 2).selectExpr("cast(id AS string) AS key",
                                                "cast(id AS string) AS value")
    with FaultProxy(broker.bootstrap_servers) as proxy:
        proxy.drop_produce_replies(count=2, skip=1)
        writer(df, proxy.bootstrap_servers, topic=topic, kafka_batch_size="16384").save()
        assert proxy.counters["dropped_produce_replies"] == 2
    values = [m.value for m in consume_confluent(broker.bootstrap_servers, topic, timeout=30)]
    assert sorted(values) == sorted(str(i).encode() for i in range(20000))


def mock_topic(mock_cluster, partitions):
    name = mock_cluster.unique_topic("w")
    mock_cluster.create_topic(name, partitions=partitions)
    return name


@pytest.fixture
def injected_errors(mock_cluster):
    """``inject(*codes)``: the mock answers the next Produce requests with these errors.
    Whatever a test leaves unused is consumed afterwards (the queue is cluster-wide)."""
    pushed = []

    def inject(*codes):
        pushed.extend(codes)
        mock_cluster.push_request_errors(PRODUCE, *codes)

    yield inject
    if pushed:
        topic = mock_topic(mock_cluster, 1)
        client = KafkaClient(mock_cluster.bootstrap_servers)
        try:
            conn = client.connection(client.leader_for(topic, 0))
            for _ in range(len(pushed) + 1):
                response = conn.request(m.PRODUCE, {
                    "transactional_id": None, "acks": 1, "timeout_ms": 1000,
                    "topic_data": [{"name": topic, "partition_data": [
                        {"index": 0, "records": encode_record_batch(keys=None, values=[b"x"])}]}]})
                if response["responses"][0]["partition_responses"][0]["error_code"] == 0:
                    break
        finally:
            client.close()


def test_retriable_errors_are_retried(mock_cluster, injected_errors):
    topic = mock_topic(mock_cluster, 3)
    opts = parse_write_options({"kafka.bootstrap.servers": mock_cluster.bootstrap_servers,
                                "topic": topic, "kafka.retry.backoff.ms": "10"})
    table = arrow_rows(3000, key=pa.array([b"k%d" % i for i in range(3000)]))
    # NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS on the first answers
    injected_errors(6, 7, 19, 6)
    message = write_batches(opts, plan_of(table), table.to_batches(max_chunksize=1000), task=0)
    assert message.retries >= 4
    msgs = consume_confluent(mock_cluster.bootstrap_servers, topic, timeout=30)
    assert sorted(m.value for m in msgs) == sorted(table.column("value").to_pylist())


@pytest.mark.parametrize("code,message", [
    (29, r"TOPIC_AUTHORIZATION_FAILED.*topic '{topic}' partition \d, 1000 rows of Spark "
         r"partition 4's input between row 0 and 99\d"),
    (10, r"MESSAGE_TOO_LARGE.*lower 'kafka.batch.size' or raise the topic's max.message.bytes"),
    (45, r"OUT_OF_ORDER_SEQUENCE_NUMBER.*topic '{topic}' partition 0"),
])
def test_fatal_errors_name_topic_partition_and_rows(mock_cluster, injected_errors, code, message):
    topic = mock_topic(mock_cluster, 1)
    opts = parse_write_options({"kafka.bootstrap.servers": mock_cluster.bootstrap_servers,
                                "topic": topic})
    table = arrow_rows(1000)
    injected_errors(code)
    with pytest.raises(ProduceError, match=message.format(topic=topic)) as failure:
        write_batches(opts, plan_of(table), table.to_batches(), task=4)
    assert (failure.value.topic, failure.value.partition) == (topic, 0)


def test_delivery_timeout_bounds_retries(mock_cluster, injected_errors):
    topic = mock_topic(mock_cluster, 1)
    opts = parse_write_options({"kafka.bootstrap.servers": mock_cluster.bootstrap_servers,
                                "topic": topic, "kafka.retry.backoff.ms": "50",
                                "kafka.request.timeout.ms": "500",
                                "kafka.delivery.timeout.ms": "700"})
    injected_errors(*([6] * 40))
    started = time.monotonic()
    with pytest.raises(ProduceError, match=r"not acknowledged within "
                                           r"'kafka.delivery.timeout.ms' \(700 ms"):
        write_batches(opts, plan_of(arrow_rows(10)), arrow_rows(10).to_batches(), task=0)
    assert time.monotonic() - started < 5


def test_leader_moves_and_broker_restarts_during_a_write(mock_cluster):
    topic = mock_topic(mock_cluster, 3)
    # linger 0: each write_batch sends its rows, so the events below happen mid-write
    opts = parse_write_options({"kafka.bootstrap.servers": mock_cluster.bootstrap_servers,
                                "topic": topic, "kafka.retry.backoff.ms": "20",
                                "kafka.linger.ms": "0"})
    table = arrow_rows(9000, key=pa.array([b"k%d" % i for i in range(9000)]))
    batches = table.to_batches(max_chunksize=3000)
    task = TaskWriter(opts, plan_of(table), task=0)
    try:
        task.write_batch(batches[0])
        task.producer.flush()
        leaders = {p: mock_cluster.topic_metadata(topic)[p][0] for p in range(3)}
        for p, leader in leaders.items():   # every partition to another broker
            mock_cluster.set_leader(topic, p, leader % 3 + 1)
        task.write_batch(batches[1])
        task.producer.flush()
        assert task.producer.stats.errors.get("NOT_LEADER_OR_FOLLOWER", 0) >= 1
        # a broker goes away mid-write and comes back a little later
        down = mock_cluster.topic_metadata(topic)[0][0]
        mock_cluster.broker_down(down)
        threading.Timer(1.0, mock_cluster.broker_up, args=(down,)).start()
        task.write_batch(batches[2])
        message = task.finish()
    finally:
        task.close()
    assert message.records == 9000
    msgs = consume_confluent(mock_cluster.bootstrap_servers, topic, timeout=30)
    assert sorted(m.value for m in msgs) == sorted(table.column("value").to_pylist())
    assert sorted(message.partitions) == [(topic, p, n, 0, n - 1) for p, n in sorted(
        collections.Counter(m.partition for m in msgs).items())]


# --- streaming sink -------------------------------------------------------------------

def test_streaming_sink(spark, broker, new_topic):
    topic = new_topic(partitions=2)
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "in")
        os.makedirs(source)
        for part in range(3):
            ids = range(part * 500, (part + 1) * 500)
            pq.write_table(pa.table({
                "key": pa.array([b"k%d" % (i % 9) for i in ids]),
                "value": pa.array([b"row-%d" % i for i in ids]),
                "timestamp": pa.array([BASE_TS + i for i in ids], pa.timestamp("ms", tz="UTC")),
            }), os.path.join(source, f"part-{part}.parquet"))
        schema = spark.read.parquet(source).schema
        query = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(source)
                 .writeStream.format("pykafka")
                 .option("kafka.bootstrap.servers", broker.bootstrap_servers)
                 .option("topic", topic)
                 .option("checkpointLocation", os.path.join(tmp, "checkpoint"))
                 .outputMode("append").trigger(availableNow=True).start())
        assert query.awaitTermination(120)
        assert query.exception() is None
        batches = [p["batchId"] for p in query.recentProgress if p["numInputRows"]]
        assert len(batches) == 3   # one micro-batch per file
    msgs = consume_confluent(broker.bootstrap_servers, topic, timeout=30)
    assert sorted(m.value for m in msgs) == sorted(b"row-%d" % i for i in range(1500))
    for m in msgs:
        i = int(m.value[4:])
        assert m.partition == java_partition(b"k%d" % (i % 9), 2)
        assert m.timestamp == (1, BASE_TS + i)


# --- what the brokers do with idempotent batches (pins tests/README.md deviations) -----------

def raw_produce(conn, topic, batch):
    response = conn.request(m.PRODUCE, {
        "transactional_id": None, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    part = response["responses"][0]["partition_responses"][0]
    return part["error_code"], part["base_offset"]


@pytest.fixture
def idempotent_batches(broker, new_topic):
    """(connection to the leader, topic, producer id, epoch, batch(sequence) -> bytes)."""
    topic = new_topic()
    client = KafkaClient(broker.bootstrap_servers)
    producer_id, epoch = client.init_producer_id()

    def batch(sequence, count=3):
        return encode_record_batch(keys=None, values=[b"r%d" % i for i in range(count)],
                                   producer_id=producer_id, producer_epoch=epoch,
                                   base_sequence=sequence)

    yield client.connection(client.leader_for(topic, 0)), topic, batch
    client.close()


def test_resent_idempotent_batch_is_not_appended_again(broker, idempotent_batches, request):
    quirk(request, broker, ["mock"], "sequence numbers are only checked for transactional "
                                     "producers (tests/README.md, mock deviation 8)")
    conn, topic, batch = idempotent_batches
    assert raw_produce(conn, topic, batch(0)) == (0, 0)
    raw_produce(conn, topic, batch(0))                       # a retry of the same batch
    assert raw_produce(conn, topic, batch(3)) == (0, 3)      # appended right after the first
    assert raw_produce(conn, topic, batch(10))[0] == 45      # a gap: OUT_OF_ORDER_SEQUENCE


def test_duplicate_answer_to_a_first_attempt_fails_instead_of_counting_records(tansu_broker):
    """DUPLICATE_SEQUENCE_NUMBER means "written before" only for a batch sent before. Two
    producers sharing one producer id (Tansu checks sequences; the mock does not, mock
    deviation 8): the second one's first batch is refused as a duplicate of records it never
    sent. The write must fail, not count those records as written."""
    from kafka_ds.client.producer import Producer
    topic = tansu_broker.unique_topic("dup")
    tansu_broker.create_topic(topic, partitions=1)
    client = KafkaClient(tansu_broker.bootstrap_servers)
    try:
        first, second = Producer(client), Producer(client)
        first.start()
        # The same producer id and epoch, with sequences of its own starting at 0.
        second.use_transaction(first.producer_id, first.producer_epoch)

        def send(producer, values):
            producer_id, epoch, sequence = producer.batch_identity(topic, 0, len(values))
            producer.send(topic, 0, encode_record_batch(
                keys=None, values=values, producer_id=producer_id, producer_epoch=epoch,
                base_sequence=sequence), len(values), base_sequence=sequence)
            producer.flush()

        send(first, [b"a", b"b", b"c"])
        with pytest.raises(ProduceError, match=r"DUPLICATE_SEQUENCE_NUMBER \(46\) to the first "
                                               r"attempt of 2 records .*never sent before"):
            send(second, [b"x", b"y"])
        assert second.results() == {}
        assert client.fetch_watermarks({(topic, 0): 0})[(topic, 0)][0] == 3
    finally:
        client.close()
        tansu_broker.delete_topic(topic)


def test_resent_idempotent_batch_is_answered_with_its_offset(broker, idempotent_batches, request):
    """Kafka answers a duplicate of one of the last 5 batches with NONE and the offset the
    batch got the first time; kafka_ds also accepts DUPLICATE_SEQUENCE_NUMBER (46)."""
    quirk(request, broker, ["mock"], "appends the batch again (tests/README.md, mock deviation 8)")
    quirk(request, broker, ["tansu"], "answers DUPLICATE_SEQUENCE_NUMBER with base offset -1 "
                                      "(tests/README.md, Tansu deviation 12)")
    conn, topic, batch = idempotent_batches
    assert raw_produce(conn, topic, batch(0)) == (0, 0)
    assert raw_produce(conn, topic, batch(0)) == (0, 0)
