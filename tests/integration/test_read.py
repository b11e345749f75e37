"""The batch read without Spark: the planner and ``read_range`` on both brokers, and
timestamp offsets on a fake broker whose ListOffsets looks timestamps up (neither test
broker does). The dataset here is also the one tests/spark/test_read.py reads with
``spark.read.format("pykafka")``.

One dataset per broker: topic ``a`` (3 partitions; on the mock each led by a different
broker) and topic ``b`` (2 partitions), every partition written by confluent-kafka
with a different codec, some records with headers.
"""

import datetime as dt
import json
import uuid

import pytest

from kafka_ds.columns import spark_ddl
from kafka_ds.errors import ConfigurationError, DataLossError
from kafka_ds.source import KafkaDataSource
from tests.support.brokers import produce_confluent

BASE_TS = 1_700_000_000_000
CODEC_OF = {
    ("a", 0): "gzip",
    ("a", 1): "snappy",
    ("a", 2): "lz4",
    ("b", 0): "zstd",
    ("b", 1): "none",
}
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
        self.rows = []  # (key, value, topic, partition, offset, timestamp, type, headers)
        for (short, partition), codec in CODEC_OF.items():
            topic = self.topics[short]
            records = []
            for i in range(RECORDS_PER_PARTITION[(short, partition)]):
                headers = [("i", str(i).encode()), ("i", None)] if i % 4 == 0 else None
                records.append(
                    {
                        "key": None if i % 5 == 0 else f"{short}{partition}-{i}".encode(),
                        "value": None if i == 3 else bytes([i]) * i,
                        "headers": headers,
                        "timestamp_ms": BASE_TS + i * 1000,
                    }
                )
            # One record per batch: Tansu's ListOffsets LATEST is wrong after a
            # multi-record batch (tests/README.md, Tansu deviation 1).
            offsets = produce_confluent(
                self.bootstrap,
                topic,
                records,
                compression=codec,
                partition=partition,
                **{"batch.num.messages": 1},
            )
            for r, (_p, offset) in zip(records, offsets, strict=True):
                self.rows.append(
                    (
                        r["key"],
                        r["value"],
                        topic,
                        partition,
                        offset,
                        dt.datetime.fromtimestamp(r["timestamp_ms"] / 1000, dt.timezone.utc),
                        0,
                        [(k, v) for k, v in r["headers"]] if r["headers"] else None,
                    )
                )

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
        return {
            "assign": json.dumps(
                {
                    t: sorted(p for s, p in CODEC_OF if self.topics[s] == t)
                    for t in self.topics.values()
                }
            )
        }

    def expected(self, spark, keep=lambda row: True, include_headers=False):
        rows = [r if include_headers else r[:7] for r in self.rows if keep(r)]
        return spark.createDataFrame(rows, spark_ddl(include_headers))


@pytest.fixture(scope="module", params=["mock", "kafka"])
def data(request, _brokers):
    return Dataset(_brokers.get(request.param))


# --- data loss between planning and reading ----------------------------------------------------


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_topic_deleted_between_plan_and_read(broker, new_topic, fail_on_data_loss):
    topic = new_topic(partitions=1)
    produce_confluent(
        broker.bootstrap_servers, topic, [b"x"] * 10, partition=0, **{"batch.num.messages": 1}
    )
    source = KafkaDataSource(
        {
            "kafka.bootstrap.servers": broker.bootstrap_servers,
            "subscribe": topic,
            "failOnDataLoss": fail_on_data_loss,
            "kafka.retries": "2",
            "kafka.retry.backoff.ms": "50",
        }
    )
    reader = source.reader(None)
    partitions = reader.partitions()
    assert [(p.topic, p.partition, p.start, p.end) for p in partitions] == [(topic, 0, 0, 10)]
    broker.delete_topic(topic, wait=True)
    if fail_on_data_loss == "true":
        with pytest.raises(Exception, match=f"{topic}-0.*failOnDataLoss"):
            list(reader.read(partitions[0]))
    else:
        assert list(reader.read(partitions[0])) == []


# --- records deleted under a read ---------------------------------------------------------------
# The librdkafka mock keeps ~5 MiB of each partition and drops its oldest batches beyond
# that: a retention by size, the one way a test broker here deletes records (neither the
# mock nor Tansu 0.6 serves DeleteRecords, and Tansu's memory storage keeps everything).
# A broker that skips deleted records without OFFSET_OUT_OF_RANGE: a fake broker,
# tests/integration/test_client.py::test_records_a_broker_skips_below_its_log_start_are_data_loss.


