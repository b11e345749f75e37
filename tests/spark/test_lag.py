"""Lag a streaming user can see (kafka_ds.stream): progress_lag from a query's progress,
group_lag from the brokers, and LagListener's log line, on Apache Kafka."""

import json
import logging
import time

import pytest

from kafka_ds.compat import ADMISSION_CONTROL
from kafka_ds.stream import LagListener, group_lag, progress_lag
from tests.support.brokers import produce_confluent
from tests.support.spark_support import spark  # noqa: F401  (fixture)

pytestmark = pytest.mark.skipif(
    not ADMISSION_CONTROL, reason="maxOffsetsPerTrigger needs pyspark >= 4.2"
)


def wait_group_lag(options, expected, timeout=15.0):
    """group_lag once it equals ``expected`` (group commits are sent in the background)."""
    deadline = time.monotonic() + timeout
    while True:
        lag = group_lag(options)
        if lag == expected or time.monotonic() > deadline:
            return lag


def total(offsets_json):
    return sum(sum(parts.values()) for parts in json.loads(offsets_json).values())


def test_lag_from_progress_group_and_listener(
    spark,
    broker,
    new_topic,
    tmp_path,  # noqa: F811
    caplog,
):
    topic = new_topic(partitions=2)
    for partition in (0, 1):
        produce_confluent(broker.bootstrap_servers, topic, [b"x"] * 300, partition=partition)
    options = {
        "kafka.bootstrap.servers": broker.bootstrap_servers,
        "subscribe": topic,
        "kafka.group.id": f"lag-{topic}",
    }
    assert group_lag(options) == {topic: {"0": 300, "1": 300}}  # nothing committed yet
    listener = LagListener()
    spark.streams.addListener(listener)
    caplog.set_level(logging.INFO, logger="kafka_ds.stream")
    try:
        query = (
            spark.readStream.format("pykafka")
            .options(**options)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "200")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        batches = [p for p in query.recentProgress if p["numInputRows"]]
        assert len(batches) == 3
        behind = []
        for progress in batches:
            lag = progress_lag(progress)
            source = progress["sources"][0]
            # the source's latest offsets minus the batch's end, per partition
            assert sum(sum(parts.values()) for parts in lag.values()) == total(
                source["latestOffset"]
            ) - total(source["endOffset"])
            behind.append(sum(sum(parts.values()) for parts in lag.values()))
        assert behind == [400, 200, 0]
        assert progress_lag(None) == {}
    finally:
        spark.streams.removeListener(listener)
    assert wait_group_lag(options, {topic: {"0": 0, "1": 0}}) == {topic: {"0": 0, "1": 0}}
    produce_confluent(broker.bootstrap_servers, topic, [b"y"] * 7, partition=1)
    assert group_lag(options) == {topic: {"0": 0, "1": 7}}
    lines = [r.getMessage() for r in caplog.records if "records behind" in r.getMessage()]
    assert any(f"is 400 records behind (most: {topic}-" in line for line in lines), lines
