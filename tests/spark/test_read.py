"""spark.read.format("pykafka") on both brokers, compared with chispa.

One dataset per broker: topic ``a`` (3 partitions; on the mock each led by a different
broker) and topic ``b`` (2 partitions), every partition written by confluent-kafka
with a different codec, some records with headers.
"""
import datetime as dt
import json
import uuid

import pytest
from chispa import assert_df_equality

from kafka_ds.errors import ConfigurationError
from kafka_ds.columns import spark_ddl
from kafka_ds.source import KafkaDataSource
from tests.support.brokers import produce_confluent
from tests.support.spark_support import spark  # noqa: F401  (fixture)

BASE_TS = 1_700_000_000_000
CODEC_OF = {("a", 0): "gzip", ("a", 1): "snappy", ("a", 2): "lz4", ("b", 0): "zstd",
            ("b", 1): "none"}
RECORDS_PER_PARTITION = {("a", 0): 30, ("a", 1): 25, ("a", 2): 40, ("b", 0): 20, ("b", 1): 6}


class Dataset:
    def __init__(self, broker):
        self.broker = broker
        self.bootstrap = broker.bootstrap_servers
        stem = f"rd{uuid.uuid4().hex[:8]}"
        self.topics = {"a": f"{stem}-a", "b": f"{stem}-b"}
        self.pattern = f"{stem}-[ab]"
        broker.create_topic(self.topics["a"], partitions=3)
        broker.create_topic(self.topics["b"], partitions=2)
        self.rows = []   # (key, value, topic, partition, offset, timestamp, type, headers)
        for (short, partition), codec in CODEC_OF.items():
            topic = self.topics[short]
            records = []
            for i in range(RECORDS_PER_PARTITION[(short, partition)]):
                headers = [("i", str(i).encode()), ("i", None)] if i % 4 == 0 else None
                records.append({"key": None if i % 5 == 0 else f"{short}{partition}-{i}".encode(),
                                "value": None if i == 3 else bytes([i]) * i,
                                "headers": headers, "timestamp_ms": BASE_TS + i * 1000})
            # One record per batch: Tansu's ListOffsets LATEST is wrong after a
            # multi-record batch (tests/README.md, Tansu deviation 1).
            offsets = produce_confluent(self.bootstrap, topic, records, compression=codec,
                                        partition=partition, **{"batch.num.messages": 1})
            for r, (_p, offset) in zip(records, offsets):
                self.rows.append((r["key"], r["value"], topic, partition, offset,
                                  dt.datetime.fromtimestamp(r["timestamp_ms"] / 1000, dt.timezone.utc),
                                  0, [(k, v) for k, v in r["headers"]] if r["headers"] else None))

    def reader(self, spark, **options):
        reader = spark.read.format("pykafka").option("kafka.bootstrap.servers", self.bootstrap)
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader

    def subscription(self, kind):
        if kind == "subscribe":
            return {"subscribe": ",".join(self.topics.values())}
        if kind == "subscribePattern":
            return {"subscribePattern": self.pattern}
        return {"assign": json.dumps({t: sorted(p for s, p in CODEC_OF if self.topics[s] == t)
                                      for t in self.topics.values()})}

    def expected(self, spark, keep=lambda row: True, include_headers=False):
        rows = [r if include_headers else r[:7] for r in self.rows if keep(r)]
        return spark.createDataFrame(rows, spark_ddl(include_headers))


@pytest.fixture(scope="module", params=["mock", "tansu"])
def data(request, _brokers):
    return Dataset(_brokers.get(request.param))


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
    end = {a: {"0": 20, "1": -1, "2": 40}, b: {"0": -1, "1": 3}}   # b-1 is an empty range
    bounds = {(t, int(p)): (s, end[t][p]) for t, ps in start.items() for p, s in ps.items()}
    counts = {(data.topics[s], p): n for (s, p), n in RECORDS_PER_PARTITION.items()}

    def keep(row):
        lo, hi = bounds[(row[2], row[3])]
        lo = 0 if lo == -2 else lo
        hi = counts[(row[2], row[3])] if hi == -1 else hi
        return lo <= row[4] < hi

    df = data.reader(spark, startingOffsets=json.dumps(start), endingOffsets=json.dumps(end),
                     **data.subscription(kind)).load()
    assert_same_rows(df, data.expected(spark, keep))