def age_out(broker, topic, megabytes=6):
    """Produce ``megabytes`` records of 1 MiB to partition 0: the mock drops the oldest."""
    return produce_confluent(
        broker.bootstrap_servers,
        topic,
        [b"x" * (1 << 20)] * megabytes,
        partition=0,
        **{"batch.num.messages": 1, "linger.ms": 0, "message.max.bytes": 2 << 20},
    )


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_records_aged_out_between_plan_and_read(mock_cluster, fail_on_data_loss, caplog):
    topic = mock_cluster.unique_topic("aged")
    mock_cluster.create_topic(topic, partitions=1)
    produce_confluent(
        mock_cluster.bootstrap_servers,
        topic,
        [b"s%d" % i for i in range(10)],
        partition=0,
        **{"batch.num.messages": 1},
    )
    source = KafkaDataSource(
        {
            "kafka.bootstrap.servers": mock_cluster.bootstrap_servers,
            "subscribe": topic,
            "failOnDataLoss": fail_on_data_loss,
            "startingOffsets": json.dumps({topic: {"0": 2}}),
        }
    )
    reader = source.reader(None)
    [piece] = reader.partitions()
    assert (piece.start, piece.end) == (2, 10)
    placed = age_out(mock_cluster, topic)
    earliest = 16 - 4  # the mock kept the last 4 MiB records
    assert placed[-1] == (0, 15)
    if fail_on_data_loss == "true":
        with pytest.raises(
            DataLossError,
            match=rf"Offsets \[2, {earliest}\) of {topic}-0 are no "
            rf"longer available \(earliest is {earliest}\).*"
            "failOnDataLoss",
        ):
            list(reader.read(piece))
    else:
        with caplog.at_level("WARNING", logger="kafka_ds"):
            batches = list(reader.read(piece))
        # The task reads up to the latest offset of its time (Spark's batch read resolves
        # "latest" when the scan runs): what is left of the range, from the earliest on.
        assert [o for b in batches for o in b.column("offset").to_pylist()] == list(
            range(earliest, 16)
        )
        assert [
            r.levelname
            for r in caplog.records
            if f"Offsets [2, {earliest}) of {topic}-0 are no longer available" in r.getMessage()
            and "failOnDataLoss=false" in r.getMessage()
        ] == ["WARNING"]
    mock_cluster.delete_topic(topic, wait=False)


# --- brokers whose ListOffsets lags --------------------------------------------------------------


