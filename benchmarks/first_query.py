"""What the first query of an application costs: a cold first write and read of 10,000 rows
through ``format("pykafka")`` against a warm second one, and against Spark's own start-up
of a Python data source, measured the same way with a null source and a null sink that do
nothing but yield or take Arrow batches.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python benchmarks/first_query.py [--rows 10000]

Each case runs in a Spark application of its own (a fresh JVM and fresh Python workers, so
its first action is really the first): the wall time of the first action and of the same
action again, the session's own start not counted. The broker is a local Tansu
(kafka_ds.demo.broker). Run it on an otherwise idle machine: the first query pays for
starting Python workers and importing modules, which a busy machine slows.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import uuid


def null_source():
    """A Python data source that yields ``rows`` rows of Kafka's shape from one task, and a
    sink that takes Arrow batches and drops them: Spark's own cost of a Python data source."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, DataSourceReader, \
        WriterCommitMessage

    class NullReader(DataSourceReader):
        def __init__(self, rows):
            self.rows = rows

        def read(self, partition):
            import pyarrow as pa
            values = pa.array([b"x" * 100] * self.rows, pa.binary())
            yield pa.RecordBatch.from_arrays([values], names=["value"])

    class NullWriter(DataSourceArrowWriter):
        def write(self, iterator):
            for _batch in iterator:
                pass
            return WriterCommitMessage()

    class NullSource(DataSource):
        @classmethod
        def name(cls):
            return "nullsource"

        def schema(self):
            return "value binary"

        def reader(self, schema):
            return NullReader(int(self.options.get("rows", "10000")))

        def writer(self, schema, overwrite):
            return NullWriter()

    return NullSource


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


CASES = ("null sink, write", "pykafka, write", "null source, read", "pykafka, read")


def run_case(case: str, rows: int, bootstrap: str, topic: str) -> tuple[float, float]:
    """(first, second) seconds of ``case`` in this process's own Spark application (case
    "prepare": write the rows the read case reads, in an application of its own)."""
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("kafka_ds first query")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(null_source())
    data = spark.range(rows).selectExpr("CAST(id AS STRING) AS key",
                                        "repeat('x', 100) AS value").cache()
    data.count()                          # the input is ready before any clock starts

    def pykafka_write():
        data.write.format("pykafka").option("kafka.bootstrap.servers", bootstrap) \
            .option("topic", topic).mode("append").save()

    def pykafka_read():
        spark.read.format("pykafka").option("kafka.bootstrap.servers", bootstrap) \
            .option("subscribe", topic).load().selectExpr("length(value)").collect()

    def null_write():
        data.select("value").write.format("nullsource").mode("append").save()

    def null_read():
        spark.read.format("nullsource").option("rows", str(rows)).load() \
            .selectExpr("length(value)").collect()

    action = {"prepare": pykafka_write, "null sink, write": null_write,
              "pykafka, write": pykafka_write, "null source, read": null_read,
              "pykafka, read": pykafka_read}[case]
    try:
        return timed(action), timed(action) if case != "prepare" else 0.0
    finally:
        spark.stop()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--bootstrap", help="a broker to use instead of a local Tansu")
    parser.add_argument("--case", choices=("prepare",) + CASES, help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.case:
        print("RESULT", *run_case(args.case, args.rows, args.bootstrap, args.topic), flush=True)
        return 0
    import subprocess

    from kafka_ds.demo.broker import LocalBroker

    broker = None if args.bootstrap else LocalBroker()
    bootstrap = args.bootstrap or broker.start()
    figures = {}
    try:
        read_topic = f"first-query-{uuid.uuid4().hex[:8]}"
        for case in ("prepare",) + CASES:
            topic = read_topic if case in ("prepare", "pykafka, read") \
                else f"first-query-{uuid.uuid4().hex[:8]}"
            out = subprocess.run([sys.executable, __file__, "--case", case, "--rows",
                                  str(args.rows), "--bootstrap", bootstrap, "--topic", topic],
                                 capture_output=True, text=True, check=True).stdout
            line = next(line for line in out.splitlines() if line.startswith("RESULT"))
            if case != "prepare":
                figures[case] = tuple(float(x) for x in line.split()[1:])
    finally:
        if broker is not None:
            broker.stop()
    print(f"{args.rows} rows of 100 B, each case in a Spark application of its own "
          "(local[2]), seconds:")
    print(f"{'':20} {'first':>7} {'second':>7} {'first - second':>15}")
    for name, (first, second) in figures.items():
        print(f"{name:20} {first:7.2f} {second:7.2f} {first - second:15.2f}")
    for kind, null in (("write", "null sink, write"), ("read", "null source, read")):
        ours, nulls = figures[f"pykafka, {kind}"], figures[null]
        print(f"first {kind}: pykafka {ours[0]:.2f} s, {ours[0] - nulls[0]:+.2f} s against "
              f"Spark's own Python data source start-up ({nulls[0]:.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
