"""End-to-end typed write: ``valueFormat=avro|protobuf|json`` against writing the same rows as binary.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_typed_write.py                  # 1M rows, Tansu
    PYTHONPATH=. .venv/bin/python benchmarks/bench_typed_write.py --records 200000 --formats avro

Starts one Tansu node (tests/support/brokers.py) and the test suite's fake Schema Registry
(tests/support/schema_registry.py, real HTTP on 127.0.0.1), a Spark ``local[2]`` session,
and for each format, in the same run:

* **typed**: a DataFrame of N rows ``key`` (binary, 10 B) and ``value`` a flat 5-field
  struct (``order_id`` bigint, ``quantity`` int, ``price`` double, ``sku`` string,
  ``note`` string, null in every other row), made once and cached in the JVM's memory,
  written with ``df.write.format("pykafka").option("valueFormat", fmt)`` and the registry
  (the schema derived from the Spark type and registered at planning; every row encoded
  and framed in the Python workers);
* **binary**: the same rows as binary values -- the typed write's own output read back as
  binary (the same framed bytes) and cached -- written without ``valueFormat``;
* **ceiling** (``--ceiling``, on by default): the typed rows, and the binary rows, written
  to a Python data source whose writer only iterates its Arrow batches -- Spark's own cost
  of moving each DataFrame into the Python workers, which no encoder or producer can go
  below. ``ceiling / binary`` (the typed rows into the null sink against the binary Kafka
  write) is the highest typed / binary ratio any encoder could reach in that run; each
  write's CPU seconds less its null sink's are what kafka_ds spends on it.

Every write is measured twice (``--byte-limit both``), under two settings of
``spark.sql.execution.arrow.maxBytesPerBatch``: Spark's default (64 MiB in Spark 4.3), and
2147483647, which turns the byte limit off. With a byte limit Spark asks its Arrow writer
for the batch's size after every row, and for a struct column that costs more than the
conversion itself (Arrow Java's StructVector counts its children's buffers each time);
without it a batch ends at ``maxRecordsPerBatch`` rows (10,000). The setting is changed
with ``spark.conf.set`` between writes of the same session.

Topics of ``--partitions`` (8) partitions, ``--tasks`` (2) write tasks, acks=all. Each
written topic is checked to hold N records, then dropped. The two writes alternate,
``--repeat`` (2) times after a warm-up; the best of each is compared. Prints rows/s, the
ratio typed / binary, the CPU seconds of the Spark JVM and its Python workers per write
(``cpu_use.Timed``: less sensitive than wall time to other work on a shared machine) and
the load average before and after.
"""

from __future__ import annotations

import argparse
import sys
import time

import harness
from bench_write import count_records
from cpu_use import Timed

from tests.support.brokers import TansuBroker

FORMATS = ("avro", "protobuf", "json")
VALUE_SQL = (
    "named_struct('order_id', id + 1000000000, 'quantity', cast(id % 20 AS int), "
    "'price', cast(id AS double) * 0.25, 'sku', concat('EU-WEST-', lpad(cast(id % 100000 AS string), 8, '0')), "
    "'note', CASE WHEN id % 2 = 0 THEN NULL ELSE concat('leave at door ', id) END)"
)
KEY_SQL = "cast(concat('key-', lpad(cast(id % 1000000 AS string), 6, '0')) AS binary)"


def cached(df, rows):
    from pyspark import StorageLevel

    df = df.persist(StorageLevel.MEMORY_ONLY)
    if df.count() != rows:
        raise AssertionError("the cached DataFrame lost rows")
    return df


def write(df, broker, topic, registry_url=None, fmt=None):
    writer = (
        df.write.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", topic)
        .mode("append")
    )
    if fmt:
        writer = writer.option("valueFormat", fmt).option("schema.registry.url", registry_url)
    started = time.perf_counter()
    writer.save()
    return time.perf_counter() - started


