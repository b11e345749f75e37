"""Spark's own cost of a micro-batch with a Python data source: no Kafka, no kafka_ds.

    .venv/bin/python benchmarks/stream_floor.py [--seconds 20]

A source that does nothing (``latestOffset``: a counter of milliseconds; ``read``: that many
100-byte rows) and a sink that does nothing (``DataSourceStreamArrowWriter``: counts the rows),
against Spark's ``rate`` source and ``noop`` sink, in four queries with the default trigger in
one ``local[2]`` session. What each trigger costs then is Spark's alone: the Python worker
round trips of the read and the write, the sink's commit in a Python process of the driver,
the checkpoint's files. It is the floor under any Python source or sink's latency, and
``bench_jvm.py --stream-breakdown`` measures it beside the two connectors in one session.
Prints the median of each of Spark's trigger durations (``query.recentProgress``), ms.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

import harness

STAGES = ("latestOffset", "walCommit", "addBatch", "commitOffsets", "triggerExecution")
ROWS_PER_SECOND = 1000
QUERIES = [  # (label, source, sink)
    ("rate -> noop (no Python)", "rate", "noop"),
    ("do-nothing Python source -> noop", "python", "noop"),
    ("rate -> do-nothing Python sink", "rate", "python"),
    ("do-nothing Python source -> do-nothing Python sink", "python", "python"),
]


def register(spark) -> str:
    """Register the do-nothing source and sink; their format name."""
    from pyspark import cloudpickle
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceStreamArrowWriter,
        DataSourceStreamReader,
        InputPartition,
        WriterCommitMessage,
    )

    class Reader(DataSourceStreamReader):
        def __init__(self):
            self.started = time.time()

        def initialOffset(self):
            return {"rows": 0}

        def latestOffset(self):
            return {"rows": int((time.time() - self.started) * ROWS_PER_SECOND)}

        def partitions(self, start, end):
            return [InputPartition((start["rows"], end["rows"]))]

        def read(self, partition):
            first, end = partition.value
            value = b"v" * 100
            for row in range(first, end):
                yield (row, value)

        def commit(self, end):
            pass

    class Writer(DataSourceStreamArrowWriter):
        def write(self, iterator):
            for _batch in iterator:
                pass
            return WriterCommitMessage()

        def commit(self, messages, batchId):
            pass

        def abort(self, messages, batchId):
            pass

    class DoNothing(DataSource):
        @classmethod
        def name(cls):
            return "do_nothing"

        def schema(self):
            return "key long, value binary"

        def streamReader(self, schema):
            return Reader()

        def streamWriter(self, schema, overwrite):
            return Writer()

    # The workers cannot import this benchmarks/ module: pickle the classes by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(DoNothing)
    return "do_nothing"


def measure(spark, source: str, sink: str, seconds: float) -> dict:
    """One query for ``seconds`` after a 5 s warm-up: the median of each trigger stage."""
    fmt = register(spark)
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
    if source == "rate":
        df = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", ROWS_PER_SECOND)
            .load()
            .selectExpr("value AS key", "CAST(repeat('v', 100) AS BINARY) AS value")
        )
    else:
        df = spark.readStream.format(fmt).load()
    query = (
        df.writeStream.format(fmt if sink == "python" else "noop")
        .option("checkpointLocation", tempfile.mkdtemp(prefix="kafka_ds-floor-"))
        .start()
    )
    try:
        time.sleep(5.0)
        began = len(query.recentProgress)
        time.sleep(seconds)
        progress = [p for p in query.recentProgress[began:] if p["numInputRows"] > 0]
    finally:
        query.stop()
    out = {"batches": len(progress)}
    for stage in STAGES:
        out[stage] = round(statistics.median(p["durationMs"].get(stage, 0) for p in progress))
    return out


def table(rows) -> str:
    lines = [
        "| query | batches | " + " | ".join(STAGES) + " |",
        "|---|---:|" + "---:|" * len(STAGES),
    ]
    for label, fig in rows:
        lines.append(
            f"| {label} | {fig.get('batches', 0)} | "
            + " | ".join(str(fig.get(s, "--")) for s in STAGES)
            + " |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args(argv)
    from tests.support.spark_support import make_spark

    spark = make_spark("kafka_ds stream floor")
    rows = []
    try:
        for label, source, sink in QUERIES:
            rows.append((label, measure(spark, source, sink, args.seconds)))
            harness.log(f"{label}: {rows[-1][1]}")
    finally:
        spark.stop()
    print(
        f"\nSpark {spark.version}, local[2], load average {harness.describe_load()}; median ms per "
        f"trigger with rows, default trigger:\n\n{table(rows)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
