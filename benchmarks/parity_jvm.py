"""The same queries through pykafka and Spark's own ``format("kafka")``, compared row for row.

    .venv/bin/python benchmarks/parity_jvm.py --jars spark-sql-kafka-0-10_2.13-V.jar,spark-token-provider-kafka-0-10_2.13-V.jar,kafka-clients-K.jar,commons-pool2-P.jar
    .venv/bin/python benchmarks/parity_jvm.py --packages org.apache.spark:spark-sql-kafka-0-10_2.13:V
        [--write-results]

One Tansu broker, one ``local[2]`` session holding both connectors (not the librdkafka mock:
Spark's Java client cannot bootstrap from it, tests/README.md, mock deviation 1). Each case
runs the same query once with ``format("pykafka")`` and once with ``format("kafka")`` and
compares the schema and the rows, sorted by (topic, partition, offset); streaming cases
compare the micro-batches too (batch id -> rows). Writes go to a topic per connector and are
read back by confluent-kafka (an independent client).

The input is produced one record per record batch (confluent-kafka, ``batch.num.messages=1``):
the test brokers answer ListOffsets LATEST wrongly after multi-record batches (Tansu) and
Spark's connector trusts that answer, so multi-record batches would make the two connectors
differ for a reason that is the broker's. Tansu does not answer ListOffsets by timestamp
(always 0): the timestamp cases run pykafka twice, with its
default (``timestampOffsetsVia=auto``: the answer is checked, a Fetch search finds the
offsets) and with ``timestampOffsetsVia=listOffsets`` (trust the broker, as Spark's
connector does); the second must match Spark's rows, the first gives the right ones.

Prints a table (case | rows | schema | rows equal | note) and every difference; exits 1 when
a difference is not one of the explained ones (``EXPLAINED``, also in docs/differences.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

BASE_TS = 1_700_000_000_000
NO_CONNECTOR = """\
parity_jvm.py compares pykafka with Spark's own format("kafka"), whose jars are not part of
pyspark. Give them with --jars a.jar,b.jar (the connector, its token provider, kafka-clients,
commons-pool2) or --packages org.apache.spark:spark-sql-kafka-0-10_2.13:<your Spark version>.
"""

# case -> why the connectors differ there (docs/differences.md says the same).
EXPLAINED = {
    "write: key/value string, partition, headers, timestamp column, topic column": "pykafka's sink takes a `timestamp` column as the records' CreateTime; the Spark "
    "connector measured (4.1 development snapshot) ignores the column and stamps the "
    "send time (SPARK-50160 proposes the column for Spark)",
    "timestamps, pykafka default vs Spark": "the broker answers ListOffsets by timestamp wrongly (Tansu: always 0); "
    "pykafka's default checks the answer and searches the batches, Spark's connector "
    "trusts it (with timestampOffsetsVia=listOffsets pykafka returns Spark's rows)",
}


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- data ----------------------------------------------------------------------------------------


def records(partition, count, start=0):
    out = []
    for i in range(start, start + count):
        headers = (
            [("h", b"%d" % i), ("dup", b"a"), ("dup", b"b")]
            if i % 3 == 0
            else ([("none", None), ("empty", b"")] if i % 3 == 1 else [])
        )
        out.append(
            {
                "key": None if i % 7 == 6 else b"k%d" % i,
                "value": b"v-%d-%d" % (partition, i),
                "headers": headers,
                "partition": partition,
                "timestamp_ms": BASE_TS + 1000 * i + partition,
            }
        )
    return out


def produce(broker, topic, partitions, count, start=0):
    from tests.support.brokers import produce_confluent

    for partition in range(partitions):
        produce_confluent(
            broker.bootstrap_servers,
            topic,
            records(partition, count, start),
            **{"linger.ms": 0, "batch.num.messages": 1},
        )


# --- comparing -----------------------------------------------------------------------------------


def as_tuple(row):
    d = row.asDict()
    out = []
    for name in sorted(d):
        v = d[name]
        if isinstance(v, (bytes, bytearray)):
            v = bytes(v)
        elif isinstance(v, list):
            v = tuple(
                tuple((h["key"], None if h["value"] is None else bytes(h["value"]))) for h in v
            )
        out.append((name, v))
    return tuple(out)


def sort_key(t):
    if not all(isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) for x in t):
        return ("", -1, -1, repr(t))  # not a row of a DataFrame (a read-back record)
    d = dict(t)
    return (d.get("topic") or "", d.get("partition", -1), d.get("offset", -1), repr(t))


def rows_of(df):
    return sorted((as_tuple(r) for r in df.collect()), key=sort_key)


class Report:
    def __init__(self):
        self.lines = []
        self.unexplained = []

    def compare(self, case, left, right, note="", left_name="pykafka", right_name="kafka"):
        """``left``/``right``: (schema string or None, rows, extra dict)."""
        schema_same = left[0] == right[0]
        rows_same = left[1] == right[1]
        extra_same = left[2] == right[2]
        same = schema_same and rows_same and extra_same
        detail = ""
        if not same:
            detail = self.explain(left, right, left_name, right_name)
            if case not in EXPLAINED:
                self.unexplained.append(case)
            note = (note + "; " if note else "") + EXPLAINED.get(case, "NOT EXPLAINED")
        self.lines.append(
            (
                case,
                f"{len(left[1])} / {len(right[1])}",
                "same" if schema_same else "DIFFERS",
                "same" if rows_same and extra_same else "DIFFER",
                note,
                detail,
            )
        )
        log(
            f"{case}: rows {len(left[1])} / {len(right[1])}, schema "
            f"{'same' if schema_same else 'DIFFERS'}, rows {'same' if rows_same else 'DIFFER'}"
            + (f", {left[2]} vs {right[2]}" if not extra_same else "")
        )

    @staticmethod
    def explain(left, right, ln, rn):
        out = []
        if left[0] != right[0]:
            out.append(f"schema {ln}: {left[0]}\nschema {rn}: {right[0]}")
        if left[2] != right[2]:
            out.append(f"{ln}: {left[2]}\n{rn}: {right[2]}")
        a, b = set(left[1]), set(right[1])
        only_l, only_r = sorted(a - b, key=sort_key), sorted(b - a, key=sort_key)
        if only_l or only_r:
            out.append(
                f"rows only in {ln} ({len(only_l)}): {only_l[:3]}\n"
                f"rows only in {rn} ({len(only_r)}): {only_r[:3]}"
            )
        elif left[1] != right[1]:
            out.append("same rows, different multiplicity or order")
        return "\n".join(out)

    def table(self):
        lines = ["| case | rows pykafka / kafka | schema | rows | note |", "|---|---:|---|---|---|"]
        for case, n, schema, rows, note, _ in self.lines:
            lines.append(f"| {case} | {n} | {schema} | {rows} | {note} |")
        details = [f"* {case}:\n```\n{detail}\n```" for case, *_, detail in self.lines if detail]
        return "\n".join(lines) + ("\n\nDifferences:\n\n" + "\n".join(details) if details else "")


# --- the cases ------------------------------------------------------------------------------------


def batch_cases(spark, broker, report, a, b, prefix):
    bootstrap = broker.bootstrap_servers

    def read(fmt, **options):
        reader = spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
        for key, value in options.items():
            reader = reader.option(key, value)
        try:
            df = reader.load()
            return df.schema.simpleString(), rows_of(df), {}
        except Exception as exc:  # noqa: BLE001 -- failing on both sides is parity too
            log(f"{fmt} failed: {str(exc).strip().splitlines()[0][:300]}")
            return None, [], {"failed": True}

    def both(case, note="", **options):
        report.compare(case, read("pykafka", **options), read("kafka", **options), note)

    both("subscribe, earliest to latest", subscribe=f"{a},{b}", startingOffsets="earliest")
    both("subscribePattern", subscribePattern=f"{prefix}-.*", startingOffsets="earliest")
    both("assign", assign=json.dumps({a: [0, 2], b: [1]}), startingOffsets="earliest")
    both(
        "offsets JSON (-2/-1 and numbers)",
        subscribe=f"{a},{b}",
        startingOffsets=json.dumps({a: {"0": 2, "1": -2, "2": 5}, b: {"0": 1, "1": -2}}),
        endingOffsets=json.dumps({a: {"0": 9, "1": -1, "2": 11}, b: {"0": -1, "1": 4}}),
    )
    both("includeHeaders=true", subscribe=a, startingOffsets="earliest", includeHeaders="true")

    # minPartitions: the rows, and the offset ranges of Spark's partitions.
    def split(fmt):
        df = (
            spark.read.format(fmt)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", f"{a},{b}")
            .option("startingOffsets", "earliest")
            .option("minPartitions", "7")
            .load()
        )
        got = df.rdd.mapPartitionsWithIndex(
            lambda i, rows: [(i, r.topic, r.partition, r.offset) for r in rows]
        ).collect()
        groups = {}
        for i, t, p, o in got:
            groups.setdefault((i, t, p), []).append(o)
        ranges = sorted((t, p, min(g), max(g), len(g)) for (_i, t, p), g in groups.items())
        return (
            df.schema.simpleString(),
            rows_of(df),
            {"spark partitions": df.rdd.getNumPartitions(), "ranges": ranges},
        )

    report.compare("minPartitions=7", split("pykafka"), split("kafka"))

    # timestamps
    middle = BASE_TS + 1000 * 10
    by_ts = {a: {"0": middle, "1": middle + 5000, "2": BASE_TS - 1}}
    end_ts = {a: {"0": middle + 5000, "1": middle + 100_000, "2": middle}}
    options = dict(
        subscribe=a,
        startingOffsetsByTimestamp=json.dumps(by_ts),
        endingOffsetsByTimestamp=json.dumps(end_ts),
    )
    jvm = read("kafka", **options)
    report.compare(
        "timestamps, pykafka listOffsets vs Spark",
        read("pykafka", timestampOffsetsVia="listOffsets", **options),
        jvm,
        left_name="pykafka listOffsets",
    )
    report.compare("timestamps, pykafka default vs Spark", read("pykafka", **options), jvm)
    options = dict(subscribe=a, startingTimestamp=str(middle))
    jvm = read("kafka", **options)
    report.compare(
        "startingTimestamp, pykafka listOffsets vs Spark",
        read("pykafka", timestampOffsetsVia="listOffsets", **options),
        jvm,
        left_name="pykafka listOffsets",
    )


def stream_run(spark, broker, fmt, topic, checkpoint, **options):
    """An AvailableNow query into foreachBatch: {batch id: rows}."""
    batches = {}

    def sink(df, batch_id):
        batches[batch_id] = rows_of(df)

    reader = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    df = reader.load()
    query = (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    if query.isActive:
        query.stop()
        raise RuntimeError(f"{fmt}: the AvailableNow query did not end in 300 s")
    if query.exception() is not None:
        raise RuntimeError(f"{fmt}: {query.exception()}")
    return df.schema.simpleString(), batches


def streaming_cases(spark, broker, report, a, prefix):
    scratch = tempfile.mkdtemp(prefix="parity-jvm-")
    try:
        runs = {
            fmt: stream_run(
                spark,
                broker,
                fmt,
                a,
                os.path.join(scratch, f"mopt-{fmt}"),
                startingOffsets="earliest",
                maxOffsetsPerTrigger="20",
            )
            for fmt in ("pykafka", "kafka")
        }
        flat = {
            fmt: sorted((r for rows in b.values() for r in rows), key=sort_key)
            for fmt, (_s, b) in runs.items()
        }
        shape = {
            fmt: {"batches": {i: summarize(rows) for i, rows in sorted(b.items())}}
            for fmt, (_s, b) in runs.items()
        }
        report.compare(
            "stream, maxOffsetsPerTrigger=20, AvailableNow",
            (runs["pykafka"][0], flat["pykafka"], shape["pykafka"]),
            (runs["kafka"][0], flat["kafka"], shape["kafka"]),
        )

        # a restart from a checkpoint: run, produce more, run again
        topic = broker.create_topic(f"{prefix}-restart", partitions=2)
        produce(broker, topic, 2, 10)
        first = {
            fmt: stream_run(
                spark,
                broker,
                fmt,
                topic,
                os.path.join(scratch, f"re-{fmt}"),
                startingOffsets="earliest",
            )
            for fmt in ("pykafka", "kafka")
        }
        produce(broker, topic, 2, 5, start=10)
        second = {
            fmt: stream_run(
                spark,
                broker,
                fmt,
                topic,
                os.path.join(scratch, f"re-{fmt}"),
                startingOffsets="earliest",
            )
            for fmt in ("pykafka", "kafka")
        }
        for name, runs in (
            ("stream restart, first run", first),
            ("stream restart, run from the checkpoint", second),
        ):
            flat = {
                fmt: sorted((r for rows in b.values() for r in rows), key=sort_key)
                for fmt, (_s, b) in runs.items()
            }
            shape = {fmt: {"batch ids": sorted(b)} for fmt, (_s, b) in runs.items()}
            report.compare(
                name,
                (runs["pykafka"][0], flat["pykafka"], shape["pykafka"]),
                (runs["kafka"][0], flat["kafka"], shape["kafka"]),
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def summarize(rows):
    """{(topic, partition): (first offset, last offset, rows)} of one micro-batch."""
    out = {}
    for r in rows:
        d = dict(r)
        k = f"{d['topic']}-{d['partition']}"
        lo, hi, n = out.get(k, (d["offset"], d["offset"], 0))
        out[k] = (min(lo, d["offset"]), max(hi, d["offset"]), n + 1)
    return out


def write_cases(spark, broker, report, prefix):
    from pyspark.sql import functions as F

    from tests.support.brokers import consume_confluent

    ts = dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc)
    variants = {
        "write: key/value string, partition, headers, timestamp column, topic column": (
            "key string, value string, partition int, "
            "headers array<struct<key:string,value:binary>>, timestamp timestamp",
            lambda i: (
                f"k{i}" if i % 5 else None,
                f"v{i}" if i % 9 else None,
                i % 3,
                [("h", b"%d" % i), ("n", None)] if i % 2 else [],
                ts,
            ),
        ),
        "write: key/value binary, keyed partitioning (no partition column)": (
            "key binary, value binary",
            lambda i: (b"key-%d" % i, b"value-%d" % i),
        ),
    }
    for case, (schema, make) in variants.items():
        got = {}
        for fmt in ("pykafka", "kafka"):
            topic = broker.create_topic(f"{prefix}-w{len(got)}-{len(report.lines)}", partitions=3)
            df = spark.createDataFrame([make(i) for i in range(60)], schema)
            if "topic column" in case:
                df = df.withColumn("topic", F.lit(topic))
            writer = (
                df.write.format(fmt)
                .option("kafka.bootstrap.servers", broker.bootstrap_servers)
                .mode("append")
            )
            if "topic column" not in case:
                writer = writer.option("topic", topic)
            try:
                writer.save()
            except Exception as exc:  # noqa: BLE001 -- a refused write is a result here
                got[fmt] = (None, [], {"error": str(exc).splitlines()[0][:300]})
                continue
            msgs = consume_confluent(broker.bootstrap_servers, topic, expected=60, timeout=30)
            rows = sorted(
                (
                    (
                        m.partition,
                        m.key,
                        m.value,
                        tuple(m.headers or ()),
                        m.timestamp[1] == int(ts.timestamp() * 1000),
                    )
                    for m in msgs
                ),
                key=lambda r: (r[0], repr(r[1:])),
            )
            got[fmt] = (
                "read back by confluent-kafka",
                rows,
                {"timestamp column used": sorted({r[4] for r in rows})},
            )
        report.compare(
            case,
            got["pykafka"],
            got["kafka"],
            note="rows = (partition, key, value, headers, timestamp = the column's)",
        )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jars")
    ap.add_argument("--packages")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    if not args.jars and not args.packages:
        print(NO_CONNECTOR, file=sys.stderr)
        return 2

    from tests.support.brokers import TansuBroker
    from tests.support.spark_support import make_spark

    conf = {"spark.jars": args.jars} if args.jars else {"spark.jars.packages": args.packages}
    broker = TansuBroker()
    spark = make_spark("kafka_ds parity_jvm", conf=conf)
    report = Report()
    started = time.monotonic()
    try:
        prefix = broker.unique_topic("parity")
        a = broker.create_topic(f"{prefix}-a", partitions=3)
        b = broker.create_topic(f"{prefix}-b", partitions=2)
        produce(broker, a, 3, 30)
        produce(broker, b, 2, 12)
        batch_cases(spark, broker, report, a, b, prefix)
        streaming_cases(spark, broker, report, a, prefix)
        write_cases(spark, broker, report, prefix)
    finally:
        spark.stop()
        broker.stop()
    command = " ".join(
        [".venv/bin/python benchmarks/parity_jvm.py"] + (argv if argv is not None else sys.argv[1:])
    )
    header = (
        f"Command: `{command}` -- {dt.datetime.now():%Y-%m-%d %H:%M}, "
        f"{(time.monotonic() - started) / 60:.1f} min, Tansu, "
        f"Spark {spark.version}."
    )
    text = report.table()
    print("\n" + header + "\n\n" + text)
    if report.unexplained:
        print(f"\nNOT EXPLAINED: {report.unexplained}")
    if args.write_results:
        from run_all import replace_section

        path = os.path.join(HERE, "results.md")
        replace_section(
            path,
            "parity-jvm",
            '## Parity with Spark\'s `format("kafka")` (`parity_jvm.py`)\n\n'
            + header
            + "\n\n"
            + text,
        )
    return 1 if report.unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
