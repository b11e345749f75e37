"""A stream started by timestamp on Apache Kafka reads the records a scan finds (the topic
and the checks at planning: tests/integration/test_read_by_timestamp.py)."""

import json
import uuid

from tests.integration.test_read_by_timestamp import (
    BASE_TS,
    COUNTS,
    topic,  # noqa: F401  (fixture)
)
from tests.support.spark_support import spark  # noqa: F401  (fixture)


def test_stream_starts_by_timestamp(spark, topic, tmp_path):
    start = {0: BASE_TS + 17_000, 1: BASE_TS + 31_000}
    name = f"q{uuid.uuid4().hex[:8]}"
    query = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", topic.broker.bootstrap_servers)
        .option("subscribe", topic.name)
        .option(
            "startingOffsetsByTimestamp",
            json.dumps({topic.name: {str(p): t for p, t in start.items()}}),
        )
        .load()
        .select("partition", "offset", "timestamp")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    got = sorted(
        (r.partition, r.offset, int(r.timestamp.timestamp() * 1000))
        for r in spark.table(name).collect()
    )
    assert got == topic.rows({p: (topic.scan(p, start[p], n), n) for p, n in COUNTS.items()})
