"""``valueFormat=debezium-json`` against Spark's ``from_json`` with a hand-written envelope
schema, on the same records, side by side in one run.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_cdc.py                 # 500k records
    PYTHONPATH=. .venv/bin/python benchmarks/bench_cdc.py --records 100000 --schemas

Starts one Apache Kafka node (tests/support/apache_kafka.py) and a Spark ``local[2]``
session, writes ``--records`` Debezium change events of a 7-column table (``id`` int,
``name`` string, ``qty`` bigint, ``price`` double, ``at`` MicroTimestamp, ``day`` Date,
``uid`` Uuid) as Kafka Connect's JSON converter writes them (``--schemas``: each value
carrying the envelope's Connect schema, 2.9 kB; default: the payload alone, ~420 B),
one in ten an update with ``before``, and reads them back twice, each to Spark's ``noop``
sink:

* **debezium-json**: ``format("pykafka")`` with ``valueFormat=debezium-json`` (and the DDL
  in ``valueSchema`` without schemas), ``value.*`` selected: op, before, after, source,
  ts_ms as typed columns;
* **from_json**: the same read with the value as bytes (``format("pykafka")``'s ``value``
  column, the same as ``format("kafka")``'s), ``from_json(CAST(value AS STRING), <the
  envelope as a DDL>)``, then the logical types turned into Spark's (``at`` with
  ``timestamp_micros``, ``day`` with ``date_from_unix_date``) -- what a user of
  ``format("kafka")`` writes by hand.

Both read the records through kafka_ds's own binary read, so the figures compare the two
decodes, not two Kafka clients. Decimals are left out: ``from_json`` has no way to read
Connect's base64 scaled bytes as a decimal. Best of ``--repeat`` (3) after a warm-up;
prints rows/s, the ratio debezium-json / from_json and the load average.
"""

from __future__ import annotations

import sys

import harness

from tests.support.apache_kafka import KafkaCluster

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
    def source():
        return (
            spark.read.format("pykafka")
            .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
        )

    def debezium():
        reader = source().option("valueFormat", "debezium-json")
        if not schemas:
            reader = reader.option("valueSchema", ROW_DDL)
        reader.load().select("value.*").write.format("noop").mode("overwrite").save()

    envelope = f"STRUCT<payload: STRUCT<{ENVELOPE_DDL}>>" if schemas else f"STRUCT<{ENVELOPE_DDL}>"
    path = "e.payload" if schemas else "e"

    def row(side):
        return (
            f"named_struct('id', {path}.{side}.id, 'name', {path}.{side}.name, "
            f"'qty', {path}.{side}.qty, 'price', {path}.{side}.price, "
            f"'at', CAST(timestamp_micros({path}.{side}.at) AS TIMESTAMP_NTZ), "
            f"'day', date_from_unix_date({path}.{side}.day), 'uid', {path}.{side}.uid) AS {side}"
        )

    def from_json():
        (
            source()
            .load()
            .selectExpr(f"from_json(CAST(value AS STRING), '{envelope}') AS e")
            .selectExpr(
                f"{path}.op AS op",
                row("before"),
                row("after"),
                f"{path}.source AS source",
                f"{path}.ts_ms AS ts_ms",
            )
            .write.format("noop")
            .mode("overwrite")
            .save()
        )

    return debezium, from_json


def main(argv=None) -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--schemas", action="store_true", help="values carry the Connect schema")
    args = ap.parse_args(argv)
    from tests.support.spark_support import make_spark

    cluster = KafkaCluster(1)
    spark = make_spark("kafka_ds bench_cdc")
    try:
        topic = "bench-cdc"
        cluster.create_topic(topic, 2)
        write_events(spark, cluster, topic, args.records, args.schemas)
        debezium, from_json = reads(spark, cluster, topic, args.schemas)
        load_before = harness.describe_load()
        seconds = {}
        debezium()  # warm-up
        from_json()
        for _ in range(args.repeat):  # alternated, best of each
            for name, fn in (("debezium-json", debezium), ("from_json", from_json)):
                seconds[name] = min(seconds.get(name, float("inf")), harness.timed(fn))
        print(
            f"{args.records:,} change events ({'with' if args.schemas else 'without'} "
            f"schemas), best of {args.repeat}; load {load_before} -> {harness.describe_load()}"
        )
        for name, took in seconds.items():
            print(f"  {name:14s} {args.records / took:12,.0f} rows/s  ({took:.2f} s)")
        ratio = seconds["from_json"] / seconds["debezium-json"]
        print(f"  debezium-json / from_json: {ratio:.2f}x")
    finally:
        spark.stop()
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
