"""Filter pushdown (option pushFilters + Spark's spark.sql.python.filterPushdown.enabled):
the data the pushdown tests read, on both brokers, and the narrow ranges the planner makes
of pushed filters (the filtered reads in Spark: tests/spark/test_pushdown.py)."""

import uuid

import pytest

from kafka_ds.client import make_client
from kafka_ds.options import parse_read_options
from kafka_ds.read.planner import OffsetPlanner
from tests.support.brokers import produce_confluent

pytest.importorskip("pyspark.sql.datasource", minversion=None)
from pyspark.sql.datasource import (  # noqa: E402
    GreaterThanOrEqual,
    In,
    LessThan,
)

from tests.unit.test_pushdown import BASE_TS, utc  # noqa: E402

COUNTS = {("a", 0): 20, ("a", 1): 15, ("a", 2): 25, ("b", 0): 10}


# --- on the brokers -------------------------------------------------------------------------


class Data:
    def __init__(self, broker):
        self.broker = broker
        stem = f"pd{uuid.uuid4().hex[:8]}"
        self.topics = {"a": f"{stem}-a", "b": f"{stem}-b"}
        self.pattern = f"{stem}-.*"
        broker.create_topic(self.topics["a"], partitions=3)
        broker.create_topic(self.topics["b"], partitions=1)
        for (short, partition), count in COUNTS.items():
            records = [
                {
                    "key": None if i % 3 == 0 else f"k{i}".encode(),
                    "value": b"v" * i,
                    "timestamp_ms": BASE_TS + i * 1000,
                }
                for i in range(count)
            ]
            produce_confluent(
                broker.bootstrap_servers,
                self.topics[short],
                records,
                partition=partition,
                **{"batch.num.messages": 4, "linger.ms": 100},
            )

    def read(self, spark, push):
        return (
            spark.read.format("pykafka")
            .option("kafka.bootstrap.servers", self.broker.bootstrap_servers)
            .option("subscribePattern", self.pattern)
            .option("pushFilters", "true" if push else "false")
            .load()
        )


@pytest.fixture(scope="module", params=["mock", "kafka"])
def data(request, _brokers):
    return Data(_brokers.get(request.param))


def test_pushed_filters_plan_narrow_ranges(data):
    a, b = data.topics["a"], data.topics["b"]
    from kafka_ds.reader import KafkaPushdownReader

    opts = parse_read_options(
        {
            "kafka.bootstrap.servers": data.broker.bootstrap_servers,
            "subscribePattern": data.pattern,
            "pushFilters": "true",
        },
        streaming=False,
    )
    reader = KafkaPushdownReader(opts)
    filters = [
        In(("topic",), (a,)),
        GreaterThanOrEqual(("partition",), 1),
        GreaterThanOrEqual(("timestamp",), utc(BASE_TS + 9_000)),
        LessThan(("offset",), 14),
    ]
    assert list(reader.pushFilters(filters)) == [filters[2]]
    planned = sorted(
        (p.topic, p.partition, p.start, p.end, p.late_start, p.late_end)
        for p in reader.partitions()
    )
    assert planned == [(a, 1, 9, 14, False, False), (a, 2, 9, 14, False, False)]
    assert b not in {p[0] for p in planned}
    client = make_client(opts)
    try:  # the same ranges an explicit timestamp option plans, cut at the offset bound
        assert OffsetPlanner(opts, client).offsets_for_times({(a, 1): BASE_TS + 9_000}) == {
            (a, 1): (9, -1)
        }
    finally:
        client.close()