@pytest.mark.parametrize("kind", SUBSCRIPTIONS)
def test_offsets_by_timestamp(spark, data, kind):
    # Neither broker answers ListOffsets by timestamp (tests/README.md, mock deviation 2,
    # Tansu deviation 2): timestampOffsetsVia=auto checks the answer and searches by Fetch.
    start_ts, end_ts = BASE_TS + 4 * 1000, BASE_TS + 22 * 1000
    df = data.reader(spark, startingTimestamp=str(start_ts), endingTimestamp=str(end_ts),
                     **data.subscription(kind)).load()
    ms = lambda row: int(row[5].timestamp() * 1000)  # noqa: E731
    assert_same_rows(df, data.expected(spark, lambda r: start_ts <= ms(r) < end_ts))


# --- splitting ----------------------------------------------------------------------------

@pytest.mark.parametrize("option,value,tasks", [
    ("minPartitions", "12", 12),            # 121 records over 5 ranges -> 12 proportional parts
    ("maxRecordsPerPartition", "7", 19),    # ceil(30/7)+ceil(25/7)+ceil(40/7)+ceil(20/7)+1
])
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
    df = data.reader(spark, assign=json.dumps({a: [0]}), startingOffsets=same,
                     endingOffsets=same).load()
    assert df.rdd.getNumPartitions() == 0 or df.count() == 0
    assert_same_rows(df, data.expected(spark, lambda r: False))


# --- planned errors ---------------------------------------------------------------------------

BAD_OPTIONS = [
    ({}, "One of the following options must be specified for Kafka source"),
    ({"subscribe": "x", "assign": '{"x":[0]}'}, "Only one of the following options can be specified"),
    ({"assign": "[1,2]"}, "No topicpartitions to assign as specified value for option 'assign'"),
    ({"subscribePattern": "("}, "Option 'subscribePattern' is not a valid regex"),
    ({"subscribe": "x", "startingOffsets": "latest"}, "cannot be 'latest' for a batch query"),
    ({"subscribe": "x", "endingOffsets": "earliest"}, "Option 'endingOffsets' cannot be 'earliest'"),
    ({"subscribe": "x", "startingOffsets": "{bad"}, "Option 'startingOffsets' is not valid JSON"),
    ({"subscribe": "x", "kafka.auto.offset.reset": "earliest"},
     "Kafka option 'auto.offset.reset' is not supported"),
    ({"subscribe": "x", "kafka.value.deserializer": "x"}, "Kafka option 'value.deserializer' is not supported"),
    ({"subscribe": "x", "kafka.enable.auto.commit": "true"}, "Kafka option 'enable.auto.commit' is not supported"),
    ({"subscribe": "x", "kafka.interceptor.classes": "x"}, "Kafka option 'interceptor.classes' is not supported"),
    ({"subscribe": "x", "minPartitions": "0"}, "minPartitions"),
    ({"subscribe": "x", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"subscribe": "x", "kafka.request.timeout.ms": "30s"},
     "Option 'kafka.request.timeout.ms' must be an integer, got '30s'"),
    ({"subscribe": "x", "kafka.isolation.level": "dirty"}, "'kafka.isolation.level' must be"),
    ({"subscribe": "x", "startingOffsetsByTimestampStrategy": "skip"},
     "'startingOffsetsByTimestampStrategy' must be 'error' or 'latest'"),
]


@pytest.mark.parametrize("options,message", BAD_OPTIONS, ids=[str(i) for i in range(len(BAD_OPTIONS))])
def test_bad_options_fail_at_planning(spark, mock_cluster, options, message):
    reader = spark.read.format("pykafka").option("kafka.bootstrap.servers",
                                                 mock_cluster.bootstrap_servers)
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace("[", r"\[")):
        reader.load().collect()


def test_option_keys_are_case_insensitive_and_bootstrap_is_required(spark, data):
    df = (spark.read.format("pykafka").option("KAFKA.BOOTSTRAP.SERVERS", data.bootstrap)
          .option("SUBSCRIBE", data.topics["b"]).option("STARTINGOFFSETS", "earliest").load())
    assert_same_rows(df, data.expected(spark, lambda r: r[2] == data.topics["b"]))
    with pytest.raises(Exception, match="Option 'kafka.bootstrap.servers' must be set"):
        spark.read.format("pykafka").option("subscribe", "x").load().collect()


