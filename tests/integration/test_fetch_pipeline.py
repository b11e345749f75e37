"""The pipelined fetch of ``read_range`` (kafka_ds/read/fetch_pipeline.py) on the mock
cluster, through the fault proxy: many Fetches per task give exactly the produced rows with
every guess right; a generator closed early (a Fetch under way, stalled by the proxy, or
not) leaves no thread and no open connection, and returns at once; a broker error
mid-stream is raised in the consumer with its type and message.

The guess and :class:`FetchAhead` in memory: tests/unit/test_fetch_pipeline.py.
"""

from __future__ import annotations

import logging
import time
import uuid

import pytest

from kafka_ds.client import KafkaClient
from kafka_ds.options import parse_read_options
from kafka_ds.protocol.errors import error_for_code
from kafka_ds.read.ranges import OffsetRange, read_range
from tests.support.brokers import produce_confluent
from tests.support.faultproxy import FaultProxy
from tests.unit.test_fetch_pipeline import fetch_threads

FETCH = 1
# --- read_range on the mock cluster ---------------------------------------------------------

PER_PARTITION = 600


@pytest.fixture(scope="module")
def filled(mock_cluster):
    """One partition of PER_PARTITION records, 20 per batch."""
    topic = f"fp{uuid.uuid4().hex[:8]}"
    mock_cluster.create_topic(topic, partitions=1)
    values = [b"value-%04d" % i for i in range(PER_PARTITION)]
    produce_confluent(
        mock_cluster.bootstrap_servers,
        topic,
        [{"value": v} for v in values],
        partition=0,
        **{"batch.num.messages": 20, "linger.ms": 50},
    )
    return topic, values


def options(bootstrap, topic, **extra):
    return parse_read_options(
        {
            "kafka.bootstrap.servers": bootstrap,
            "subscribe": topic,
            "kafka.max.partition.fetch.bytes": "2048",
            **extra,
        },
        streaming=False,
    )


def test_read_range_many_fetches_every_guess_right(mock_cluster, filled, caplog):
    topic, values = filled
    opts = options(mock_cluster.bootstrap_servers, topic)
    seen_thread = False
    got = []
    with caplog.at_level(logging.DEBUG, logger="kafka_ds.read.ranges"):
        for b in read_range(opts, OffsetRange(topic, 0, 5, PER_PARTITION - 7)):
            seen_thread = seen_thread or bool(fetch_threads())
            assert b.column("topic").to_pylist() == [topic] * b.num_rows
            assert b.column("partition").to_pylist() == [0] * b.num_rows
            got += b.column("value").to_pylist()
    assert got == values[5 : PER_PARTITION - 7]
    assert seen_thread and not fetch_threads()
    (summary,) = [r.getMessage() for r in caplog.records if "fetched ahead" in r.getMessage()]
    right, wrong = (int(x) for x in summary.split(":")[-1].split("/"))
    assert right >= 10 and wrong == 0, summary


def proxy_pairs_closed(proxy, timeout=3.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(pair.closed for pair in proxy.pairs):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("stalled", [True, False], ids=["fetch-under-way", "thread-idle"])
@pytest.mark.parametrize("own_client", [True, False], ids=["own-client", "given-client"])
def test_closing_the_generator_early_stops_the_thread_and_the_connection(
    mock_cluster, filled, stalled, own_client
):
    topic, values = filled
    with FaultProxy(mock_cluster.bootstrap_servers) as proxy:
        if stalled:
            # The first Fetch answer passes; the next (the thread's) is held for 20 s.
            proxy.inject(FETCH, "stall", 1, seconds=0.0)
            proxy.inject(FETCH, "stall", 1, seconds=20.0)
        opts = options(proxy.bootstrap_servers, topic)
        client = None if own_client else KafkaClient(proxy.bootstrap_servers, opts.client)
        try:
            reader = read_range(opts, OffsetRange(topic, 0, 0, PER_PARTITION), client)
            first = next(reader)
            assert first.column("value").to_pylist() == values[: first.num_rows]
            deadline = time.monotonic() + 5
            while proxy.by_api[FETCH] < 2 and time.monotonic() < deadline:
                time.sleep(0.01)  # the thread's Fetch is on its way
            if not stalled:
                time.sleep(0.2)  # ... and answered: the thread waits for the caller
            started = time.monotonic()
            reader.close()  # Spark stops consuming (limit reached, task killed)
            assert time.monotonic() - started < 2.0
            assert not fetch_threads()
            if own_client:
                assert proxy_pairs_closed(proxy)  # the broker side saw the sockets close
            else:
                # The interrupted connection is closed; an idle one stays usable.
                for conn in client._connections.values():
                    assert conn.in_flight == 0
                    if stalled and conn.connected:
                        assert conn.node_id != client.leader_for(topic, 0)
                assert (
                    sum(
                        1
                        for b in read_range(opts, OffsetRange(topic, 0, 0, 40), client)
                        for _ in range(b.num_rows)
                    )
                    == 40
                )
        finally:
            if client is not None:
                client.close()
    assert not fetch_threads()


def test_a_broker_error_mid_stream_is_raised_in_the_consumer(mock_cluster, filled):
    topic, values = filled
    opts = options(mock_cluster.bootstrap_servers, topic)
    client = KafkaClient(mock_cluster.bootstrap_servers, opts.client)
    try:
        client.leader_for(topic, 0)
        # The first Fetch is answered, the second (the thread's) fails: not retriable.
        mock_cluster.push_request_errors(FETCH, 0, 29)  # TOPIC_AUTHORIZATION_FAILED
        reader = read_range(opts, OffsetRange(topic, 0, 0, PER_PARTITION), client)
        first = next(reader)
        with pytest.raises(
            error_for_code(29),
            match=rf"\(Fetch {topic}-0 at offset "
            rf"{first.num_rows}\)$",
        ):
            for _ in reader:
                pass
    finally:
        client.close()
    assert not fetch_threads()


def test_retriable_errors_of_the_thread_are_retried(mock_cluster, filled):
    topic, values = filled
    opts = options(mock_cluster.bootstrap_servers, topic, **{"kafka.retry.backoff.max.ms": "50"})
    client = KafkaClient(mock_cluster.bootstrap_servers, opts.client)
    try:
        client.leader_for(topic, 0)
        mock_cluster.push_request_errors(FETCH, 0, 6, 6, 7)  # NOT_LEADER x2, TIMED_OUT
        got = [
            v
            for b in read_range(opts, OffsetRange(topic, 0, 0, PER_PARTITION), client)
            for v in b.column("value").to_pylist()
        ]
        assert got == values
        assert client.retries >= 3
    finally:
        client.close()
