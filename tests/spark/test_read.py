"""spark.read.format("pykafka") on Apache Kafka, compared with chispa.

The dataset of tests/integration/test_read.py (its Apache Kafka one: tests/conftest.py
``SPARK_LEAVES_OUT``): topic ``a`` (3 partitions) and topic ``b`` (2 partitions), every
partition written by confluent-kafka with a different codec, some records with headers.
"""

import json

import pytest
from chispa import assert_df_equality

from tests.integration.test_read import (
    BASE_TS,
    RECORDS_PER_PARTITION,
    data,  # noqa: F401  (fixture)
)
from tests.support.spark_support import spark  # noqa: F401  (fixture)


def assert_same_rows(actual, expected):
    order = ["topic", "partition", "offset"]
    assert_df_equality(actual.orderBy(order), expected.orderBy(order), ignore_nullable=True)


# --- every subscription kind x offset mode ---------------------------------------------------

SUBSCRIPTIONS = ["subscribe", "subscribePattern", "assign"]


@pytest.mark.parametrize("kind", SUBSCRIPTIONS)
def test_earliest_to_latest_with_headers(spark, data, kind):
    df = data.reader(spark, includeHeaders="true", **data.subscription(kind)).load()
    assert_same_rows(df, data.expected(spark, include_headers=True))


@pytest.mark.parametrize("kind", SUBSCRIPTIONS)
def test_specific_offsets(spark, data, kind):
    a, b = data.topics["a"], data.topics["b"]
    start = {a: {"0": 5, "1": -2, "2": 39}, b: {"0": -2, "1": 3}}
    end = {a: {"0": 20, "1": -1, "2": 40}, b: {"0": -1, "1": 3}}  # b-1 is an empty range
    bounds = {(t, int(p)): (s, end[t][p]) for t, ps in start.items() for p, s in ps.items()}
    counts = {(data.topics[s], p): n for (s, p), n in RECORDS_PER_PARTITION.items()}

    def keep(row):
        lo, hi = bounds[(row[2], row[3])]
        lo = 0 if lo == -2 else lo
        hi = counts[(row[2], row[3])] if hi == -1 else hi
        return lo <= row[4] < hi

    df = data.reader(
        spark,
        startingOffsets=json.dumps(start),
        endingOffsets=json.dumps(end),
        **data.subscription(kind),
    ).load()
    assert_same_rows(df, data.expected(spark, keep))


@pytest.mark.parametrize("kind", SUBSCRIPTIONS)
def test_offsets_by_timestamp(spark, data, kind):
    # Neither broker answers ListOffsets by timestamp (tests/README.md, mock deviation 2,
    # Tansu deviation 2): timestampOffsetsVia=auto checks the answer and searches by Fetch.
    start_ts, end_ts = BASE_TS + 4 * 1000, BASE_TS + 22 * 1000
    df = data.reader(
        spark,
        startingTimestamp=str(start_ts),
        endingTimestamp=str(end_ts),
        **data.subscription(kind),
    ).load()
    ms = lambda row: int(row[5].timestamp() * 1000)  # noqa: E731
    assert_same_rows(df, data.expected(spark, lambda r: start_ts <= ms(r) < end_ts))


# --- splitting ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option,value,tasks",
    [
        ("minPartitions", "12", 12),  # 121 records over 5 ranges -> 12 proportional parts
        ("maxRecordsPerPartition", "7", 19),  # ceil(30/7)+ceil(25/7)+ceil(40/7)+ceil(20/7)+1
    ],
)
def test_splits_give_same_rows_with_more_tasks(spark, data, option, value, tasks):
    df = data.reader(spark, **{option: value}, **data.subscription("subscribe")).load()
    assert df.rdd.getNumPartitions() == tasks
    assert_same_rows(df, data.expected(spark))


# --- empty results --------------------------------------------------------------------------


