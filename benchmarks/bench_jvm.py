"""pykafka against Spark's own ``format("kafka")``, side by side in one Spark session.

    .venv/bin/python benchmarks/bench_jvm.py [--records 2M|10M] [--tansu]
        [--partitions 8] [--repeat 2] [--stream-seconds 30] [--rates 1000,20000]
        [--no-stream] [--no-avro] [--write-results]
        [--jars a.jar,b.jar,... | --packages org.apache.spark:spark-sql-kafka-0-10_2.13:V,...]

Spark's connector is not part of pyspark. By default the script fetches it from Maven Central
itself (tests/support/spark_connector.py: ``mvn dependency:build-classpath`` of the connector,
its token provider, kafka-clients, commons-pool2 and spark-avro, cached in ``.venv-kafka/``):
the release of this venv's pyspark if Maven Central serves it, else the newest one it serves
below it. A connector runs in a Spark of its own release, so when that is not this venv's
pyspark the script runs itself again with the Python of ``.venv-spark/<release>`` (pyspark of
that release installed there on first use): both connectors run in that Spark. ``--jars``
(comma-separated) or ``--packages`` give the connector by hand instead (in this venv's Spark).

The broker: Apache Kafka (tests/support/apache_kafka.py, one KRaft node, from Maven Central's
jars) with the JVM flags and thread counts of Kafka's own start script (``BENCHMARK_JVM_OPTIONS``,
``BENCHMARK_SETTINGS``, 1 GiB heap), not the test suite's; ``--tansu``: one Tansu broker
(``tests/support/brokers.py``, memory storage) instead. One ``local[2]`` Spark session; after
a warm-up of every case, ``--repeat`` rounds run every connector and setting in turn (best of
the rounds); every ratio compares figures of the same run. What runs (``--records`` N
records (``2M``, ``10M`` or a number) of ``--value-size`` B in ``--partitions`` partitions,
CreateTime = a base + the record's index in its partition):

* **reads**: ``count()``, ``sum(length(value))`` and the last 1 % by timestamp
  (``where(timestamp >= since).count()``). Both connectors read ``startingOffsets=earliest``
  to ``endingOffsets`` = the JSON of the partitions' high watermarks (on Tansu, whose
  ListOffsets LATEST is wrong after multi-record batches, tests/README.md, Tansu deviation 1,
  Spark's connector would read only a fraction of the topic with ``latest``). The timestamp
  range: pykafka with ``pushFilters=true`` (the filter becomes the offset range, found by
  ListOffsets by time, checked); Spark's connector with ``startingTimestamp`` (its way to
  start at a time: ListOffsets by time; Tansu answers it with 0, so there it reads the whole
  topic and Spark filters) and with ``startingOffsets`` = the JSON of the offsets the filter
  starts at.
* **writes** of cached rows (``key``, 100 B binary ``value``), and an Avro write: pykafka's
  ``valueFormat=avro`` through the test Schema Registry (``tests/support/schema_registry.py``,
  schema registered at planning, Confluent framing) against spark-avro's ``to_avro`` of the
  same struct with the same 5-byte Confluent header concatenated (Spark has no registry
  support; skipped when ``to_avro`` is not on the classpath).
* the same two writes through pykafka once more with ``spark.sql.execution.arrow.maxBytesPerBatch``
  = 2147483647 (set for that write only), which turns off Spark's per-row Arrow batch-size
  check (docs/performance.md, "Spark settings for writes"); Spark's connector hands no rows
  to Python workers, so its columns of those rows repeat its own figures.
* **streaming latency** at each of ``--rates`` for ``--stream-seconds``: the machinery of
  ``stream_latency.py`` (an independent producer and consumer), one query per connector,
  ``readStream.format(X) -> writeStream.format(X)``.

Settings: pykafka runs with its defaults (its fetch size, batch size and linger are already
what suits bulk reads and writes). Spark's connector runs with its defaults and "tuned":
batch reads ``kafka.fetch.max.wait.ms=1`` (each task of the defaults waits once for a Fetch
held the whole 500 ms at the end of its range; a wait of 0 reads nothing on Tansu),
``kafka.max.partition.fetch.bytes`` 8 MiB and ``kafka.max.poll.records`` 100,000 (pykafka's
fetch size); streaming reads the same but ``kafka.fetch.max.wait.ms=20`` (with 1, Tansu
answers Fetches over small batches with no records and the query fails: tests/README.md,
Tansu deviation 17); writes ``kafka.linger.ms=200`` and ``kafka.batch.size`` 1 MiB
(pykafka's defaults). ``--write-results`` puts the tables into ``benchmarks/results.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402 -- after HERE is on sys.path
import jvm_report  # noqa: E402
import jvm_setup  # noqa: E402
from harness import log  # noqa: E402
from jvm_report import BYTE_LIMIT_OFF, CEILING, DEFAULTS, PYKAFKA, TUNED  # noqa: E402

BASE_TS = 1_700_000_000_000
RANGE_SHARE = 0.01
TUNED_READ = {
    "kafka.fetch.max.wait.ms": "1",
    "kafka.max.partition.fetch.bytes": str(8 << 20),
    "kafka.max.poll.records": "100000",
}
TUNED_WRITE = {"kafka.linger.ms": "200", "kafka.batch.size": str(1 << 20)}
# Streaming reads meet small record batches, and Tansu answers a Fetch with what it has read
# when max_wait_ms runs out: with 1 ms that is nothing, again and again, and the query fails
# ("Cannot fetch record for offset ..."; tests/README.md, Tansu deviation 17). 20 ms is the
# shortest wait seen to get records every time there.
TUNED_STREAM = {**TUNED_READ, "kafka.fetch.max.wait.ms": "20"}
# the connectors --profile runs again under py-spy and JFR
PROFILED = (PYKAFKA, TUNED)
# (label, format, read options, write options)
CONFIGS = [
    (PYKAFKA, "pykafka", {}, {}),
    (DEFAULTS, "kafka", {}, {}),
    (TUNED, "kafka", TUNED_READ, TUNED_WRITE),
]

# --- the data ------------------------------------------------------------------------------


def fill(broker, topic, records, partitions, value_size):
    """``records`` records with CreateTime = BASE_TS + the index in the partition."""
    from bench_read import fill_topic

    jvm_setup.wait_led(broker, topic)

    fill_topic(
        broker.bootstrap_servers, topic, records, value_size, partitions, first_timestamp_ms=BASE_TS
    )


def ends_json(broker, topic):
    from bench_write import end_offsets

    return {str(p): hw for p, (hw, _lso) in end_offsets(broker, topic).items()}


# --- reads -------------------------------------------------------------------------------------


def reads(spark, broker, topic, ends, args):
    from pyspark.sql import functions as F

    since_index = int(min(ends.values()) * (1 - RANGE_SHARE))
    since = dt.datetime.fromtimestamp((BASE_TS + since_index) / 1000, dt.timezone.utc)
    in_range = sum(hw - since_index for hw in ends.values())
    ending = json.dumps({topic: ends})
    starts = json.dumps({topic: {p: since_index for p in ends}})
    records = sum(ends.values())

    def frame(fmt, options, start=("startingOffsets", "earliest")):
        reader = (
            spark.read.format(fmt)
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("subscribe", topic)
            .option(*start)
            .option("endingOffsets", ending)
        )
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load()

    def count(fmt, opts):
        return lambda: frame(fmt, opts).count()

    def sum_length(fmt, opts):
        return lambda: frame(fmt, opts).select(F.sum(F.length("value"))).first()[0]

    def in_time_range(fmt, opts, start=("startingOffsets", "earliest")):
        return lambda: frame(fmt, opts, start).where(F.col("timestamp") >= F.lit(since)).count()

    ts = "last 1% by timestamp"
    cases = []  # (key in rates, run, expected result, rows the rate is of)
    for label, fmt, options, _ in CONFIGS:
        cases.append((("count", label), count(fmt, options), records, records))
        cases.append(
            (
                ("sum(length(value))", label),
                sum_length(fmt, options),
                records * args.value_size,
                records,
            )
        )
        if fmt == "pykafka":
            cases.append(
                (
                    (ts, label),
                    in_time_range(fmt, {**options, "pushFilters": "true"}),
                    in_range,
                    None,
                )
            )
        else:
            cases.append(
                (
                    (ts, label + " (startingTimestamp)"),
                    in_time_range(fmt, options, ("startingTimestamp", str(BASE_TS + since_index))),
                    in_range,
                    None,
                )
            )
            cases.append(
                (
                    (ts, label + " (offsets given)"),
                    in_time_range(fmt, options, ("startingOffsets", starts)),
                    in_range,
                    None,
                )
            )
    # What Spark's Python data source machinery costs alone: a source of ready-made Arrow
    # batches shaped like pykafka's (bench_read.py), no I/O, no decoding.
    import bench_read

    bench_read.register_ceiling(spark)
    ceiling = bench_read.ceiling_reader(spark, topic, records, args.partitions, args.value_size)
    cases.append((("count", CEILING), lambda: ceiling.load().count(), records, records))
    rates = measure(cases, args.repeat, "read")
    for key, run, _expected, rows in cases:
        if args.profiler and key[0] == "count" and key[1] in PROFILED:
            args.profiler.run(f"read count, {key[1]}", run, rows)
    return rates, in_range


def wall_time(run):
    """(seconds, result) of one ``run()``."""
    started = time.perf_counter()
    got = run()
    return time.perf_counter() - started, got


def measure(cases, repeat, what, timed_run=wall_time):
    """Every case once to warm up, then ``repeat`` rounds of all cases in turn (so that a
    busy moment of the shared machine hits every connector alike); the best time of each.
    ``timed_run(run)``: (seconds, result) of one run. Rates in rows/s, or minus the seconds
    where ``rows`` is None."""
    for key, run, expected, _rows in cases:
        check(key, timed_run(run)[1], expected)
    times = {key: [] for key, *_ in cases}
    for round_ in range(repeat):
        for key, run, expected, _rows in cases:
            seconds, got = timed_run(run)
            times[key].append(seconds)
            check(key, got, expected)
        log(
            f"{what}, round {round_ + 1}: "
            + ", ".join(f"{key[0]} {key[1]} {t[-1]:.2f} s" for key, t in times.items())
        )
    return {
        key: (rows / min(times[key]) if rows else -min(times[key]))
        for key, _run, _expected, rows in cases
    }


def check(key, got, expected):
    if expected is not None and got != expected:
        raise AssertionError(f"{key}: got {got:,}, expected {expected:,}")


# --- writes ------------------------------------------------------------------------------------


def cached(df, rows):
    from pyspark import StorageLevel

    df = df.persist(StorageLevel.MEMORY_ONLY)
    if df.count() != rows:
        raise AssertionError("the cached DataFrame lost rows")
    return df


def writes(spark, broker, args, registry, avro):
    from bench_typed_write import KEY_SQL, VALUE_SQL
    from bench_write import count_records

    rows = args.write_records
    binary = cached(
        spark.range(0, rows, 1, 2).selectExpr(
            f"{KEY_SQL} AS key",
            f"cast(rpad(concat('value-', cast(id AS string)), {args.value_size}, 'x') AS binary) AS value",
        ),
        rows,
    )
    typed = cached(
        spark.range(0, rows, 1, 2).selectExpr(f"{KEY_SQL} AS key", f"{VALUE_SQL} AS value"), rows
    )

    def write(df, fmt, options, avro_kind=None):
        def run():
            topic = broker.unique_topic("bench-jvm-w")
            broker.create_topic(topic, partitions=args.partitions)
            jvm_setup.wait_led(broker, topic)
            opts = dict(options)
            if avro_kind == "pykafka":
                opts.update({"valueFormat": "avro", "schema.registry.url": registry.url})
            writer = (
                df.write.format(fmt)
                .option("kafka.bootstrap.servers", broker.bootstrap_servers)
                .option("topic", topic)
                .mode("append")
            )
            for key, value in opts.items():
                writer = writer.option(key, value)
            started = time.perf_counter()
            writer.save()
            seconds = time.perf_counter() - started
            found = count_records(broker, topic)
            broker.delete_topic(topic, wait=False)
            return seconds, found

        return run

    import bench_typed_write
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(bench_typed_write)
    bench_typed_write.register_null_sink(spark)
    cases = []
    for label, fmt, _, options in CONFIGS:
        cases.append((("write, binary", label), write(binary, fmt, options), rows, rows))
    # Spark's own cost of handing the rows to a Python writer (bench_typed_write.py's sink
    # that iterates its Arrow batches and writes nothing)
    cases.append(
        (
            ("write, binary", CEILING),
            lambda: (bench_typed_write.write_null(binary), rows),
            rows,
            rows,
        )
    )
    if avro:
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import to_avro

        # The JVM side: spark-avro's to_avro of the same struct behind a Confluent header
        # (magic 0, a schema id), which is what pykafka's Avro values carry. Not cached:
        # to_avro runs in the write, as pykafka's encoder does.
        header = F.lit(bytes([0, 0, 0, 0, 1]))
        jvm_avro = typed.select("key", F.concat(header, to_avro("value")).alias("value"))
        for label, fmt, _, options in CONFIGS:
            df, kind = (typed, "pykafka") if fmt == "pykafka" else (jvm_avro, None)
            cases.append((("write, Avro", label), write(df, fmt, options, kind), rows, rows))
    # pykafka again with Spark's per-row Arrow batch-size check off (docs/performance.md,
    # "Spark settings for writes"); Spark's connector does not hand rows to Python workers
    for (name, label), run, expected, _rows in list(cases):
        if label in (PYKAFKA, CEILING):
            cases.append(
                ((name + BYTE_LIMIT_OFF, label), byte_limit_off(spark, run), expected, rows)
            )
    # A write times itself: topic creation and the count of what arrived are not timed.
    rates = measure(cases, args.repeat, "write", timed_run=lambda run: run())
    for key, run, *_ in cases:
        if (
            args.profiler
            and key[0].startswith(("write, binary", "write, Avro"))
            and key[1] in PROFILED
        ):
            args.profiler.run(f"{key[0]}, {key[1]}", run, rows)
    binary.unpersist()
    typed.unpersist()
    return rates


def byte_limit_off(spark, run):
    from bench_typed_write import set_byte_limit

    def with_setting():
        set_byte_limit(spark, "off")
        try:
            return run()
        finally:
            set_byte_limit(spark, "default")

    return with_setting


# --- streaming latency -------------------------------------------------------------------------


def streaming(spark, broker, args):
    """stream_probe.py's latency run, one query per connector (NudgedLatencyRun: on Tansu,
    Spark's connector reads a batch's last records only once another batch follows)."""
    from stream_probe import NudgedLatencyRun

    settings = types.SimpleNamespace(partitions=4, value_size=100)
    out = {}
    runs = [(label, fmt, fmt, read_options) for label, fmt, read_options, _ in CONFIGS]
    if args.stream_breakdown:
        # which half of a query the time goes to: one connector reads, the other writes
        runs += [
            ("pykafka source, kafka sink", "pykafka", "kafka", {}),
            ("kafka tuned source, pykafka sink", "kafka", "pykafka", TUNED_READ),
        ]
    for label, source_fmt, sink_fmt, read_options in runs:
        bench = NudgedLatencyRun(settings, broker=broker, spark=spark)
        try:
            # The sinks keep their defaults: a linger meant for bulk writes only adds latency.
            if read_options is TUNED_READ:
                read_options = TUNED_STREAM
            bench.start_query(source_fmt, sink_fmt, read_options, {})
            bench.run_phase(1000, 5.0)  # warm-up
            for rate in args.rates:
                bench.drain()
                phase = bench.run_phase(rate, args.stream_seconds)
                out[(rate, label)] = phase
                log(
                    f"stream {rate:,}/s, {label}: {phase['latency_ms']}, missing "
                    f"{phase['missing']}, duplicated {phase['duplicated']}; triggers "
                    f"{phase['triggers']}"
                )
        except Exception as exc:  # noqa: BLE001 -- reported in the table
            log(f"stream {label} failed: {exc!r}"[:2000])
            for rate in args.rates:
                out.setdefault((rate, label), {"error": f"{type(exc).__name__}: {exc}"[:300]})
        finally:
            bench.close()
    return out


def count_arg(text):
    """``2M``, ``10M``, ``20k`` or a number."""
    text = str(text).strip().lower().replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def arguments() -> argparse.ArgumentParser:
    ap = harness.parser(__doc__)
    ap.add_argument("--jars", help="comma-separated jars of Spark's Kafka connector")
    ap.add_argument("--packages", help="Maven coordinates of Spark's Kafka connector")
    ap.add_argument(
        "--records",
        type=count_arg,
        default=2_000_000,
        help="records read: a number, or 2M, 10M, 20k (default 2M)",
    )
    ap.add_argument(
        "--tansu",
        action="store_true",
        help="run on Tansu (the demo's broker) instead of Apache Kafka",
    )
    ap.add_argument(
        "--write-records",
        type=count_arg,
        default=None,
        help="rows written (default: --records / 2)",
    )
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--stream-seconds", type=float, default=30.0)
    ap.add_argument("--rates", default="1000,20000")
    ap.add_argument("--no-stream", action="store_true")
    ap.add_argument(
        "--stream-breakdown",
        action="store_true",
        help="also stream pykafka -> kafka, kafka -> pykafka, and stream_floor.py's "
        "do-nothing Python source and sink (where a trigger's time goes)",
    )
    ap.add_argument(
        "--only",
        default="read,write,stream",
        help="which paths run, comma-separated: read, write, stream (default all)",
    )
    ap.add_argument("--no-avro", action="store_true")
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one more Spark setting for the session (repeatable)",
    )
    ap.add_argument(
        "--profile",
        metavar="DIR",
        help="after the timed rounds, run the count and the writes of pykafka and of "
        "the tuned connector again under py-spy (Python workers) and JFR (Spark JVM), "
        "with every process's CPU; recordings and summary.md go to DIR (profiles.py)",
    )
    # set when this script ran itself again in the connector's pyspark (the jars it added)
    ap.add_argument("--fetched-jars", help=argparse.SUPPRESS)
    # the Python this script was started with (it has matplotlib; the connector's venv not)
    ap.add_argument("--drawing-python", default=sys.executable, help=argparse.SUPPRESS)
    return ap


def main(argv=None):
    ap = arguments()
    args = ap.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        connector = jvm_setup.take_connector(args, argv, os.path.abspath(__file__))
    except jvm_setup.NoConnector as exc:
        print(exc, file=sys.stderr)
        return 2
    args.rates = [int(r) for r in args.rates.split(",") if r]
    only = {path.strip() for path in args.only.split(",") if path.strip()}
    if only - {"read", "write", "stream"}:
        ap.error(f"--only takes read, write and stream, not {', '.join(sorted(only))}")
    if args.no_stream:
        only.discard("stream")
    args.write_records = args.write_records or args.records // 2

    from tests.support.schema_registry import start_registry
    from tests.support.spark_support import make_spark

    conf = jvm_setup.session_conf(args)
    started = time.monotonic()
    load_before = os.getloadavg()
    broker = jvm_setup.start_broker(args.tansu)
    registry = start_registry()
    spark = make_spark("kafka_ds bench_jvm", driver_memory="4g", conf=conf)
    args.profiler = None
    if args.profile:
        import profiles

        profiles.TOOL_DIRS.append(os.path.dirname(args.drawing_python))
        args.profiler = profiles.Profiler(args.profile, broker, spark)
    try:
        try:
            jvm_setup.check_connector(spark, broker)
        except jvm_setup.NoConnector as exc:
            print(exc, file=sys.stderr)
            return 2
        avro = not args.no_avro and jvm_setup.avro_usable(spark)
        found = {"spark": spark.version, "kafka-clients": jvm_setup.kafka_clients_version(args)}
        if args.fetched_jars or connector:
            found["spark"] += " with its connector from Maven Central"
        broker_label = jvm_setup.broker_label(broker)
        log(
            f"Spark {found['spark']}, kafka-clients {found['kafka-clients']}; "
            f"{broker_label} at {broker.bootstrap_servers}"
        )
        topic = broker.create_topic(broker.unique_topic("bench-jvm"), partitions=args.partitions)
        fill(broker, topic, args.records, args.partitions, args.value_size)
        ends = ends_json(broker, topic)
        log(f"{sum(ends.values()):,} records in {topic}")
        read_rates, in_range = (
            reads(spark, broker, topic, ends, args) if "read" in only else ({}, 0)
        )
        broker.delete_topic(topic, wait=False)
        write_rates = writes(spark, broker, args, registry, avro) if "write" in only else {}
        stream = streaming(spark, broker, args) if "stream" in only else {}
        floor = []
        if "stream" in only:
            # Spark's own cost of a trigger with a Python source and sink (no Kafka); with
            # --stream-breakdown its other three queries too
            import stream_floor

            queries = stream_floor.QUERIES if args.stream_breakdown else stream_floor.QUERIES[-1:]
            for label, source, sink in queries:
                floor.append(
                    (label, stream_floor.measure(spark, source, sink, args.stream_seconds))
                )
                log(f"floor, {label}: {floor[-1][1]}")
    finally:
        spark.stop()
        registry.stop()
        broker.stop()
    load_after = os.getloadavg()
    minutes = (time.monotonic() - started) / 60
    shown = argv[: argv.index("--fetched-jars")] if args.fetched_jars else argv
    header = (
        f"Command: `{harness.command_line('bench_jvm.py', shown)}` -- "
        f"{dt.datetime.now():%Y-%m-%d %H:%M}, {minutes:.1f} min. "
        f"One Spark session (`local[2]`, Spark {found['spark']}, kafka-clients "
        f"{found['kafka-clients']}), {broker_label}, {args.records:,} records of "
        f"{args.value_size} B in {args.partitions} partitions read, "
        f"{args.write_records:,} rows written; load average (1 min) "
        f"{load_before[0]:.1f} at the start, {load_after[0]:.1f} at the end. "
        f"Machine: {harness.machine_and_load()}."
    )
    profiled = None
    if args.profiler:
        import profiles

        profiled = profiles.summary(args.profiler)
        with open(os.path.join(args.profile, "summary.md"), "w") as f:
            f.write(profiled)
        print("\nProfiles (" + args.profile + "):\n\n" + profiled)
    figures = jvm_report.raw_figures(read_rates, write_rates, stream, args)
    figures["floor"] = dict(floor)
    figures["title"] = (
        f"{broker_label}, Spark {found['spark']}, local[2], "
        f"{dt.datetime.now():%Y-%m-%d %H:%M}, load {load_before[0]:.1f}-{load_after[0]:.1f}"
    )
    text = jvm_report.report_text(read_rates, write_rates, stream, floor, args, in_range, figures)
    print("\n" + header + "\n\n" + text)
    if args.write_results:
        jvm_report.write_results(args, header, text, figures, profiled)
    return 0


if __name__ == "__main__":
    sys.exit(main())