def register_null_sink(spark):
    """``format("bench_null_sink")``: a Python writer that iterates its Arrow batches and
    writes nothing (the typed write's ceiling)."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class NullArrowWriter(DataSourceArrowWriter):
        def write(self, iterator):
            rows = 0
            for batch in iterator:
                rows += batch.num_rows
            return WriterCommitMessage()

    class NullSink(DataSource):
        @classmethod
        def name(cls):
            return "bench_null_sink"

        def writer(self, schema, overwrite):
            return NullArrowWriter()

    spark.dataSource.register(NullSink)


def write_null(df):
    started = time.perf_counter()
    df.write.format("bench_null_sink").mode("append").save()
    return time.perf_counter() - started


#: ``spark.sql.execution.arrow.maxBytesPerBatch`` settings measured: Spark's default
#: (64 MiB in 4.3), whose check runs once per row and costs most for struct columns, and
#: no byte limit (batches then end at ``maxRecordsPerBatch`` rows only)
LIMITS = {"default": "Spark's default maxBytesPerBatch", "off": "maxBytesPerBatch=2147483647"}
BYTE_LIMIT = "spark.sql.execution.arrow.maxBytesPerBatch"


def set_byte_limit(spark, limit):
    if limit == "default":
        spark.conf.unset(BYTE_LIMIT)
    else:
        spark.conf.set(BYTE_LIMIT, str(2**31 - 1))


def measure(
    spark,
    broker,
    registry_url,
    fmt,
    rows,
    tasks,
    partitions,
    repeat,
    log,
    ceiling,
    limits=tuple(LIMITS),
):
    typed = cached(
        spark.range(0, rows, 1, tasks).selectExpr(f"{KEY_SQL} AS key", f"{VALUE_SQL} AS value"),
        rows,
    )
    first = broker.unique_topic(f"bench-typed-{fmt}")
    broker.create_topic(first, partitions=partitions)
    write(typed, broker, first, registry_url, fmt)  # warm-up, and the binary rows
    binary = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", first)
        .load()
        .select("key", "value")
    )
    binary = cached(binary.repartition(tasks), rows)
    size = binary.selectExpr("avg(length(value))").first()[0]
    broker.delete_topic(first, wait=False)
    kinds = ("binary", "typed", "ceiling", "null binary")
    times = {(limit, kind): [] for limit in limits for kind in kinds}
    cpu = {(limit, kind): [] for limit in limits for kind in kinds}  # JVM + workers CPU s

    def timed(key, step):
        with Timed(broker, spark) as t:
            step()
        times[key].append(t.seconds)
        cpu[key].append(t.cpu["Spark JVM"] + t.cpu["Python workers"])

    for _ in range(repeat):
        for limit in limits:
            set_byte_limit(spark, limit)
            if ceiling:
                timed((limit, "ceiling"), lambda: write_null(typed))
                timed((limit, "null binary"), lambda: write_null(binary))
            for kind, df, options in (
                ("binary", binary, ()),
                ("typed", typed, (registry_url, fmt)),
            ):
                topic = broker.unique_topic(f"bench-{kind}-{fmt}")
                broker.create_topic(topic, partitions=partitions)
                timed(
                    (limit, kind),
                    lambda df=df, topic=topic, options=options: write(df, broker, topic, *options),
                )
                found = count_records(broker, topic)
                if found != rows:
                    raise AssertionError(f"{kind} {fmt} wrote {found:,} records, expected {rows:,}")
                broker.delete_topic(topic, wait=False)
            log(
                f"{fmt}, {LIMITS[limit]}: "
                + ", ".join(
                    f"{kind} {times[limit, kind][-1]:.2f} s ({cpu[limit, kind][-1]:.2f} CPU s)"
                    for kind in kinds
                    if times[limit, kind]
                )
            )
    set_byte_limit(spark, "default")
    typed.unpersist()
    binary.unpersist()
    return [
        {
            "format": fmt,
            "limit": limit,
            "size": size,
            **{
                kind: rows / min(times[limit, kind]) if times[limit, kind] else None
                for kind in kinds
            },
            **{
                f"{kind}_cpu": min(cpu[limit, kind]) if cpu[limit, kind] else None for kind in kinds
            },
        }
        for limit in limits
    ]


def main(argv=None):
    parser = harness.parser(__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument(
        "--ceiling",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also write the typed rows to a null Python sink (Spark's own cost)",
    )
    parser.add_argument(
        "--byte-limit",
        choices=("both", *LIMITS),
        default="both",
        help=f"{BYTE_LIMIT}: Spark's default, off (2147483647), or both in turns",
    )
    args = parser.parse_args(argv)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]

    from tests.support.schema_registry import start_registry
    from tests.support.spark_support import make_spark

    load_before = harness.load_average()
    registry = start_registry()
    broker = TansuBroker()
    spark = make_spark("kafka_ds bench_typed_write", driver_memory="4g")
    register_null_sink(spark)
    try:
        where = (
            spark.sparkContext.parallelize([0], 1)
            .map(lambda _: __import__("kafka_ds").__file__)
            .first()
        )
        print(f"kafka_ds in the Python workers: {where}", file=sys.stderr)
        limits = tuple(LIMITS) if args.byte_limit == "both" else (args.byte_limit,)
        results = [
            result
            for fmt in formats
            for result in measure(
                spark,
                broker,
                registry.url,
                fmt,
                args.records,
                args.tasks,
                args.partitions,
                args.repeat,
                lambda s: print(s, file=sys.stderr),
                args.ceiling,
                limits,
            )
        ]
    finally:
        spark.stop()
        broker.stop()
        registry.stop()
    load_after = harness.load_average()
    print(
        f"\nTyped write, {args.records:,} rows of a flat 5-field struct, Tansu, "
        f"{args.partitions} partitions, {args.tasks} tasks, local[2], best of {args.repeat}; "
        f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after\n"
    )
    print(
        "| valueFormat | Arrow batches | value (framed) | binary rows/s | typed rows/s | typed / binary "
        "| ceiling rows/s | ceiling / binary | CPU s binary / typed / ceiling / null binary |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        ceiling = (
            f"{r['ceiling']:,.0f} | {r['ceiling'] / r['binary']:.2f}x"
            if r["ceiling"]
            else "-- | --"
        )
        cpus = " / ".join(
            f"{r[k + '_cpu']:.2f}" if r[k + "_cpu"] is not None else "--"
            for k in ("binary", "typed", "ceiling", "null binary")
        )
        print(
            f"| {r['format']} | {LIMITS[r['limit']]} | {r['size']:.0f} B | {r['binary']:,.0f} | {r['typed']:,.0f} | "
            f"{r['typed'] / r['binary']:.2f}x | {ceiling} | {cpus} |"
        )


if __name__ == "__main__":
    main()
