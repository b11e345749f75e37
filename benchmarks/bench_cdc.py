"""``valueFormat=debezium-json`` against Spark's ``from_json`` with a hand-written envelope
schema over Spark's own ``format("kafka")``, on the same records, side by side in one run.

    .venv/bin/python benchmarks/bench_cdc.py --records 200000
    .venv/bin/python benchmarks/bench_cdc.py --records 100000 --schemas [--write-results]

Spark's connector is not part of pyspark: as benchmarks/bench_jvm.py does (jvm_setup.py,
tests/support/spark_connector.py), the script fetches the newest release Maven Central serves
at or below this venv's pyspark (4.2.0 while the venv has 4.3) and, when that is not this
venv's pyspark, runs itself again with the Python of ``.venv-spark/<release>`` (kafka_ds on
its path), so both sides run in one Spark session of the connector's release, with the
connector's jars on ``spark.jars`` and ``format("pykafka")`` registered beside it
(``--jars``/``--packages`` give the connector by hand instead, in this venv's Spark).

Starts one Apache Kafka node (tests/support/apache_kafka.py) and a ``local[2]`` session,
writes ``--records`` Debezium change events of a 7-column table (``id`` int, ``name``
string, ``qty`` bigint, ``price`` double, ``at`` MicroTimestamp, ``day`` Date, ``uid`` Uuid)
into 2 partitions as Kafka Connect's JSON converter writes them (``--schemas``: each value
carrying the envelope's Connect schema, 2.9 kB; default: the payload alone, ~420 B), one in
ten an update with ``before``, and reads them back twice, each to Spark's ``noop`` sink:

* **debezium-json**: ``format("pykafka")`` with ``valueFormat=debezium-json`` (and the DDL
  in ``valueSchema`` without schemas), ``value.*`` selected: op, before, after, source,
  ts_ms as typed columns;
* **from_json**: Spark's ``format("kafka")`` (its batch-read settings of bench_jvm.py's
  "tuned" column: ``kafka.fetch.max.wait.ms=1``, 8 MiB partition fetches, 100,000 records
  a poll; its defaults wait 500 ms at the end of each task's range),
  ``from_json(CAST(value AS STRING), <the envelope as a DDL>)``, then the logical types
  turned into Spark's (``at`` with ``timestamp_micros``, ``day`` with
  ``date_from_unix_date``) -- what a user of ``format("kafka")`` writes by hand.

So the ratio is of what a user runs: kafka_ds's read and decode against Spark's JVM client
and ``from_json``. Decimals are left out: ``from_json`` has no way to read Connect's base64
scaled bytes as a decimal. Both sides' row counts are checked once, then one warm-up of
each and ``--repeat`` (3) alternated rounds, best of each; prints rows/s, the ratio
debezium-json / from_json and the load average; ``--write-results`` puts them into
benchmarks/results.md (section ``cdc`` or ``cdc-schemas``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import harness
import jvm_setup
from bench_jvm import TUNED_READ

ROW_DDL = "id INT, name STRING, qty BIGINT, price DOUBLE, at TIMESTAMP_NTZ, day DATE, uid STRING"
SOURCE_FIELDS = (
    "version STRING, connector STRING, name STRING, ts_ms BIGINT, snapshot STRING, "
    "db STRING, sequence STRING, schema STRING, table STRING, txId BIGINT, lsn BIGINT"
)
RAW_ROW = "id INT, name STRING, qty BIGINT, price DOUBLE, at BIGINT, day INT, uid STRING"
ENVELOPE_DDL = (
    f"op STRING, before STRUCT<{RAW_ROW}>, after STRUCT<{RAW_ROW}>, "
    f"source STRUCT<{SOURCE_FIELDS}>, ts_ms BIGINT"
)


def _connect_field(name, kind, logical=None, optional=True):
    field = {"type": kind, "optional": optional, "field": name}
    if logical:
        field.update({"name": logical, "version": 1})
    return field


def connect_schema() -> str:
    import json

    row = [
        _connect_field("id", "int32", optional=False),
        _connect_field("name", "string"),
        _connect_field("qty", "int64"),
        _connect_field("price", "float64"),
        _connect_field("at", "int64", "io.debezium.time.MicroTimestamp"),
        _connect_field("day", "int32", "io.debezium.time.Date"),
        _connect_field("uid", "string", "io.debezium.data.Uuid"),
    ]
    source = [
        _connect_field(n, "int64" if t == "BIGINT" else "string")
        for n, t in (f.strip().split(" ") for f in SOURCE_FIELDS.split(","))
    ]
    envelope = {
        "type": "struct",
        "name": "bench.public.orders.Envelope",
        "optional": False,
        "fields": [
            {"type": "struct", "fields": row, "optional": True, "field": "before"},
            {"type": "struct", "fields": row, "optional": True, "field": "after"},
            {"type": "struct", "fields": source, "optional": False, "field": "source"},
            _connect_field("op", "string", optional=False),
            _connect_field("ts_ms", "int64"),
        ],
    }
    return json.dumps(envelope, separators=(",", ":"))


def write_events(spark, cluster, topic: str, records: int, schemas: bool) -> None:
    row = (
        "named_struct('id', cast(id AS int), 'name', concat('customer ', id), "
        "'qty', id % 7, 'price', id * 0.25, 'at', 1704164645123456 + id * 1000, "
        "'day', cast(19000 + id % 1000 AS int), "
        "'uid', 'a0eebc99-9c0b-4ef8-bb6d-' || lpad(cast(id AS string), 12, '0'))"
    )
    source = (
        "named_struct('version', '3.6.1.Final', 'connector', 'postgresql', 'name', 'bench', "
        "'ts_ms', 1795934857907 + id, 'snapshot', 'false', 'db', 'postgres', "
        "'sequence', '[null,\"22049432\"]', 'schema', 'public', 'table', 'orders', "
        "'txId', 700 + id, 'lsn', 22049432 + id)"
    )
    payload = (
        f"named_struct('before', CASE WHEN id % 10 = 9 THEN {row} END, 'after', {row}, "
        f"'source', {source}, 'op', CASE WHEN id % 10 = 9 THEN 'u' ELSE 'c' END, "
        "'ts_ms', 1795934858034 + id)"
    )
    text = f"to_json({payload})"
    if schemas:
        text = f"concat('{{\"schema\":', '{connect_schema()}', ',\"payload\":', {text}, '}}')"
    (
        spark.range(records)
        .selectExpr(f"CAST({text} AS BINARY) AS value")
        .write.format("pykafka")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("topic", topic)
        .mode("append")
        .save()
    )


def reads(spark, cluster, topic: str, schemas: bool):
    """(debezium-json, from_json, row counts): the two timed reads, and the rows each reads."""

    def source(fmt, options):
        reader = (
            spark.read.format(fmt)
            .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
        )
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load()

    def debezium_frame():
        options = {"valueFormat": "debezium-json"}
        if not schemas:
            options["valueSchema"] = ROW_DDL
        return source("pykafka", options).select("value.*")

    envelope = f"STRUCT<payload: STRUCT<{ENVELOPE_DDL}>>" if schemas else f"STRUCT<{ENVELOPE_DDL}>"
    path = "e.payload" if schemas else "e"

    def row(side):
        return (
            f"named_struct('id', {path}.{side}.id, 'name', {path}.{side}.name, "
            f"'qty', {path}.{side}.qty, 'price', {path}.{side}.price, "
            f"'at', CAST(timestamp_micros({path}.{side}.at) AS TIMESTAMP_NTZ), "
            f"'day', date_from_unix_date({path}.{side}.day), 'uid', {path}.{side}.uid) AS {side}"
        )

    def from_json_frame():
        return (
            source("kafka", TUNED_READ)
            .selectExpr(f"from_json(CAST(value AS STRING), '{envelope}') AS e")
            .selectExpr(
                f"{path}.op AS op",
                row("before"),
                row("after"),
                f"{path}.source AS source",
                f"{path}.ts_ms AS ts_ms",
            )
        )

    def to_noop(frame):
        return lambda: frame().write.format("noop").mode("overwrite").save()

    def counts():
        return {
            "debezium-json": debezium_frame().where("after.id IS NOT NULL").count(),
            "from_json": from_json_frame().where("after.id IS NOT NULL").count(),
        }

    return to_noop(debezium_frame), to_noop(from_json_frame), counts


def arguments() -> argparse.ArgumentParser:
    ap = harness.parser(__doc__)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--schemas", action="store_true", help="values carry the Connect schema")
    ap.add_argument("--jars", help="comma-separated jars of Spark's Kafka connector")
    ap.add_argument("--packages", help="Maven coordinates of Spark's Kafka connector")
    harness.add_write_results(ap, "cdc or cdc-schemas")
    # set when this script ran itself again in the connector's pyspark (jvm_setup.py)
    ap.add_argument("--fetched-jars", help=argparse.SUPPRESS)
    ap.add_argument("--drawing-python", help=argparse.SUPPRESS)
    return ap


def main(argv=None) -> int:
    args = arguments().parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    args.no_avro, args.conf = True, []
    try:
        connector = jvm_setup.take_connector(args, argv, os.path.abspath(__file__))
    except jvm_setup.NoConnector as exc:
        print(exc, file=sys.stderr)
        return 2
    from tests.support.apache_kafka import KafkaCluster
    from tests.support.spark_support import make_spark

    cluster = KafkaCluster(1)
    spark = make_spark("kafka_ds bench_cdc", conf=jvm_setup.session_conf(args))
    try:
        jvm_setup.check_connector(spark, cluster)
        jar = re.search(r"spark-sql-kafka-0-10_2\.13-([^/,]+?)\.jar", args.jars or "")
        release = f"{spark.version}, its connector {jar.group(1) if jar else args.packages}"
        if connector or args.fetched_jars:
            release += " from Maven Central"
        topic = "bench-cdc"
        cluster.create_topic(topic, 2)
        write_events(spark, cluster, topic, args.records, args.schemas)
        debezium, from_json, counts = reads(spark, cluster, topic, args.schemas)
        found = counts()
        if set(found.values()) != {args.records}:
            raise AssertionError(f"rows read: {found}, written {args.records:,}")
        load_before = harness.describe_load()
        seconds = {}
        debezium()  # warm-up
        from_json()
        for round_ in range(args.repeat):  # alternated, best of each
            for name, fn in (("debezium-json", debezium), ("from_json", from_json)):
                took = harness.timed(fn)
                seconds[name] = min(seconds.get(name, float("inf")), took)
                harness.log(f"round {round_ + 1}, {name}: {took:.2f} s")
    finally:
        spark.stop()
        cluster.stop()
    load_after = harness.describe_load()
    ratio = seconds["from_json"] / seconds["debezium-json"]
    sides = {
        "debezium-json": 'format("pykafka"), valueFormat=debezium-json',
        "from_json": 'format("kafka") (Spark\'s connector, tuned reads), from_json',
    }
    shown = argv[: argv.index("--fetched-jars")] if args.fetched_jars else argv
    lines = [
        f"Command: `{harness.command_line('bench_cdc.py', shown)}` -- {harness.stamp()}. "
        f"{args.records:,} change events ({'with' if args.schemas else 'without'} schemas) "
        f"in 2 partitions of one Apache Kafka node, one Spark session (`local[2]`, Spark "
        f"{release}, kafka-clients {jvm_setup.kafka_clients_version(args)}), best of "
        f"{args.repeat} after a warm-up; load average {load_before} -> {load_after}. "
        f"Machine: {harness.machine()}.",
        "",
        "| read | rows/s | best s |",
        "|---|---:|---:|",
    ]
    for name, took in seconds.items():
        lines.append(f"| {sides[name]} | {args.records / took:,.0f} | {took:.2f} |")
    lines += ["", f"debezium-json / from_json: **{ratio:.2f}x**"]
    text = "\n".join(lines)
    print("\n" + text)
    if args.write_results:
        title = '## Debezium JSON against `from_json` over `format("kafka")` (`bench_cdc.py`'
        title += ", with schemas)" if args.schemas else ")"
        section = "cdc-schemas" if args.schemas else "cdc"
        harness.replace_section(harness.RESULTS_MD, section, title + "\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
