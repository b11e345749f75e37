"""Every timestamp option end to end on both brokers, neither of which answers ListOffsets
by timestamp (tests/README.md: mock deviation 2, Tansu deviation 2): the offsets come from
``timestampOffsetsVia`` (the checked ListOffsets answer, else the Fetch search) and are
compared with a scan of the records as produced (CreateTime set by the producer). The
offsets are checked at planning (no Spark) for every option; through Spark,
tests/spark/test_read.py's ``test_offsets_by_timestamp`` reads by timestamp, and
tests/spark/test_read_by_timestamp.py starts a stream by timestamp."""

import json
import uuid

import pytest

from kafka_ds.client import make_client
from kafka_ds.errors import DataLossError
from kafka_ds.options import parse_read_options
from kafka_ds.read.planner import OffsetPlanner
from tests.support.brokers import produce_confluent

BASE_TS = 1_700_000_000_000
# Partition 0: multi-record batches (the search must look inside a batch); partition 1:
# one record per batch, timestamps twice as far apart.
COUNTS, STEP = {0: 40, 1: 25}, {0: 1000, 1: 2000}


class Topic:
    def __init__(self, broker):
        self.broker = broker
        self.name = f"ts{uuid.uuid4().hex[:8]}"
        broker.create_topic(self.name, partitions=2)
        self.records = {}  # partition -> [(offset, timestamp ms)]
        for partition, count in COUNTS.items():
            records = [
                {
                    "value": f"{partition}-{i}".encode(),
                    "timestamp_ms": BASE_TS + i * STEP[partition],
                }
                for i in range(count)
            ]
            batching = (
                {"batch.num.messages": 1}
                if partition
                else {"batch.num.messages": 7, "linger.ms": 200}
            )
            offsets = produce_confluent(
                broker.bootstrap_servers, self.name, records, partition=partition, **batching
            )
            self.records[partition] = [
                (o, r["timestamp_ms"]) for (_p, o), r in zip(offsets, records, strict=True)
            ]

    def scan(self, partition, timestamp, missing):
        """Kafka's answer: the smallest offset whose timestamp is at or after ``timestamp``,
        else ``missing`` (by offset, not by the order produced, in case a retry reordered)."""
        return min((o for o, ts in self.records[partition] if ts >= timestamp), default=missing)

    def ranges(self, **options):
        opts = parse_read_options(
            {
                "kafka.bootstrap.servers": self.broker.bootstrap_servers,
                "subscribe": self.name,
                **options,
            },
            streaming=False,
        )
        client = make_client(opts)
        try:
            return {
                r.partition: (r.start, r.end) for r in OffsetPlanner(opts, client).batch_ranges()
            }
        finally:
            client.close()

    def rows(self, ranges):
        return sorted(
            (p, o, ts)
            for p, (lo, hi) in ranges.items()
            for o, ts in self.records[p]
            if lo <= o < hi
        )


@pytest.fixture(scope="module", params=["mock", "kafka"])
def topic(request, _brokers):
    return Topic(_brokers.get(request.param))


@pytest.mark.parametrize("via", ["auto", "fetch"])
@pytest.mark.parametrize(
    "start,end",
    [
        (0, 10**15),
        (BASE_TS + 9_500, BASE_TS + 31_000),
        (BASE_TS + 13_000, BASE_TS + 13_001),
        (BASE_TS + 100_000, BASE_TS + 200_000),
    ],
)
def test_global_timestamps_match_a_scan(topic, via, start, end):
    expected = {p: (topic.scan(p, start, n), topic.scan(p, end, n)) for p, n in COUNTS.items()}
    assert (
        topic.ranges(
            startingTimestamp=str(start),
            endingTimestamp=str(end),
            startingOffsetsByTimestampStrategy="latest",
            timestampOffsetsVia=via,
        )
        == expected
    )


def test_timestamps_per_partition_match_a_scan(topic):
    starts = {0: BASE_TS + 3_000, 1: BASE_TS + 7_000}
    ends = {0: BASE_TS + 36_500, 1: BASE_TS + 44_000}
    ranges = topic.ranges(
        startingOffsetsByTimestamp=json.dumps({topic.name: {str(p): t for p, t in starts.items()}}),
        endingOffsetsByTimestamp=json.dumps({topic.name: {str(p): t for p, t in ends.items()}}),
    )
    assert ranges == {
        p: (topic.scan(p, starts[p], n), topic.scan(p, ends[p], n)) for p, n in COUNTS.items()
    }


def test_strategy_error_and_latest_after_the_last_record(topic):
    after = str(BASE_TS + 10**6)
    with pytest.raises(DataLossError, match="startingOffsetsByTimestampStrategy"):
        topic.ranges(startingTimestamp=after)
    assert topic.ranges(startingTimestamp=after, startingOffsetsByTimestampStrategy="latest") == {
        p: (n, n) for p, n in COUNTS.items()
    }


def test_list_offsets_alone_trusts_the_broker(topic):
    """``timestampOffsetsVia=listOffsets`` takes each broker's answer as is, as Spark's
    connector does: right on Apache Kafka, wrong on the mock (mock deviation 2: every
    timestamp gives -1), which is what the checked lookup (``auto``) protects against."""
    start = BASE_TS + 9_500
    ranges = topic.ranges(
        startingTimestamp=str(start),
        timestampOffsetsVia="listOffsets",
        startingOffsetsByTimestampStrategy="latest",
    )
    scanned = {p: (topic.scan(p, start, n), n) for p, n in COUNTS.items()}
    if topic.broker.name == "kafka":
        assert ranges == scanned
    else:
        assert ranges != scanned
