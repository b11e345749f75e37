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

import jvm_report  # noqa: E402 -- after HERE is on sys.path

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
PROFILED = ("pykafka", "kafka, tuned")
# (label, format, read options, write options)
CONFIGS = [
    ("pykafka", "pykafka", {}, {}),
    ("kafka, defaults", "kafka", {}, {}),
    ("kafka, tuned", "kafka", TUNED_READ, TUNED_WRITE),
]

NO_CONNECTOR = """\
bench_jvm.py compares pykafka with Spark's own format("kafka"), whose jars are not part of
pyspark. Without --jars/--packages it fetches them from Maven Central (needs `mvn`); or give
them with one of:

  --jars spark-sql-kafka-0-10_2.13-<v>.jar,spark-token-provider-kafka-0-10_2.13-<v>.jar,kafka-clients-<k>.jar,commons-pool2-<p>.jar[,spark-avro_2.13-<v>.jar]
  --packages org.apache.spark:spark-sql-kafka-0-10_2.13:<v>[,org.apache.spark:spark-avro_2.13:<v>]

(<v> = your Spark version; --packages needs a machine that reaches Maven Central).
"""


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- the data ------------------------------------------------------------------------------


def fill(broker, topic, records, partitions, value_size):
    """``records`` records with CreateTime = BASE_TS + the index in the partition."""
    from bench_read import fill_topic

    wait_led(broker, topic)

    fill_topic(
        broker.bootstrap_servers, topic, records, value_size, partitions, first_timestamp_ms=BASE_TS
    )


def wait_led(broker, topic, timeout=60.0):
    """Until every partition's leader answers a Fetch without an error: Apache Kafka lists a
    new topic's leaders in Metadata a moment before the leader has loaded the partition, and
    a Produce in that moment fails (NOT_LEADER_OR_FOLLOWER), which fill_topic does not
    retry."""
    from kafka_ds.client import KafkaClient

    deadline = time.monotonic() + timeout
    while True:
        client = KafkaClient(broker.bootstrap_servers)
        try:
            errors = [
                client.fetch(topic, p, 0, max_bytes=1024, max_wait_ms=1, min_bytes=0).get(
                    "error_code"
                )
                for p in client.topic_partitions(topic)
            ]
            if errors and not any(errors):
                return
            last = errors
        except Exception as exc:  # noqa: BLE001 -- not led yet
            last = exc
        finally:
            client.close()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: partitions not led after {timeout} s: {last!r}")
        time.sleep(0.2)


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
    ceiling = ceiling_reader(spark, topic, records, args)
    cases.append((("count", CEILING), lambda: ceiling.load().count(), records, records))
    rates = measure(cases, args.repeat, "read")
    for key, run, _expected, rows in cases:
        if args.profiler and key[0] == "count" and key[1] in PROFILED:
            args.profiler.run(f"read count, {key[1]}", run, rows)
    return rates, in_range


CEILING = jvm_report.CEILING


def ceiling_reader(spark, topic, records, args):
    import bench_read
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(bench_read)  # the workers cannot import benchmarks/
    spark.dataSource.register(bench_read.CeilingDataSource)
    return (
        spark.read.format("kafka_ds_ceiling")
        .option("records", records)
        .option("partitions", args.partitions)
        .option("value_size", args.value_size)
        .option("topic", topic)
    )


