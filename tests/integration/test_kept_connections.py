"""Connections kept from one Spark task to the next of a Python worker process
(kafka_ds/client/kept.py), on Apache Kafka through the fault proxy, which counts the
ApiVersions requests: one per connection opened.

A write task and a read task after a clean task open no connection; after a failed task,
after the broker closed the kept connection, or after an idle longer than the keep time,
the next task opens its own and its records arrive whole.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from kafka_ds.client import kept
from kafka_ds.errors import ConfigurationError
from kafka_ds.options import parse_read_options, parse_write_options
from kafka_ds.protocol import messages as m
from kafka_ds.read.ranges import OffsetRange, read_range
from kafka_ds.write.plan import ColumnPlan
from kafka_ds.write.task import write_batches
from tests.support.faultproxy import FaultProxy


@pytest.fixture
def topic(kafka_broker):
    name = kafka_broker.unique_topic("kept")
    kafka_broker.create_topic(name, partitions=1)
    yield name
    kafka_broker.delete_topic(name, wait=False)


@pytest.fixture
def proxy(kafka_broker):
    kept.close_kept()
    with FaultProxy(kafka_broker.bootstrap_servers) as fault_proxy:
        yield fault_proxy
    kept.close_kept()


def connections_opened(proxy) -> int:
    return proxy.by_api[m.API_VERSIONS.api_key]


def write(proxy, topic, values, **options):
    opts = parse_write_options(
        {"kafka.bootstrap.servers": proxy.bootstrap_servers, "topic": topic, **options}
    )
    table = pa.table({"value": pa.array(values, pa.binary())})
    plan = ColumnPlan(value=0)
    with kept.task_connections(opts) as client:  # as a Spark write task takes its client
        return write_batches(opts, plan, table.to_batches(), task=0, client=client)


def read(proxy, topic, end):
    """Records [0, end) of partition 0, the way a Spark read task takes its client."""
    opts = parse_read_options(
        {"kafka.bootstrap.servers": proxy.bootstrap_servers, "subscribe": topic},
        streaming=False,
    )
    with kept.task_connections(opts) as client:
        batches = list(read_range(opts, OffsetRange(topic, 0, 0, end), client))
    return [v for b in batches for v in b.column("value").to_pylist()]


def test_tasks_after_a_clean_task_open_no_connection(proxy, topic):
    write(proxy, topic, [b"a%d" % i for i in range(100)])
    opened = connections_opened(proxy)
    assert opened >= 1
    write(proxy, topic, [b"b%d" % i for i in range(100)])
    assert read(proxy, topic, 200) == [b"a%d" % i for i in range(100)] + [
        b"b%d" % i for i in range(100)
    ]
    assert read(proxy, topic, 200)[-1] == b"b99"
    assert connections_opened(proxy) == opened  # two writes and two reads, one connection


def test_after_a_failed_task_the_next_opens_its_own(proxy, topic):
    write(proxy, topic, [b"first"])
    opened = connections_opened(proxy)
    with pytest.raises(ConfigurationError, match="max.request.size"):
        write(proxy, topic, [b"x" * 20_000], **{"kafka.max.request.size": "10000"})
    write(proxy, topic, [b"after"])
    assert connections_opened(proxy) > opened
    assert read(proxy, topic, 2) == [b"first", b"after"]


def test_a_kept_connection_the_broker_closed_is_opened_again(proxy, topic, caplog):
    write(proxy, topic, [b"before"])
    opened = connections_opened(proxy)
    proxy.down()  # every open connection is cut, as a broker restart would
    proxy.up()
    caplog.clear()
    write(proxy, topic, [b"after"])
    assert connections_opened(proxy) > opened
    # found closed when taken, not by a failed request and a retry
    assert not [r for r in caplog.records if "lost" in r.getMessage() or "closed" in r.getMessage()]
    assert read(proxy, topic, 2) == [b"before", b"after"]


def test_a_connection_idle_longer_than_the_keep_time_is_closed(proxy, topic, monkeypatch):
    write(proxy, topic, [b"one"])
    opened = connections_opened(proxy)
    monkeypatch.setattr(kept, "KEEP_SECONDS", 0.0)
    write(proxy, topic, [b"two"])
    assert connections_opened(proxy) > opened
    assert read(proxy, topic, 2) == [b"one", b"two"]
