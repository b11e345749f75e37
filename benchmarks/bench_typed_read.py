"""End-to-end typed read: ``valueFormat=avro|protobuf|json`` against the same read as binary.

    flock /tmp/kafka_ds-bench.lock .venv/bin/python benchmarks/bench_typed_read.py
    .venv/bin/python benchmarks/bench_typed_read.py --records 200000 --formats avro   # quick

For each format: registers the schema of a flat 10-field record (``bench_avro.py``'s
order: two longs, two ints, two doubles, two strings, a boolean, a nullable string) under
``<topic>-value`` in the test suite's fake Schema Registry (``tests/support/schema_registry.py``,
real HTTP on 127.0.0.1), encodes N records with it (Confluent framing: magic byte, schema
id, Protobuf message indexes), fills a topic of the librdkafka mock cluster (3 brokers, 32
partitions as ``bench_read.py``; more where the values would pass ~4 MB a partition, as
the mock keeps ~5 MiB), then times, local[2], best of ``--repeat`` after a warm-up, the
two reads in turns:

* binary -- ``spark.read.format("pykafka")...load().write.format("noop")`` (value as bytes);
* typed  -- the same with ``valueFormat`` and ``schema.registry.url``,
  ``.select("value.*").write.format("noop")`` (the reader schema looked up on the driver,
  the writer schema fetched once per Python worker, every record decoded into Arrow).

Prints rows/s of both and the ratio (target: typed >= 0.5x binary) as a Markdown table,
with the load average before and after (the machine is shared).
"""

from __future__ import annotations

import base64
import json
import sys
import time

import harness
import pyarrow as pa
from bench_avro import SCHEMA as AVRO_SCHEMA
from bench_avro import make_records
from bench_read import PARTITIONS, fill_topic

from kafka_ds.registry.schema import RegisteredSchema
from tests.support.registry_fixtures import file_proto

FORMATS = ("avro", "protobuf", "json")
TARGET = 0.5
PARTITION_BYTES = 4_000_000  # the most values bytes put in one mock partition

# The same order as bench_avro.SCHEMA, in Protobuf (proto3; note has presence) ...
PROTO_FIELDS = [
    ("order_id", "int64"),
    ("customer_id", "int64"),
    ("quantity", "int32"),
    ("store", "int32"),
    ("price", "double"),
    ("discount", "double"),
    ("status", "string"),
    ("sku", "string"),
    ("gift", "bool"),
    ("note", "optional string"),
]
# ... and in JSON Schema
JSON_TYPES = {
    "long": "integer",
    "int": "integer",
    "double": "number",
    "string": "string",
    "boolean": "boolean",
}


def schema_text(fmt: str) -> str:
    """The registered text of the order schema in ``fmt`` (Protobuf: base64 of a serialized
    FileDescriptorProto, as confluent-kafka's ProtobufSerializer registers it)."""
    if fmt == "avro":
        return json.dumps(AVRO_SCHEMA)
    if fmt == "protobuf":
        proto = file_proto("bench/order.proto", {"Order": PROTO_FIELDS}, package="bench")
        return base64.b64encode(proto.SerializeToString()).decode()
    properties = {}
    for field in AVRO_SCHEMA["fields"]:
        avro_type = field["type"]
        properties[field["name"]] = (
            {"type": ["null", "string"]}
            if isinstance(avro_type, list)
            else {"type": JSON_TYPES[avro_type]}
        )
    return json.dumps({"type": "object", "properties": properties})


def encoded_values(fmt: str, schema_id: int, records: int) -> pa.Array:
    """``records`` orders, encoded and framed by kafka_ds's codec of ``fmt``."""
    from kafka_ds.formats.avro.codec import AvroCodec
    from kafka_ds.formats.json.codec import JsonCodec
    from kafka_ds.formats.protobuf.codec import ProtobufCodec

    schema = RegisteredSchema(fmt.upper(), schema_text(fmt), schema_id=schema_id)
    codec = {"avro": AvroCodec, "protobuf": ProtobufCodec, "json": JsonCodec}[fmt](
        schema, framed=True, schema_id=schema_id
    )
    chunks = []
    rows = list(make_records(records))
    for start in range(0, records, 100_000):
        chunk = pa.array(rows[start : start + 100_000], type=codec.arrow_type)
        chunks.append(codec.encode(chunk))
    return pa.concat_arrays(chunks)


