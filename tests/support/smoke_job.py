"""The smoke set, as a script run by another Python (an installed wheel, another pyspark,
a Spark Connect or local-cluster session):

    python tests/support/smoke_job.py --bootstrap HOST:PORT --topic T \
        [--master local[2] | --remote local[2]]

No ``kafka_ds.register`` call: Spark must find ``format("pykafka")`` by itself. It

1. writes 300 rows with ``df.write.format("pykafka")`` (keys, headers) to topic T,
2. reads them back with ``spark.read.format("pykafka")`` and checks every row,
3. streams T into a Parquet directory (AvailableNow, checkpoint), writes 200 rows more,
   restarts the query from the same checkpoint and checks that exactly the new rows came,
4. records what a user sees of a mistyped option name (``startingOffset``): the error of a
   strict read, and (pyspark >= 4.1) the warning in Spark's Python worker logs,
5. records what Spark says to a batch write in its default save mode (ErrorIfExists) and in
   Ignore, which it refuses for every Python data source before the source is asked,
6. with ``--admission-control``: starts a stream with ``maxOffsetsPerTrigger`` and records
   the error it ends with (None if it ran), which pyspark < 4.2 must give.

Prints one JSON line ``SMOKE {...}`` with what it saw; exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any


def _java_ancestor(_rows):
    """PID of the JVM this Python worker runs under (its nearest ``java`` ancestor)."""
    import os
    import time

    time.sleep(0.5)  # keep each task busy a moment, so both executors get some
    pid = os.getpid()
    while pid > 1:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)
        if fields[0].split("(", 1)[1] == "java":
            yield pid
            return
        pid = int(fields[1].split()[1])
    yield -1


def executor_jvms(spark) -> int:
    pids = spark.sparkContext.parallelize(range(8), 8).mapPartitions(_java_ancestor).collect()
    return len(set(pids) - {-1})


def offsets_by_partition(rows) -> dict:
    """{partition: [rows, first offset, last offset, distinct offsets]} of collected rows."""
    found: dict[int, list[int]] = {}
    for row in rows:
        found.setdefault(row.partition, []).append(row.offset)
    return {str(p): [len(o), min(o), max(o), len(set(o))] for p, o in sorted(found.items())}


def broker_ends(bootstrap: str, topic: str) -> dict:
    """{partition: [ListOffsets latest, Fetch high watermark]} straight from the broker."""
    from kafka_ds.client import LATEST, KafkaClient

    client = KafkaClient(bootstrap)
    try:
        partitions = client.partitions_of_topics([topic], 0)[topic]
        listed = client.list_offsets({(topic, p): LATEST for p in partitions})
        marks = client.fetch_watermarks({(topic, p): 0 for p in partitions})
        return {str(p): [listed[(topic, p)][0], marks[(topic, p)][0]] for p in partitions}
    except Exception as exc:  # a diagnosis only: never hide the failure being diagnosed
        return {"error": repr(exc)}
    finally:
        client.close()


def mistyped_option(spark, bootstrap: str, topic: str) -> dict:
    """What reaches this driver of ``.option("startingOffset", ...)``: the strict read's
    error, and the warnings in ``python_worker_logs()`` (None where pyspark has none).
    ``.schema`` makes Spark analyse the read, as an action would (Spark Connect is lazy)."""

    def read():
        return (
            spark.read.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffset", "earliest")
        )

    seen: dict[str, object] = {"strict_error": None, "worker_log_warnings": None}
    try:
        read().option("strictOptions", "true").load().schema  # noqa: B018 (analysis runs)
    except Exception as exc:
        seen["strict_error"] = str(exc)[:3000]
    if hasattr(spark, "tvf") and hasattr(spark.tvf, "python_worker_logs"):
        spark.conf.set("spark.sql.pyspark.worker.logging.enabled", "true")
        try:
            read().load().schema  # noqa: B018 (analysis runs)
            seen["worker_log_warnings"] = [
                r.msg
                for r in spark.tvf.python_worker_logs()
                .where("logger = 'kafka_ds.options'")
                .collect()
                if "is not a pykafka option" in r.msg
            ]
        finally:
            spark.conf.unset("spark.sql.pyspark.worker.logging.enabled")
    return seen


def save_mode_errors(spark, bootstrap: str, topic: str) -> dict:
    """``{mode: error or None}`` of a one-row batch write in Spark's default save mode and in
    ``ignore`` (None: the write ran)."""
    df = spark.range(1).selectExpr("CAST(id AS STRING) AS value")
    seen: dict[str, str | None] = {}
    for mode in ("default", "ignore"):
        writer = (
            df.write.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
        )
        try:
            (writer if mode == "default" else writer.mode(mode)).save()
            seen[mode] = None
        except Exception as exc:
            seen[mode] = str(exc)[:1000]
    return seen


def admission_control(spark, bootstrap: str, topic: str, checkpoint: str) -> str | None:
    """The error of a stream read with ``maxOffsetsPerTrigger`` (admission control), or
    None when its first batch ran."""
    try:
        query = (
            spark.readStream.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("maxOffsetsPerTrigger", "10")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        error = query.exception()
        query.stop()
        return None if error is None else str(error)[:3000]
    except Exception as exc:
        return str(exc)[:3000]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--remote", help="Spark Connect: e.g. local[2] (starts a local server)")
    parser.add_argument("--conf", action="append", default=[], help="key=value")
    parser.add_argument(
        "--admission-control",
        action="store_true",
        help="record the error of a stream read with maxOffsetsPerTrigger",
    )
    parser.add_argument(
        "--count-executor-jvms",
        action="store_true",
        help="report how many distinct JVMs ran the Python tasks of a job",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    import pyspark
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import kafka_ds

    began = time.perf_counter()
    timings: dict[str, float] = {}

    def lap(name):
        timings[name] = round(time.perf_counter() - began - sum(timings.values()), 1)

    builder = SparkSession.builder.appName("kafka_ds smoke")
    builder = builder.remote(args.remote) if args.remote else builder.master(args.master)
    for item in [
        "spark.ui.enabled=false",
        "spark.sql.shuffle.partitions=2",
        "spark.sql.session.timeZone=UTC",
    ] + args.conf:
        key, value = item.split("=", 1)
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    seen: dict[str, Any] = {
        "pyspark": pyspark.__version__,
        "kafka_ds": os.path.dirname(kafka_ds.__file__),
        "spark": spark.version,
        "seconds": timings,
    }
    lap("start")
    failures = []

    def rows(first, count):
        return spark.range(first, first + count).select(
            F.concat(F.lit("k"), (F.col("id") % 7).cast("string")).alias("key"),
            F.concat(F.lit("v"), F.col("id").cast("string")).alias("value"),
            F.array(
                F.struct(F.lit("h").alias("key"), F.lit(b"x").cast("binary").alias("value"))
            ).alias("headers"),
        )

    def write(first, count):
        (
            rows(first, count)
            .write.format("pykafka")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("topic", args.topic)
            .mode("append")
            .save()
        )

    try:
        if args.count_executor_jvms:
            seen["executor_jvms"] = executor_jvms(spark)
        write(0, 300)
        lap("write")
        back = (
            spark.read.format("pykafka")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("subscribe", args.topic)
            .option("includeHeaders", "true")
            .load()
        )
        seen["schema"] = back.schema.simpleString()
        collected = back.collect()
        got = sorted(
            (r.key.decode(), r.value.decode(), [(h.key, bytes(h.value)) for h in r.headers])
            for r in collected
        )
        want = sorted((f"k{i % 7}", f"v{i}", [("h", b"x")]) for i in range(300))
        seen["batch_rows"] = len(got)
        if got != want:
            failures.append(f"batch read: {len(got)} rows, expected the 300 written")
            # Which partitions came short, and whether a second read sees the same: tells a
            # write that lost records from a read that planned or fetched short.
            seen["batch_partitions"] = offsets_by_partition(collected)
            seen["reread_partitions"] = offsets_by_partition(back.collect())
            seen["broker_ends"] = broker_ends(args.bootstrap, args.topic)
            missing = sorted(set(range(300)) - {int(v[1:]) for _k, v, _h in got})
            seen["missing_values"] = missing[:50]
        lap("read")

        with tempfile.TemporaryDirectory() as work:
            out, checkpoint = os.path.join(work, "out"), os.path.join(work, "chk")

            def stream_once():
                query = (
                    spark.readStream.format("pykafka")
                    .option("kafka.bootstrap.servers", args.bootstrap)
                    .option("subscribe", args.topic)
                    .option("startingOffsets", "earliest")
                    .load()
                    .selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
                    .writeStream.format("parquet")
                    .option("path", out)
                    .option("checkpointLocation", checkpoint)
                    .trigger(availableNow=True)
                    .start()
                )
                query.awaitTermination(300)
                done = not query.isActive
                query.stop()
                if not done:
                    failures.append("streaming query did not finish within 300 s")
                return spark.read.parquet(out).count()

            seen["stream_first"] = stream_once()
            lap("stream")
            write(300, 200)
            seen["stream_after_restart"] = stream_once()
            lap("restart")
            values = sorted(int(r.value[1:]) for r in spark.read.parquet(out).collect())
            if seen["stream_first"] != 300 or values != list(range(500)):
                failures.append(
                    f"stream: {seen['stream_first']} rows before the restart, "
                    f"{len(values)} after ({len(set(values))} distinct), "
                    "expected 300 then 500 distinct"
                )
        seen["mistyped_option"] = mistyped_option(spark, args.bootstrap, args.topic)
        lap("mistyped")
        seen["save_mode_errors"] = save_mode_errors(spark, args.bootstrap, args.topic + "-mode")
        lap("save modes")
        if args.admission_control:
            with tempfile.TemporaryDirectory() as work:
                seen["admission_control_error"] = admission_control(
                    spark, args.bootstrap, args.topic, work
                )
            lap("admission")
    except Exception as exc:  # report what failed in the one JSON line, too
        failures.append(f"{type(exc).__name__}: {str(exc)[:2000]}")
    finally:
        spark.stop()
    seen["failures"] = failures
    print("SMOKE " + json.dumps(seen, sort_keys=True))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