def test_custom_schema_is_rejected(spark, mock_cluster):
    with pytest.raises(Exception, match="fixed schema"):
        (spark.read.format("pykafka").schema("value string")
         .option("kafka.bootstrap.servers", mock_cluster.bootstrap_servers)
         .option("subscribe", "x").load().collect())


def test_unreachable_bootstrap_fails_with_a_clear_message(spark, mock_cluster):
    from tests.support.brokers import free_port
    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(Exception, match="cannot reach any broker of kafka.bootstrap.servers"):
        (spark.read.format("pykafka").option("kafka.bootstrap.servers", address)
         .option("subscribe", "x").option("kafka.socket.connection.setup.timeout.ms", "1000")
         .option("fetchOffset.numRetries", "0")
         # the planning budget (60 s by default) bounds the retries of an unreachable
         # bootstrap list; 3 s are enough to see the same error
         .option("kafka.default.api.timeout.ms", "3000").load().collect())


# --- data loss between planning and reading ----------------------------------------------------

@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_topic_deleted_between_plan_and_read(broker, new_topic, fail_on_data_loss):
    topic = new_topic(partitions=1)
    produce_confluent(broker.bootstrap_servers, topic, [b"x"] * 10, partition=0,
                      **{"batch.num.messages": 1})
    source = KafkaDataSource({"kafka.bootstrap.servers": broker.bootstrap_servers,
                              "subscribe": topic, "failOnDataLoss": fail_on_data_loss,
                              "kafka.retries": "2", "kafka.retry.backoff.ms": "50"})
    reader = source.reader(None)
    partitions = reader.partitions()
    assert [(p.topic, p.partition, p.start, p.end) for p in partitions] == [(topic, 0, 0, 10)]
    broker.delete_topic(topic, wait=True)
    if fail_on_data_loss == "true":
        with pytest.raises(Exception, match=f"{topic}-0.*failOnDataLoss"):
            list(reader.read(partitions[0]))
    else:
        assert list(reader.read(partitions[0])) == []


# --- brokers whose ListOffsets lags --------------------------------------------------------------

@pytest.mark.parametrize("latest_via", [None, "auto", "fetch", "listOffsets"])
def test_latest_offsets_after_multi_record_batches(spark, broker, new_topic, latest_via):
    """The default lookup (``auto``: ListOffsets checked against one small Fetch per
    leader) and ``fetch`` read everything on both brokers, including Tansu, whose
    ListOffsets LATEST stops at the last batch's first record (tests/README.md).
    ``listOffsets`` alone is Spark's lookup: complete on the mock, short on Tansu."""
    import pyarrow as pa

    from kafka_ds.client import KafkaClient
    from kafka_ds.protocol.records_encode import encode_record_batch
    from tests.integration.test_client import _produce_batches

    topic = new_topic(partitions=2)
    client = KafkaClient(broker.bootstrap_servers)
    try:
        for partition in (0, 1):
            for start in (0, 5):
                _produce_batches(client, topic, partition, [encode_record_batch(
                    keys=None, values=pa.array([f"{partition}-{i}".encode()
                                                for i in range(start, start + 5)]),
                    timestamps_ms=pa.array([BASE_TS] * 5, pa.int64()))])
    finally:
        client.close()
    reader = (spark.read.format("pykafka").option("kafka.bootstrap.servers",
                                                  broker.bootstrap_servers)
              .option("subscribe", topic))
    if latest_via is not None:
        reader = reader.option("latestOffsetsVia", latest_via)
    rows = sorted((r.partition, r.offset, bytes(r.value)) for r in reader.load().collect())
    # Tansu's ListOffsets answers base offset + 1 of the last batch: offset 6 of 10.
    last = 6 if (latest_via == "listOffsets" and broker.name == "tansu") else 10
    assert rows == [(p, i, f"{p}-{i}".encode()) for p in (0, 1) for i in range(last)]


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

        def produce(batch, count, again, delay=0.0):
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
    pytest.fail(f"Tansu answered ListOffsets EARLIEST correctly in all {attempt} rounds "
                f"({deadline_s:.0f} s): the race this test needs did not happen")


