"""Brokers that cannot be reached: a read, a write and a stream fail with an error that names
every bootstrap server tried, the socket error of each, the time spent and the option that
bounds the wait, and that option really bounds it (set low here, each fails within seconds,
where the defaults wait 60 s and 120 s)."""

import re
import time

import pytest

from tests.support.brokers import free_ports
from tests.support.spark_support import spark  # noqa: F401  (fixture)


def nowhere():
    return ",".join(f"127.0.0.1:{port}" for port in free_ports(2))


def check(message, servers, option, elapsed, budget_s):
    for server in servers.split(","):
        assert f"cannot connect to {server}: [Errno 111] Connection refused" in message
    assert f"kafka.bootstrap.servers={servers}" in message
    assert f"within {budget_s:g} s ('{option}')" in message
    assert re.search(r"failed attempts over \d+\.\d s", message)
    assert f"or set '{option}' lower to fail sooner" in message
    # The message comes right after kafka_ds's entry point: no frame of kafka_ds's insides
    # (Spark adds its own runner's frames for a stream).
    head = message[: message.index("cannot reach any broker")]
    frames = re.findall(r'File "[^"]*/(kafka_ds/[^"]+)"', head)
    assert frames == ["kafka_ds/worker_process.py"], head
    assert elapsed < budget_s + 20, elapsed


def test_read_names_kafka_default_api_timeout(spark):  # noqa: F811
    servers = nowhere()
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        (
            spark.read.format("pykafka")
            .option("kafka.bootstrap.servers", servers)
            .option("subscribe", "t")
            .option("kafka.default.api.timeout.ms", "2000")
            .load()
            .collect()
        )
    check(str(info.value), servers, "kafka.default.api.timeout.ms", time.monotonic() - started, 2)


def test_write_names_kafka_delivery_timeout(spark):  # noqa: F811
    servers = nowhere()
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        (
            spark.range(3)
            .selectExpr("CAST(id AS STRING) AS value")
            .write.format("pykafka")
            .option("kafka.bootstrap.servers", servers)
            .option("topic", "t")
            .option("kafka.request.timeout.ms", "1000")
            .option("kafka.linger.ms", "0")
            .option("kafka.delivery.timeout.ms", "2000")
            .mode("append")
            .save()
        )
    check(str(info.value), servers, "kafka.delivery.timeout.ms", time.monotonic() - started, 2)


def test_stream_names_kafka_default_api_timeout(spark, tmp_path):  # noqa: F811
    servers = nowhere()
    started = time.monotonic()
    query = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", servers)
        .option("subscribe", "t")
        .option("kafka.default.api.timeout.ms", "2000")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path))
        .start()
    )
    try:
        with pytest.raises(Exception) as info:
            query.awaitTermination(120)
        assert not query.isActive
    finally:
        query.stop()
    check(str(info.value), servers, "kafka.default.api.timeout.ms", time.monotonic() - started, 2)