def measure(
    spark, cluster, registry_url: str, fmt: str, records: int, repeat: int, log=print
) -> dict:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    topic = f"bench_typed_{fmt}_{records}"
    schema_id = SchemaRegistryClient({"url": registry_url}).register_schema(
        f"{topic}-value", Schema(schema_text(fmt), fmt.upper())
    )
    started = time.perf_counter()
    values = encoded_values(fmt, schema_id, records)
    size = (len(values.buffers()[2]) if values.buffers()[2] else 0) / records
    # the mock keeps ~5 MiB per partition: more partitions for larger values
    partitions = max(PARTITIONS, 32 * -(-int(size * records) // (32 * PARTITION_BYTES)))
    cluster.create_topic(topic, partitions=partitions)
    fill_topic(
        cluster.bootstrap_servers,
        topic,
        records,
        value_size=int(size) + 1,
        partitions=partitions,
        values=values,
    )
    log(
        f"{fmt}: {records:,} records of {size:.1f} B (framed) encoded and produced in "
        f"{time.perf_counter() - started:.1f} s"
    )
    binary = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("subscribe", topic)
    )
    typed = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("subscribe", topic)
        .option("valueFormat", fmt)
        .option("schema.registry.url", registry_url)
    )
    # every record decoded, to the right values: counts and a checksum of one column
    check = (
        typed.load()
        .selectExpr("count(*) AS n", "count(value) AS decoded", "sum(value.order_id) AS ids")
        .first()
    )
    expected_ids = sum(range(1_000_000_000, 1_000_000_000 + records))
    assert (check.n, check.decoded, check.ids) == (records, records, expected_ids), check

    def run_binary():
        binary.load().write.format("noop").mode("overwrite").save()

    def run_typed():
        typed.load().select("value.*").write.format("noop").mode("overwrite").save()

    run_binary(), run_typed()  # warm-up: workers, schema caches
    binary_times, typed_times = [], []
    for _ in range(repeat):  # in turns: both see the same noise
        binary_times.append(harness.timed(run_binary))
        typed_times.append(harness.timed(run_typed))
    try:
        cluster.delete_topic(topic)
    except Exception:
        pass
    result = {
        "format": fmt,
        "size": size,
        "partitions": partitions,
        "binary": records / min(binary_times),
        "typed": records / min(typed_times),
    }
    log(f"{fmt}: {result}")
    return result


def table(results, records: int, repeat: int, load_before, load_after) -> str:
    lines = [
        f"End-to-end typed read, {records:,} records of a 10-field flat record, local[2], "
        f"mock cluster, noop sink, best of {repeat}; load "
        f"average {load_before[0]:.1f} before, {load_after[0]:.1f} after",
        "",
        "| valueFormat | value (framed) | partitions | binary noop rows/s | typed `value.*` "
        f"noop rows/s | typed / binary | >= {TARGET}x? |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        ratio = r["typed"] / r["binary"]
        lines.append(
            f"| {r['format']} | {r['size']:.0f} B | {r['partitions']} | {r['binary']:,.0f} | "
            f"{r['typed']:,.0f} | {ratio:.2f}x | {'yes' if ratio >= TARGET else 'NO'} |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = harness.parser(__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--formats", default=",".join(FORMATS))
    args = parser.parse_args(argv)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = set(formats) - set(FORMATS)
    if unknown:
        parser.error(f"unknown formats {sorted(unknown)}; choose from {FORMATS}")

    from tests.support.brokers import MockCluster
    from tests.support.schema_registry import start_registry
    from tests.support.spark_support import make_spark

    load_before = harness.load_average()
    registry = start_registry()
    cluster = MockCluster(3)
    spark = make_spark("kafka_ds bench_typed_read")
    try:
        results = [
            measure(
                spark,
                cluster,
                registry.url,
                fmt,
                args.records,
                args.repeat,
                log=lambda s: print(s, file=sys.stderr),
            )
            for fmt in formats
        ]
    finally:
        spark.stop()
        cluster.stop()
        registry.stop()
    print()
    print(table(results, args.records, args.repeat, load_before, harness.load_average()))


if __name__ == "__main__":
    main()