@pytest.mark.spark
def test_earliest_offset_when_a_later_batch_was_stored_first(spark, tansu_broker):
    """Tansu's ListOffsets EARLIEST can name a later batch; the default lookup checks it
    against the log start offset of one small Fetch and reads from offset 0, where
    ``latestOffsetsVia=listOffsets`` (Spark's lookup alone) silently skips the batch."""
    from kafka_ds.options import parse_read_options
    from kafka_ds.read.planner import OffsetPlanner
    from kafka_ds.client import make_client

    topic, records, wrong = _topic_with_a_later_batch_written_first(tansu_broker)
    try:
        assert wrong > 0
        for via, expected in (("auto", 0), ("listOffsets", wrong)):
            opts = parse_read_options({"kafka.bootstrap.servers": tansu_broker.bootstrap_servers,
                                       "subscribe": topic, "latestOffsetsVia": via},
                                      streaming=False)
            client = make_client(opts)
            try:
                assert OffsetPlanner(opts, client).earliest([(topic, 0)]) == {(topic, 0): expected}
            finally:
                client.close()
        rows = (spark.read.format("pykafka")
                .option("kafka.bootstrap.servers", tansu_broker.bootstrap_servers)
                .option("subscribe", topic).load()
                .selectExpr("min(offset)", "max(offset)", "count(*)").collect())
        assert tuple(rows[0]) == (0, records - 1, records)
    finally:
        tansu_broker.delete_topic(topic, wait=False)


def test_latest_offsets_check_is_one_fetch_per_leader(broker, new_topic):
    """Planning checks ListOffsets against Fetch with one request per leader, whatever
    the number of partitions: one Fetch serves the check of the ``earliest`` starts and of
    the ``latest`` ends."""
    from kafka_ds.client import KafkaClient
    from kafka_ds.protocol import messages as m
    from kafka_ds.options import parse_read_options
    from kafka_ds.read.planner import OffsetPlanner

    topic = new_topic(partitions=12)
    produce_confluent(broker.bootstrap_servers, topic,
                      [{"value": b"v%d" % i} for i in range(60)])
    opts = parse_read_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                               "subscribe": topic}, streaming=False)
    client = KafkaClient(broker.bootstrap_servers)
    sent = []
    real = client.connection

    def counting(node_id):
        conn = real(node_id)
        original = conn.request
        if not getattr(original, "counted", False):
            def request(message, body, **kw):
                sent.append((message.name, node_id))
                return original(message, body, **kw)
            request.counted = True
            conn.request = request
        return conn
    client.connection = counting
    try:
        ranges = OffsetPlanner(opts, client).plan_batch()
    finally:
        client.close()
    assert sum(r.size for r in ranges) == 60
    leaders = {leader for _t, (leader, _r) in broker.topic_metadata(topic).items()}
    fetches = sorted(node for name, node in sent if name == m.FETCH.name)
    assert fetches == sorted(leaders)


# --- timestamp offsets, where the test brokers cannot answer ---------------------------------------

def _timestamp_cluster(first_offset_at_or_after):
    """A one-node cluster on a real socket whose ListOffsets implements the timestamp
    lookup Kafka does (neither test broker does: tests/README.md). Partitions 0 and 1 of
    topic "ts" hold offsets [0, 100) with timestamps BASE_TS + offset * 1000."""
    from tests.support.fakebroker import serve_cluster
    from kafka_ds.protocol import messages as m
    from kafka_ds.protocol.schema import decode_request, encode_response

    def list_offsets(version, correlation_id, frame, conn):
        _header, body = decode_request(m.LIST_OFFSETS, frame)
        conn.sendall(encode_response(m.LIST_OFFSETS, version, correlation_id, {"topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": 0, "timestamp": -1,
                 "offset": first_offset_at_or_after(p["timestamp"])}
                for p in t["partitions"]]} for t in body["topics"]]}))

    def fetch(version, correlation_id, frame, conn):
        # The check of ``latest`` ends (latestOffsetsVia=auto): the high watermark is 100.
        _header, body = decode_request(m.FETCH, frame)
        conn.sendall(encode_response(m.FETCH, version, correlation_id, {"responses": [
            {"topic": t["topic"], "partitions": [
                {"partition_index": p["partition"], "error_code": 0, "high_watermark": 100,
                 "last_stable_offset": 100, "records": b""}
                for p in t["partitions"]]} for t in body["topics"]]}))

    return serve_cluster({"ts": 2}, {2: list_offsets, 1: fetch})