def test_latest_offsets_check_is_one_fetch_per_leader(broker, new_topic):
    """Planning checks ListOffsets against Fetch with one request per leader, whatever
    the number of partitions: one Fetch serves the check of the ``earliest`` starts and of
    the ``latest`` ends."""
    from kafka_ds.client import KafkaClient
    from kafka_ds.options import parse_read_options
    from kafka_ds.protocol import messages as m
    from kafka_ds.read.planner import OffsetPlanner

    topic = new_topic(partitions=12)
    produce_confluent(broker.bootstrap_servers, topic, [{"value": b"v%d" % i} for i in range(60)])
    opts = parse_read_options(
        {"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic}, streaming=False
    )
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


# --- timestamp offsets, where the test brokers cannot answer ------------------------------


def _timestamp_cluster(first_offset_at_or_after):
    """A one-node cluster on a real socket whose ListOffsets implements the timestamp
    lookup Kafka does (neither test broker does: tests/README.md). Partitions 0 and 1 of
    topic "ts" hold offsets [0, 100) with timestamps BASE_TS + offset * 1000."""
    from kafka_ds.protocol import messages as m
    from kafka_ds.protocol.schema import decode_request, encode_response
    from tests.support.fakebroker import serve_cluster

    def list_offsets(version, correlation_id, frame, conn):
        _header, body = decode_request(m.LIST_OFFSETS, frame)
        conn.sendall(
            encode_response(
                m.LIST_OFFSETS,
                version,
                correlation_id,
                {
                    "topics": [
                        {
                            "name": t["name"],
                            "partitions": [
                                {
                                    "partition_index": p["partition_index"],
                                    "error_code": 0,
                                    "timestamp": -1,
                                    "offset": first_offset_at_or_after(p["timestamp"]),
                                }
                                for p in t["partitions"]
                            ],
                        }
                        for t in body["topics"]
                    ]
                },
            )
        )

    def fetch(version, correlation_id, frame, conn):
        # The check of ``latest`` ends (latestOffsetsVia=auto): the high watermark is 100.
        _header, body = decode_request(m.FETCH, frame)
        conn.sendall(
            encode_response(
                m.FETCH,
                version,
                correlation_id,
                {
                    "responses": [
                        {
                            "topic": t["topic"],
                            "partitions": [
                                {
                                    "partition_index": p["partition"],
                                    "error_code": 0,
                                    "high_watermark": 100,
                                    "last_stable_offset": 100,
                                    "records": b"",
                                }
                                for p in t["partitions"]
                            ],
                        }
                        for t in body["topics"]
                    ]
                },
            )
        )

    return serve_cluster({"ts": 2}, {2: list_offsets, 1: fetch})


def _lookup(ts):
    if ts == -2:
        return 0
    if ts == -1:
        return 100
    offset = max(0, -(-(ts - BASE_TS) // 1000))  # first record at or after ts
    return offset if offset < 100 else -1


@pytest.mark.parametrize(
    "options,ranges",
    [
        (
            {"startingTimestamp": BASE_TS + 10_500, "endingTimestamp": BASE_TS + 20_000},
            [("ts", 0, 11, 20), ("ts", 1, 11, 20)],
        ),
        (
            {
                "startingOffsetsByTimestamp": json.dumps(
                    {"ts": {"0": BASE_TS, "1": BASE_TS + 50_000}}
                ),
                "endingOffsetsByTimestamp": json.dumps(
                    {"ts": {"0": BASE_TS + 3_000, "1": BASE_TS + 999_000}}
                ),
            },
            [("ts", 0, 0, 3), ("ts", 1, 50, 100)],
        ),  # no record after the end: latest
        # Start at latest: empty now, but their end is "latest", resolved again by every
        # action (as Spark plans per action), so each keeps one task.
        (
            {
                "startingTimestamp": BASE_TS + 999_000,
                "startingOffsetsByTimestampStrategy": "latest",
            },
            [("ts", 0, 100, 100), ("ts", 1, 100, 100)],
        ),
    ],
)
def test_timestamp_offsets_are_planned_from_list_offsets(options, ranges):
    fake = _timestamp_cluster(_lookup)
    try:
        # The fake's Fetch carries no records to check the answer against: trust it.
        source = KafkaDataSource(
            {
                "kafka.bootstrap.servers": fake.address,
                "subscribe": "ts",
                "timestampOffsetsVia": "listOffsets",
                **{k: str(v) for k, v in options.items()},
            }
        )
        planned = source.reader(None).partitions()
        assert [(p.topic, p.partition, p.start, p.end) for p in planned] == ranges
    finally:
        fake.close()


def test_timestamp_without_match_fails_by_default():
    fake = _timestamp_cluster(_lookup)
    try:
        # The fake's Fetch carries no records to check the answer against: trust it.
        source = KafkaDataSource(
            {
                "kafka.bootstrap.servers": fake.address,
                "subscribe": "ts",
                "timestampOffsetsVia": "listOffsets",
                "startingTimestamp": str(BASE_TS + 999_000),
            }
        )
        with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy"):
            source.reader(None).partitions()
    finally:
        fake.close()


# --- the planner's offset lookups --------------------------------------------------------------


def test_planner_earliest_latest_and_specific(data):
    from kafka_ds.client import LATEST, make_client
    from kafka_ds.options import parse_read_options
    from kafka_ds.read.planner import OffsetPlanner

    a, b = data.topics["a"], data.topics["b"]
    opts = parse_read_options(
        {
            "kafka.bootstrap.servers": data.bootstrap,
            "subscribe": f"{a},{b}",
            "startingOffsets": json.dumps({a: {"0": 5, "1": -2, "2": -1}, b: {"0": -1, "1": 3}}),
        },
        streaming=True,
    )  # (a batch query refuses -1 to start)
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
            **resolved,
            (a, 2): LATEST,
            (b, 0): LATEST,
        }
        with pytest.raises(ConfigurationError, match="must name every subscribed partition"):
            planner.specific(opts.starting, tps + [(a, 9)])
    finally:
        client.close()