def measure(cases, repeat, what):
    """Every case once to warm up, then ``repeat`` rounds of all cases in turn (so that a
    busy moment of the shared machine hits every connector alike); the best time of each.
    Rates in rows/s, or minus the seconds where ``rows`` is None."""
    for key, run, expected, _rows in cases:
        check(key, run(), expected)
    times = {key: [] for key, *_ in cases}
    for round_ in range(repeat):
        for key, run, expected, _rows in cases:
            started = time.perf_counter()
            got = run()
            times[key].append(time.perf_counter() - started)
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
            wait_led(broker, topic)
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
        cases.append((("write, binary", label), write(binary, fmt, options), rows))
    # Spark's own cost of handing the rows to a Python writer (bench_typed_write.py's sink
    # that iterates its Arrow batches and writes nothing)
    cases.append(
        (("write, binary", CEILING), lambda: (bench_typed_write.write_null(binary), rows), rows)
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
            cases.append((("write, Avro", label), write(df, fmt, options, kind), rows))
    # pykafka again with Spark's per-row Arrow batch-size check off (docs/performance.md,
    # "Spark settings for writes"); Spark's connector does not hand rows to Python workers
    for (name, label), run, expected in list(cases):
        if label in (CONFIGS[0][0], CEILING):
            cases.append(((name + BYTE_LIMIT_OFF, label), byte_limit_off(spark, run), expected))
    # The write's own time (topic creation and the count of what arrived are not timed).
    for key, run, expected in cases:
        check(key, run()[1], expected)
    times = {key: [] for key, *_ in cases}
    for round_ in range(args.repeat):
        for key, run, expected in cases:
            seconds, found = run()
            check(key, found, expected)
            times[key].append(seconds)
        log(
            f"write, round {round_ + 1}: "
            + ", ".join(f"{key[0]} {key[1]} {t[-1]:.2f} s" for key, t in times.items())
        )
    rates = {key: rows / min(t) for key, t in times.items()}
    for key, run, _expected in cases:
        if (
            args.profiler
            and key[0].startswith(("write, binary", "write, Avro"))
            and key[1] in PROFILED
        ):
            args.profiler.run(f"{key[0]}, {key[1]}", run, rows)
    binary.unpersist()
    typed.unpersist()
    return rates


BYTE_LIMIT_OFF = jvm_report.BYTE_LIMIT_OFF


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


# --- the report --------------------------------------------------------------------------------


def fmt_rate(rate):
    return f"{rate / 1e6:.2f}M"


def tables(read_rates, write_rates, stream, args, in_range):
    labels = [c[0] for c in CONFIGS]
    lines = [
        f"| rows/s, best of {args.repeat} (pykafka Nx: pykafka's rate over this one's) | "
        f"{' | '.join(labels)} |",
        "|---|" + "---:|" * len(labels),
    ]
    for name in ("count", "sum(length(value))"):
        lines.append(row(f"read, `{name}`", [read_rates.get((name, lab)) for lab in labels]))
    if ("count", CEILING) in read_rates:
        lines.append(
            row(
                "read, `count`, of a Python source of ready-made batches (no I/O, no decoding: "
                "Spark's own cost) in the first column",
                [read_rates[("count", CEILING)]]
                + [read_rates.get(("count", lab)) for lab in labels[1:]],
                first="Spark alone",
            )
        )
    ts = "last 1% by timestamp"
    lines.append(
        row(
            f"read, {ts} ({in_range:,} rows), seconds; pykafka `pushFilters`, "
            "Spark `startingTimestamp`",
            [read_rates.get((ts, labels[0]))]
            + [read_rates.get((ts, lab + " (startingTimestamp)")) for lab in labels[1:]],
        )
    )
    lines.append(
        row(
            f"read, {ts}, seconds; Spark given the start offsets as JSON",
            [read_rates.get((ts, labels[0]))]
            + [read_rates.get((ts, lab + " (offsets given)")) for lab in labels[1:]],
        )
    )
    for name in ("write, binary", "write, Avro"):
        if any((name, lab) in write_rates for lab in labels):
            lines.append(row(name, [write_rates.get((name, lab)) for lab in labels]))
        if (name + BYTE_LIMIT_OFF, labels[0]) in write_rates:  # the connector's as above
            lines.append(
                row(
                    name + BYTE_LIMIT_OFF,
                    [write_rates[name + BYTE_LIMIT_OFF, labels[0]]]
                    + [write_rates.get((name, lab)) for lab in labels[1:]],
                )
            )
        for variant in (name, name + BYTE_LIMIT_OFF):
            if (variant, CEILING) in write_rates:
                lines.append(
                    row(
                        f"{variant}, into a Python sink that writes nothing (Spark's own cost) "
                        "in the first column",
                        [write_rates[variant, CEILING]]
                        + [write_rates.get((name, lab)) for lab in labels[1:]],
                        first="Spark alone",
                    )
                )
    out = "\n".join(lines)
    if stream:
        s = [
            "| streaming, produce-to-visible ms (p50 / p99) | " + " | ".join(labels) + " |",
            "|---|" + "---:|" * len(labels),
        ]
        for rate in args.rates:
            cells = []
            for lab in labels:
                ph = stream.get((rate, lab), {})
                if "error" in ph:
                    cells.append("failed: " + ph["error"].splitlines()[0][:80])
                elif ph:
                    lat = ph["latency_ms"]
                    lost = (f", {ph['missing']} missing" if ph["missing"] else "") + (
                        f", {ph['duplicated']} duplicated" if ph["duplicated"] else ""
                    )
                    cells.append(f"{lat.get('p50')} / {lat.get('p99')}{lost}")
                else:
                    cells.append("--")
            s.append(
                f"| {rate:,} records/s, {args.stream_seconds:g} s | " + " | ".join(cells) + " |"
            )
        out += "\n\n" + "\n".join(s)
    return out


def row(name, rates, first="pykafka"):
    """Rows/s, and pykafka's rate over this column's; a negative figure is seconds (a
    query whose rows/s would mislead: the timestamp range), with this column's time over
    pykafka's."""
    base = rates[0]
    cells = []
    for i, rate in enumerate(rates):
        if rate is None:
            cells.append("--")
        elif rate < 0:
            cells.append(
                f"{-rate:.2f} s"
                if i == 0 or not base
                else f"{-rate:.2f} s ({first} {rate / base:.2f}x)"
            )
        elif i == 0 or not base:
            cells.append(fmt_rate(rate))
        else:
            cells.append(f"{fmt_rate(rate)} ({first} {base / rate:.2f}x)")
    return f"| {name} | " + " | ".join(cells) + " |"


def kafka_clients_version(args):
    """From the jar's name (``--jars``, also when fetched from Maven Central) or the
    coordinates (``--packages``)."""
    import re

    found = re.search(r"kafka-clients-([0-9][^/,]*?)\.jar", args.jars or "")
    if found:
        return found.group(1)
    return "as resolved from " + args.packages if args.packages else "?"


def count_arg(text):
    """``2M``, ``10M``, ``20k`` or a number."""
    text = str(text).strip().lower().replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def maven_connector():
    """Spark's connector from Maven Central (tests/support/spark_connector.py) and the Python
    of a pyspark of its release."""
    from tests.support import spark_connector

    connector = spark_connector.resolve()
    return connector, spark_connector.spark_python(connector["version"])


def start_broker(tansu):
    if tansu:
        from tests.support.brokers import TansuBroker

        return TansuBroker()
    from tests.support.apache_kafka import (
        BENCHMARK_JVM_OPTIONS,
        BENCHMARK_SETTINGS,
        KafkaCluster,
    )

    return KafkaCluster(
        1,
        settings=BENCHMARK_SETTINGS,
        jvm_options=BENCHMARK_JVM_OPTIONS,
        heap="1g",
        name="kafka-bench",
    )


def broker_label(broker):
    if broker.name == "tansu":
        return "Tansu (memory storage)"
    return (
        f"Apache Kafka {broker.version} (one KRaft node, "
        f"{' '.join(broker.jvm_options[:2])}, -Xmx{broker.heap})"
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
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
    args = ap.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    if args.fetched_jars:
        args.jars = args.fetched_jars
    connector = None
    if not args.jars and not args.packages:
        try:
            connector, python = maven_connector()
        except Exception as exc:  # noqa: BLE001 -- no mvn, no network: say what to do
            print(f"{exc}"[:3000] + "\n\n" + NO_CONNECTOR, file=sys.stderr)
            return 2
        args.jars = ",".join(connector["jars"] + ([] if args.no_avro else [connector["avro_jar"]]))
        if python != sys.executable:
            # the connector's own Spark release: this script again, in its venv
            from tests.support.spark_connector import child_environment

            log(
                f"Spark's connector {connector['version']} from Maven Central; running in "
                f"pyspark {connector['version']} ({python})"
            )
            os.execve(
                python,
                [
                    python,
                    os.path.abspath(__file__),
                    *argv,
                    "--fetched-jars",
                    args.jars,
                    "--drawing-python",
                    sys.executable,
                ],
                child_environment(),
            )
    args.rates = [int(r) for r in args.rates.split(",") if r]
    only = {path.strip() for path in args.only.split(",") if path.strip()}
    if only - {"read", "write", "stream"}:
        ap.error(f"--only takes read, write and stream, not {', '.join(sorted(only))}")
    if args.no_stream:
        only.discard("stream")
    args.write_records = args.write_records or args.records // 2

    from tests.support.schema_registry import start_registry
    from tests.support.spark_support import make_spark

    conf = {"spark.jars": args.jars} if args.jars else {"spark.jars.packages": args.packages}
    conf["spark.sql.python.filterPushdown.enabled"] = "true"  # for pykafka's pushFilters
    for setting in args.conf:
        key, _, value = setting.partition("=")
        conf[key] = value
    started = time.monotonic()
    load_before = os.getloadavg()
    broker = start_broker(args.tansu)
    registry = start_registry()
    spark = make_spark("kafka_ds bench_jvm", driver_memory="4g", conf=conf)
    args.profiler = None
    if args.profile:
        import profiles

        profiles.TOOL_DIRS.append(os.path.dirname(args.drawing_python))
        args.profiler = profiles.Profiler(args.profile, broker, spark)
    try:
        try:
            _ = (
                spark.read.format("kafka")
                .option("kafka.bootstrap.servers", broker.bootstrap_servers)
                .option("subscribe", "none")
                .load()
                .schema
            )
        except Exception as exc:  # noqa: BLE001
            print(
                f'Spark\'s format("kafka") is not usable with these jars: {exc}'[:1500]
                + "\n\n"
                + NO_CONNECTOR,
                file=sys.stderr,
            )
            return 2
        avro = not args.no_avro
        if avro:
            try:
                from pyspark.sql.avro.functions import to_avro

                spark.range(1).select(to_avro("id")).collect()
            except Exception as exc:  # noqa: BLE001
                log(f"no spark-avro on the classpath, the Avro write is skipped ({exc!r:.200})")
                avro = False
        found = {"spark": spark.version, "kafka-clients": kafka_clients_version(args)}
        if args.fetched_jars or connector:
            found["spark"] += " with its connector from Maven Central"
        log(
            f"Spark {found['spark']}, kafka-clients {found['kafka-clients']}; "
            f"{broker_label(broker)} at {broker.bootstrap_servers}"
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
    command = " ".join([".venv/bin/python benchmarks/bench_jvm.py"] + shown)
    from harness import machine_and_load, replace_section

    header = (
        f"Command: `{command}` -- {dt.datetime.now():%Y-%m-%d %H:%M}, {minutes:.1f} min. "
        f"One Spark session (`local[2]`, Spark {found['spark']}, kafka-clients "
        f"{found['kafka-clients']}), {broker_label(broker)}, {args.records:,} records of "
        f"{args.value_size} B in {args.partitions} partitions read, "
        f"{args.write_records:,} rows written; load average (1 min) "
        f"{load_before[0]:.1f} at the start, {load_after[0]:.1f} at the end. "
        f"Machine: {machine_and_load()}."
    )
    if args.profiler:
        import profiles

        profiled = profiles.summary(args.profiler)
        with open(os.path.join(args.profile, "summary.md"), "w") as f:
            f.write(profiled)
        print("\nProfiles (" + args.profile + "):\n\n" + profiled)
    figures = raw_figures(read_rates, write_rates, stream, args)
    figures["floor"] = dict(floor)
    figures["title"] = (
        f"{broker_label(broker)}, Spark {found['spark']}, local[2], "
        f"{dt.datetime.now():%Y-%m-%d %H:%M}, load {load_before[0]:.1f}-{load_after[0]:.1f}"
    )
    text = tables(read_rates, write_rates, stream, args, in_range)
    if args.stream_breakdown and floor:
        text += "\n\n" + breakdown_table(stream, floor, args)
    text += (
        "\n\nTargets (issue #39; pykafka at its defaults against the tuned connector):\n\n"
        + jvm_report.targets_table(figures)
    )
    print("\n" + header + "\n\n" + text)
    if args.write_results and args.profiler:
        # a profiling run's figures are slowed by the recorders: its own section, and the
        # "jvm" section, its JSON and its chart stay those of a plain run
        path = os.path.join(HERE, "results.md")
        replace_section(
            path,
            "jvm-profile",
            '### Where the time goes against Spark\'s `format("kafka")` (`bench_jvm.py '
            "--profile`)\n\n" + header + "\n\n" + profiled,
        )
        print(f"\nwrote the jvm-profile section of {os.path.relpath(path)}")
    elif args.write_results:
        path = os.path.join(HERE, "results.md")
        chart = os.path.join(os.path.dirname(HERE), "docs", "images", "bench_jvm.png")
        replace_section(
            path,
            "jvm",
            '## Against Spark\'s `format("kafka")` (`bench_jvm.py`)\n\n'
            + header
            + "\n\n"
            + text
            + "\n\nChart: `docs/images/bench_jvm.png` (drawn by this run).",
        )
        with open(FIGURES_JSON, "w") as f:
            json.dump(figures, f, indent=1, sort_keys=True)
        draw_chart(args.drawing_python, chart)
        print(f"\nwrote the jvm section of {os.path.relpath(path)}, {FIGURES_JSON}, {chart}")
    return 0


FIGURES_JSON = os.path.join(HERE, "results_jvm.json")


def breakdown_table(stream, floor, args) -> str:
    """--stream-breakdown: the median of each trigger stage (ms) of every query at the first
    rate, and of stream_floor.py's queries (Spark's own cost, no Kafka) in the same session."""
    import stream_floor

    rate = args.rates[0]
    rows = [
        (f"{label}, {rate:,} records/s", phase["triggers"])
        for (at, label), phase in stream.items()
        if at == rate and "triggers" in phase
    ]
    return (
        "Where a trigger's time goes (median ms of Spark's trigger stages; the last rows: "
        "stream_floor.py's do-nothing Python source and sink, no Kafka):\n\n"
        + stream_floor.table(rows + floor)
    )


def raw_figures(read_rates, write_rates, stream, args) -> dict:
    """The run's figures as JSON-able dicts: {path: {connector: rows/s}}, and for streams
    {rate: {connector: phase}}; what jvm_report.py reads."""
    reads, writes = {}, {}
    for (key, label), value in read_rates.items():
        reads.setdefault(key, {})[label] = value
    for (key, label), value in write_rates.items():
        writes.setdefault(key, {})[label] = value
    streams = {}
    for (rate, label), phase in stream.items():
        streams.setdefault(str(rate), {})[label] = phase
    return {
        "records": args.records,
        "write_records": args.write_records,
        "repeat": args.repeat,
        "rates": args.rates,
        "reads": reads,
        "writes": writes,
        "stream": streams,
    }


def draw_chart(python, chart):
    """jvm_report.draw here if this Python has matplotlib, else with ``python``."""
    os.makedirs(os.path.dirname(chart), exist_ok=True)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        import subprocess

        subprocess.run(
            [python, os.path.join(HERE, "jvm_report.py"), FIGURES_JSON, chart],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return
    with open(FIGURES_JSON) as f:
        jvm_report.draw(json.load(f), chart)


if __name__ == "__main__":
    sys.exit(main())
