"""The main job: a real round trip through a Kafka-compatible broker.

    python -m kafka_ds.demo                     # starts a local Tansu broker
    python -m kafka_ds.demo --bootstrap host:9092 --rows 100000

1. writes rows with ``df.write.format("pykafka")`` (keys, headers, lz4),
2. reads them back with ``spark.read.format("pykafka")`` and checks every row,
3. streams the topic with ``spark.readStream.format("pykafka")`` (AvailableNow,
   consumer group commits) and checks the group's committed offsets.

Exits non-zero when anything does not match. No ``register`` call: after
``pip install`` Spark finds the ``pykafka`` format by itself.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid


def build_spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kafka_ds demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run(bootstrap: str, rows: int, partitions: int = 3) -> int:
    from pyspark.sql import functions as F

    from kafka_ds.client import KafkaClient

    topic = f"kafka_ds_demo_{uuid.uuid4().hex[:8]}"
    group = f"{topic}_group"
    client = KafkaClient(bootstrap)
    try:
        client.create_topic(topic, partitions=partitions)
    finally:
        client.close()
    spark = build_spark()
    failures = []
    try:
        source = spark.range(rows).select(
            F.when(F.col("id") % 10 == 0, F.lit(None))
            .otherwise(F.concat(F.lit("user-"), (F.col("id") % 97).cast("string")))
            .alias("key"),
            F.concat(F.lit("event-"), F.col("id").cast("string")).alias("value"),
            F.array(
                F.struct(F.lit("source").alias("key"), F.lit(b"demo").cast("binary").alias("value"))
            ).alias("headers"),
        )
        started = time.perf_counter()
        (
            source.write.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .option("kafka.compression.type", "lz4")
            .mode("append")
            .save()
        )
        print(f"wrote {rows} rows to {topic} in {time.perf_counter() - started:.1f}s")

        started = time.perf_counter()
        back = (
            spark.read.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("includeHeaders", "true")
            .load()
        )
        back.cache()
        got = back.count()
        print(f"read {got} rows back in {time.perf_counter() - started:.1f}s")
        back.groupBy("partition").count().orderBy("partition").show()
        back.selectExpr(
            "CAST(key AS STRING)",
            "CAST(value AS STRING)",
            "partition",
            "offset",
            "timestamp",
            "headers",
        ).show(5, truncate=False)
        wanted = source.selectExpr(
            "CAST(key AS BINARY) key", "CAST(value AS BINARY) value", "headers"
        )
        missing = wanted.exceptAll(back.select("key", "value", "headers")).count()
        extra = back.select("key", "value", "headers").exceptAll(wanted).count()
        if got != rows or missing or extra:
            failures.append(f"batch read: {got} rows, {missing} missing, {extra} unexpected")

        with tempfile.TemporaryDirectory() as checkpoint:
            query = (
                spark.readStream.format("pykafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .option("startingOffsets", "earliest")
                .option("kafka.group.id", group)
                .option("maxOffsetsPerTrigger", str(max(1, rows // 4)))
                .load()
                .writeStream.format("memory")
                .queryName("demo_stream")
                .option("checkpointLocation", checkpoint)
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            batches = len(query.recentProgress)
            query.stop()
        streamed = spark.sql("SELECT count(*) AS n FROM demo_stream").first()["n"]
        print(f"streamed {streamed} rows in {batches} micro-batches")
        if streamed != rows:
            failures.append(f"stream: {streamed} rows, expected {rows}")
        ends = {
            (topic, row["partition"]): row["end"]
            for row in back.groupBy("partition").agg((F.max("offset") + 1).alias("end")).collect()
        }
        client = KafkaClient(bootstrap)
        try:
            committed = client.fetch_committed(group, [(topic, p) for p in range(partitions)])
        finally:
            client.close()
        print(
            f"consumer group {group!r} committed "
            f"{ {p: committed.get((topic, p)) for p in range(partitions)} }"
        )
        if committed != ends:
            failures.append(f"group offsets {committed} != topic ends {ends}")
    finally:
        spark.stop()
    for failure in failures:
        print("MISMATCH:", failure, file=sys.stderr)
    if not failures:
        print(f"round trip OK: {rows} rows written, read and streamed through {bootstrap}")
    return 1 if failures else 0
