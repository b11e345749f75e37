"""Faults during Spark reads and writes: the rows are the same as without faults.

Each of batch read, streaming read, batch write and streaming write runs once with a
broker of the mock cluster down for 8 s (its own fault controls, tests/support/brokers.py),
and an exactly-once batch write with its transaction coordinator down. The faults without
Spark, and those of the TCP fault proxy: tests/integration/test_faults.py.
"""

from __future__ import annotations

import collections
import threading
import time

import pytest

from kafka_ds.client import KafkaClient
from tests.integration.test_faults import (
    DOWN_S,
    fill,
    mock_topic,
    restore,  # noqa: F401  (fixture)
)
from tests.support.brokers import consume_confluent
from tests.support.spark_support import spark  # noqa: F401  (fixture)


def down_for(cluster, broker_id, seconds):
    """Broker ``broker_id`` down now, up again after ``seconds`` (a rolling restart)."""
    cluster.broker_down(broker_id)
    timer = threading.Timer(seconds, cluster.broker_up, args=(broker_id,))
    timer.start()
    return timer


# --- Spark: batch read/write, streaming read/write, a broker down 8 s -------------------


def test_batch_read_with_a_broker_down(spark, mock_cluster, restore):
    topic = mock_topic(mock_cluster)
    expected = fill(mock_cluster, topic, 3, 300)
    restore.append(down_for(mock_cluster, 1, DOWN_S))
    started = time.monotonic()
    rows = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", mock_cluster.bootstrap_servers)
        .option("subscribe", topic)
        .load()
        .select("partition", "offset", "value")
        .collect()
    )
    elapsed = time.monotonic() - started
    assert {(r.partition, r.offset): bytes(r.value) for r in rows} == expected
    assert len(rows) == len(expected)
    assert elapsed >= DOWN_S - 1.5  # the read did wait for the broker


def test_batch_write_with_a_broker_down(spark, mock_cluster, restore):
    topic = mock_topic(mock_cluster)
    df = spark.range(0, 30000, 1, 2).selectExpr(
        "cast(id AS string) AS key", "cast(id AS string) AS value"
    )
    restore.append(down_for(mock_cluster, 2, DOWN_S))
    started = time.monotonic()
    (
        df.write.format("pykafka")
        .option("kafka.bootstrap.servers", mock_cluster.bootstrap_servers)
        .option("topic", topic)
        .mode("append")
        .save()
    )
    assert time.monotonic() - started >= DOWN_S - 1.5
    values = [
        m.value
        for m in consume_confluent(
            mock_cluster.bootstrap_servers, topic, expected=30000, timeout=30
        )
    ]
    assert collections.Counter(values) == collections.Counter(str(i).encode() for i in range(30000))


def test_exactly_once_write_with_its_transaction_coordinator_down(spark, mock_cluster, restore):
    """deliveryGuarantee=exactly-once while the broker that coordinates the write's first
    transactional id (and leads a partition of the topic) is down: InitProducerId,
    AddPartitionsToTxn and Produce retry through the outage; every row is committed once
    and no transaction is left open (judged on the raw log, tests/support/txlog.py)."""
    from kafka_ds.protocol import messages as m
    from tests.support.txlog import nothing_open, verdict_when

    bs = mock_cluster.bootstrap_servers
    topic = mock_topic(mock_cluster)
    prefix = f"{topic}-eos"
    with KafkaClient(bs) as client:
        answer = client.any_connection().request(
            m.FIND_COORDINATOR,
            m.FIND_COORDINATOR.body(
                key=f"{prefix}-0", key_type=1, coordinator_keys=[f"{prefix}-0"]
            ),
        )
    entry = answer["coordinators"][0] if answer.get("coordinators") else answer
    coordinator = entry["node_id"]
    with KafkaClient(bs) as client:
        leaders = {client.leader_for(topic, p) for p in range(3)}
    assert coordinator in leaders
    df = spark.range(0, 30000, 1, 2).selectExpr("cast(id AS string) AS value")
    restore.append(down_for(mock_cluster, coordinator, DOWN_S))
    started = time.monotonic()
    (
        df.write.format("pykafka")
        .option("kafka.bootstrap.servers", bs)
        .option("topic", topic)
        .option("deliveryGuarantee", "exactly-once")
        .option("transactionalIdPrefix", prefix)
        .mode("append")
        .save()
    )
    assert time.monotonic() - started >= DOWN_S - 1.5
    result = verdict_when(bs, topic, nothing_open)
    assert sorted(result.committed) == sorted(str(i).encode() for i in range(30000))
    assert result.open == [] and result.aborted == []


@pytest.mark.heavy
def test_streaming_read_and_write_with_a_broker_down(spark, mock_cluster, restore, tmp_path):
    source, sink = mock_topic(mock_cluster), mock_topic(mock_cluster)
    first = fill(mock_cluster, source, 3, 100)
    query = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", mock_cluster.bootstrap_servers)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(partition AS STRING) AS key", "value")
        .writeStream.format("pykafka")
        .option("kafka.bootstrap.servers", mock_cluster.bootstrap_servers)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        # Broker 1 leads partition 0 of both topics: reads and writes meet it down.
        restore.append(down_for(mock_cluster, 1, DOWN_S))
        second = []
        producer = threading.Thread(
            target=lambda: second.append(
                {(p, o): v for (p, o), v in fill(mock_cluster, source, 3, 100).items()}
            )
        )
        producer.start()
        time.sleep(DOWN_S + 0.5)
        producer.join(60)
        query.processAllAvailable()
        assert query.exception() is None and query.isActive
    finally:
        query.stop()
    wanted = collections.Counter(list(first.values()) + list(second[0].values()))
    got = collections.Counter(
        m.value
        for m in consume_confluent(
            mock_cluster.bootstrap_servers, sink, expected=sum(wanted.values()), timeout=30
        )
    )
    assert got == wanted