def _lookup(ts):
    if ts == -2:
        return 0
    if ts == -1:
        return 100
    offset = max(0, -(-(ts - BASE_TS) // 1000))   # first record at or after ts
    return offset if offset < 100 else -1


@pytest.mark.parametrize("options,ranges", [
    ({"startingTimestamp": BASE_TS + 10_500, "endingTimestamp": BASE_TS + 20_000},
     [("ts", 0, 11, 20), ("ts", 1, 11, 20)]),
    ({"startingOffsetsByTimestamp": json.dumps({"ts": {"0": BASE_TS, "1": BASE_TS + 50_000}}),
      "endingOffsetsByTimestamp": json.dumps({"ts": {"0": BASE_TS + 3_000,
                                                     "1": BASE_TS + 999_000}})},
     [("ts", 0, 0, 3), ("ts", 1, 50, 100)]),     # no record after the end: latest
    # Start at latest: empty now, but their end is "latest", resolved again by every
    # action (as Spark plans per action), so each keeps one task.
    ({"startingTimestamp": BASE_TS + 999_000, "startingOffsetsByTimestampStrategy": "latest"},
     [("ts", 0, 100, 100), ("ts", 1, 100, 100)]),
])
def test_timestamp_offsets_are_planned_from_list_offsets(options, ranges):
    fake = _timestamp_cluster(_lookup)
    try:
        # The fake's Fetch carries no records to check the answer against: trust it.
        source = KafkaDataSource({"kafka.bootstrap.servers": fake.address, "subscribe": "ts",
                                  "timestampOffsetsVia": "listOffsets",
                                  **{k: str(v) for k, v in options.items()}})
        planned = source.reader(None).partitions()
        assert [(p.topic, p.partition, p.start, p.end) for p in planned] == ranges
    finally:
        fake.close()


def test_timestamp_without_match_fails_by_default():
    fake = _timestamp_cluster(_lookup)
    try:
        # The fake's Fetch carries no records to check the answer against: trust it.
        source = KafkaDataSource({"kafka.bootstrap.servers": fake.address, "subscribe": "ts",
                                  "timestampOffsetsVia": "listOffsets",
                                  "startingTimestamp": str(BASE_TS + 999_000)})
        with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy"):
            source.reader(None).partitions()
    finally:
        fake.close()


# --- the planner's offset lookups --------------------------------------------------------------

def test_planner_earliest_latest_and_specific(data):
    from kafka_ds.client import LATEST
    from kafka_ds.options import parse_read_options
    from kafka_ds.read.planner import OffsetPlanner
    from kafka_ds.client import make_client

    a, b = data.topics["a"], data.topics["b"]
    opts = parse_read_options({"kafka.bootstrap.servers": data.bootstrap, "subscribe": f"{a},{b}",
                               "startingOffsets": json.dumps({a: {"0": 5, "1": -2, "2": -1},
                                                              b: {"0": -1, "1": 3}})},
                              streaming=True)     # (a batch query refuses -1 to start)
    client = make_client(opts)
    try:
        planner = OffsetPlanner(opts, client)
        tps = planner.topic_partitions()
        counts = {(data.topics[s], p): n for (s, p), n in RECORDS_PER_PARTITION.items()}
        assert sorted(tps) == sorted(counts)
        assert planner.earliest(tps) == {tp: 0 for tp in tps}
        assert planner.latest(tps) == counts
        assert planner.latest([]) == {} and planner.earliest([]) == {}
        resolved = {(a, 0): 5, (a, 1): 0, (a, 2): counts[(a, 2)], (b, 0): counts[(b, 0)], (b, 1): 3}
        assert planner.specific(opts.starting, tps) == resolved
        assert planner.resolve(opts.starting, tps, start=True) == resolved
        # a stream keeps -1 as the LATEST marker until its first batch
        assert planner.specific(opts.starting, tps, keep_latest=True) == {
            **resolved, (a, 2): LATEST, (b, 0): LATEST}
        with pytest.raises(ConfigurationError, match="must name every subscribed partition"):
            planner.specific(opts.starting, tps + [(a, 9)])
    finally:
        client.close()