def test_empty_topic_and_empty_range_give_empty_dataframes(spark, data):
    empty_topic = data.broker.unique_topic("empty")
    data.broker.create_topic(empty_topic, partitions=2)
    try:
        df = data.reader(spark, subscribe=empty_topic, includeHeaders="true").load()
        assert_same_rows(df, data.expected(spark, lambda r: False, include_headers=True))
    finally:
        data.broker.delete_topic(empty_topic, wait=False)
    a = data.topics["a"]
    same = json.dumps({a: {"0": 7}})
    df = data.reader(
        spark, assign=json.dumps({a: [0]}), startingOffsets=same, endingOffsets=same
    ).load()
    assert df.rdd.getNumPartitions() == 0 or df.count() == 0
    assert_same_rows(df, data.expected(spark, lambda r: False))


# --- planned errors ---------------------------------------------------------------------------

BAD_OPTIONS = [
    ({}, "One of the following options must be specified for Kafka source"),
    (
        {"subscribe": "x", "assign": '{"x":[0]}'},
        "Only one of the following options can be specified",
    ),
    ({"assign": "[1,2]"}, "No topicpartitions to assign as specified value for option 'assign'"),
    ({"subscribePattern": "("}, "Option 'subscribePattern' is not a valid regex"),
    ({"subscribe": "x", "startingOffsets": "latest"}, "cannot be 'latest' for a batch query"),
    (
        {"subscribe": "x", "endingOffsets": "earliest"},
        "Option 'endingOffsets' cannot be 'earliest'",
    ),
    ({"subscribe": "x", "startingOffsets": "{bad"}, "Option 'startingOffsets' is not valid JSON"),
    (
        {"subscribe": "x", "kafka.auto.offset.reset": "earliest"},
        "Kafka option 'auto.offset.reset' is not supported",
    ),
    (
        {"subscribe": "x", "kafka.value.deserializer": "x"},
        "Kafka option 'value.deserializer' is not supported",
    ),
    (
        {"subscribe": "x", "kafka.enable.auto.commit": "true"},
        "Kafka option 'enable.auto.commit' is not supported",
    ),
    (
        {"subscribe": "x", "kafka.interceptor.classes": "x"},
        "Kafka option 'interceptor.classes' is not supported",
    ),
    ({"subscribe": "x", "minPartitions": "0"}, "minPartitions"),
    ({"subscribe": "x", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    (
        {"subscribe": "x", "kafka.request.timeout.ms": "30s"},
        "Option 'kafka.request.timeout.ms' must be an integer, got '30s'",
    ),
    ({"subscribe": "x", "kafka.isolation.level": "dirty"}, "'kafka.isolation.level' must be"),
    (
        {"subscribe": "x", "startingOffsetsByTimestampStrategy": "skip"},
        "'startingOffsetsByTimestampStrategy' must be 'error' or 'latest'",
    ),
]


@pytest.mark.parametrize(
    "options,message", BAD_OPTIONS, ids=[str(i) for i in range(len(BAD_OPTIONS))]
)
def test_bad_options_fail_at_planning(spark, mock_cluster, options, message):
    reader = spark.read.format("pykafka").option(
        "kafka.bootstrap.servers", mock_cluster.bootstrap_servers
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace("[", r"\[")):
        reader.load().collect()


def test_option_keys_are_case_insensitive_and_bootstrap_is_required(spark, data):
    df = (
        spark.read.format("pykafka")
        .option("KAFKA.BOOTSTRAP.SERVERS", data.bootstrap)
        .option("SUBSCRIBE", data.topics["b"])
        .option("STARTINGOFFSETS", "earliest")
        .load()
    )
    assert_same_rows(df, data.expected(spark, lambda r: r[2] == data.topics["b"]))
    with pytest.raises(Exception, match="Option 'kafka.bootstrap.servers' must be set"):
        spark.read.format("pykafka").option("subscribe", "x").load().collect()


def test_custom_schema_is_rejected(spark, mock_cluster):
    with pytest.raises(Exception, match="fixed schema"):
        (
            spark.read.format("pykafka")
            .schema("value string")
            .option("kafka.bootstrap.servers", mock_cluster.bootstrap_servers)
            .option("subscribe", "x")
            .load()
            .collect()
        )


def test_unreachable_bootstrap_fails_with_a_clear_message(spark, mock_cluster):
    from tests.support.brokers import free_port

    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(Exception, match="cannot reach any broker of kafka.bootstrap.servers"):
        (
            spark.read.format("pykafka")
            .option("kafka.bootstrap.servers", address)
            .option("subscribe", "x")
            .option("kafka.socket.connection.setup.timeout.ms", "1000")
            .option("fetchOffset.numRetries", "0")
            # the planning budget (60 s by default) bounds the retries of an unreachable
            # bootstrap list; 3 s are enough to see the same error
            .option("kafka.default.api.timeout.ms", "3000")
            .load()
            .collect()
        )


# --- brokers whose ListOffsets lags --------------------------------------------------------------


@pytest.mark.parametrize("latest_via", [None, "auto", "fetch", "listOffsets"])
def test_latest_offsets_after_multi_record_batches(spark, broker, new_topic, latest_via):
    """The default lookup (``auto``: ListOffsets checked against one small Fetch per
    leader) and ``fetch`` read everything on every broker, Tansu too, whose ListOffsets
    LATEST stops at the last batch's first record (tests/README.md). ``listOffsets`` alone
    is Spark's lookup: complete on Apache Kafka, short on Tansu."""
    import pyarrow as pa

    from kafka_ds.client import KafkaClient
    from kafka_ds.protocol.records_encode import encode_record_batch
    from tests.integration.test_client import _produce_batches

    topic = new_topic(partitions=2)
    client = KafkaClient(broker.bootstrap_servers)
    try:
        for partition in (0, 1):
            for start in (0, 5):
                _produce_batches(
                    client,
                    topic,
                    partition,
                    [
                        encode_record_batch(
                            keys=None,
                            values=pa.array(
                                [f"{partition}-{i}".encode() for i in range(start, start + 5)]
                            ),
                            timestamps_ms=pa.array([BASE_TS] * 5, pa.int64()),
                        )
                    ],
                )
    finally:
        client.close()
    reader = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
    )
    if latest_via is not None:
        reader = reader.option("latestOffsetsVia", latest_via)
    rows = sorted((r.partition, r.offset, bytes(r.value)) for r in reader.load().collect())
    assert rows == [(p, i, f"{p}-{i}".encode()) for p in (0, 1) for i in range(10)]


def _topic_with_a_later_batch_written_first(broker, deadline_s=90.0):
    """A one-partition Tansu topic whose ListOffsets EARLIEST is wrong: a large batch takes
    offset 0 while small batches, produced at the same time, get later offsets and finish
    being stored first (Tansu answers EARLIEST from the oldest-stored batch: tests/README.md,
    Tansu deviation 15). A race, so topics are tried until one shows it (a few seconds:
    about 1 round in 40 on this machine). Returns (topic, records, wrong earliest)."""
    import threading
    import time

    from kafka_ds.client import EARLIEST, KafkaClient
    from kafka_ds.protocol.records_encode import encode_record_batch
    from tests.integration.test_client import _produce_batches

    big = encode_record_batch(keys=None, values=[b"x" * 1000] * 4000)
    small = encode_record_batch(keys=None, values=[b"y"] * 3)
    started = time.monotonic()
    attempt = 0
    while time.monotonic() - started < deadline_s:
        topic = broker.unique_topic("early")
        broker.create_topic(topic, partitions=1)
        done = threading.Event()
        produced = []

        def produce(batch, count, again, delay=0.0, topic=topic, produced=produced, done=done):
            time.sleep(delay)
            client = KafkaClient(broker.bootstrap_servers)
            try:
                while True:
                    _produce_batches(client, topic, 0, [batch])
                    produced.append(count)
                    if not again or done.is_set():
                        break
            finally:
                client.close()

        # The small producers start a little after the large one, at a delay that sweeps
        # over the time the broker takes to receive the large request.
        delay = (attempt % 30) * 0.002
        smalls = [threading.Thread(target=produce, args=(small, 3, True, delay)) for _ in range(2)]
        for thread in smalls:
            thread.start()
        produce(big, 4000, False)
        done.set()
        for thread in smalls:
            thread.join()
        client = KafkaClient(broker.bootstrap_servers)
        try:
            earliest = client.list_offsets({(topic, 0): EARLIEST})[(topic, 0)][0]
        finally:
            client.close()
        if earliest != 0:
            return topic, sum(produced), earliest
        broker.delete_topic(topic, wait=False)
        attempt += 1
    pytest.fail(
        f"Tansu answered ListOffsets EARLIEST correctly in all {attempt} rounds "
        f"({deadline_s:.0f} s): the race this test needs did not happen"
    )


@pytest.mark.spark
def test_earliest_offset_when_a_later_batch_was_stored_first(spark, tansu_broker):
    """On Tansu, the demo's broker (a deviation Apache Kafka does not have): its ListOffsets
    EARLIEST can name a later batch; the default lookup checks it
    against the log start offset of one small Fetch and reads from offset 0, where
    ``latestOffsetsVia=listOffsets`` (Spark's lookup alone) silently skips the batch."""
    from kafka_ds.client import make_client
    from kafka_ds.options import parse_read_options
    from kafka_ds.read.planner import OffsetPlanner

    topic, records, wrong = _topic_with_a_later_batch_written_first(tansu_broker)
    try:
        assert wrong > 0
        for via, expected in (("auto", 0), ("listOffsets", wrong)):
            opts = parse_read_options(
                {
                    "kafka.bootstrap.servers": tansu_broker.bootstrap_servers,
                    "subscribe": topic,
                    "latestOffsetsVia": via,
                },
                streaming=False,
            )
            client = make_client(opts)
            try:
                assert OffsetPlanner(opts, client).earliest([(topic, 0)]) == {(topic, 0): expected}
            finally:
                client.close()
        rows = (
            spark.read.format("pykafka")
            .option("kafka.bootstrap.servers", tansu_broker.bootstrap_servers)
            .option("subscribe", topic)
            .load()
            .selectExpr("min(offset)", "max(offset)", "count(*)")
            .collect()
        )
        assert tuple(rows[0]) == (0, records - 1, records)
    finally:
        tansu_broker.delete_topic(topic, wait=False)


# --- records larger than the fetch limits (KIP-74) ---------------------------------------------


def test_records_larger_than_the_fetch_limits_batch_and_stream(spark, broker, new_topic, tmp_path):
    """2 MiB records with kafka.max.partition.fetch.bytes and kafka.fetch.max.bytes at 1 KiB:
    a batch read and a streaming read (AvailableNow) get every record, byte-exact.
    Fetch sizes and answers: tests/integration/test_client.py::
    test_records_larger_than_both_fetch_limits_are_read."""
    import hashlib

    from tests.support.brokers import produce_confluent

    topic = new_topic(partitions=1, config={"max.message.bytes": str(4 << 20)})
    values = [b"a", bytes(range(256)) * 8192, b"b", b"\x07" * (2 << 20), b"c"]
    produce_confluent(
        broker.bootstrap_servers,
        topic,
        values,
        partition=0,
        **{"message.max.bytes": 8 << 20, "linger.ms": 0, "batch.num.messages": 1},
    )
    limits = {
        "kafka.bootstrap.servers": broker.bootstrap_servers,
        "subscribe": topic,
        "kafka.max.partition.fetch.bytes": "1024",
        "kafka.fetch.max.bytes": "1024",
    }
    expected = [(i, len(v), hashlib.sha256(v).hexdigest()) for i, v in enumerate(values)]

    def digest(df):
        return df.selectExpr("offset", "length(value) AS n", "sha2(value, 256) AS h")

    batch = digest(spark.read.format("pykafka").options(**limits).load())
    assert sorted(tuple(r) for r in batch.collect()) == expected
    name = topic.replace("-", "_")
    query = (
        digest(
            spark.readStream.format("pykafka").options(**limits, startingOffsets="earliest").load()
        )
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "AvailableNow query did not finish"
    assert query.exception() is None, query.exception()
    assert sorted(tuple(r) for r in spark.table(name).collect()) == expected
