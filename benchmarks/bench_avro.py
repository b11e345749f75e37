"""Confluent-framed Avro decode into Arrow: kafka_ds's AvroCodec vs confluent-kafka's AvroDeserializer
(and, with ``--encode``, Arrow into Confluent-framed Avro: AvroCodec.encode vs AvroSerializer).

    python benchmarks/bench_avro.py                    # 1M records, batches of 50k
    python benchmarks/bench_avro.py --records 200000   # quick run
    python benchmarks/bench_avro.py --encode --batch 10000   # the encode benchmark

Builds N records of a 10-field flat Avro record (~100 B: longs, ints, doubles, strings, a
boolean, a nullable string), serialized and framed by confluent-kafka's own AvroSerializer
(schema registered in its mock registry client). Then, on one pinned core, in the same run:

* kafka_ds: ``AvroCodec.decode`` on each batch (a pa.BinaryArray of framed values, what the
  reader hands the codec) -> one Arrow struct array per batch (the fast, column-wise path;
  ``--general`` times the per-record fastavro path as well);
* confluent-kafka: ``AvroDeserializer(message, ctx)`` on every message -> one dict each
  (its default: the writer schema fetched from the registry client and cached).

``--encode`` times the other direction on the same core and records: kafka_ds's
``AvroCodec.encode`` on Arrow struct batches (built beforehand, as Spark hands them to the
writer; the column-wise path of ``kafka_ds.formats.avro.encode``; ``--general`` adds the
fastavro-per-row path) against ``AvroSerializer(record, ctx)`` on every record's dict
(built beforehand), after checking both give the same bytes. ``--union`` writes a union
of two records instead (several types in one topic: every other record a ``Payment``),
from spark-avro's ``struct<member0, member1>`` on our side and the ``(name, record)``
notation on confluent's.

Best of ``--repeat`` for each. Prints records/s for each and the ratio.
"""

from __future__ import annotations

import json
import os
import random
import time

import harness
import pyarrow as pa

from kafka_ds.formats.avro.codec import AvroCodec
from kafka_ds.registry.schema import RegisteredSchema
from tests.support.registry_fixtures import MockLookup, MockSchemaRegistryClient

SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "bench",
    "fields": [
        {"name": "order_id", "type": "long"},
        {"name": "customer_id", "type": "long"},
        {"name": "quantity", "type": "int"},
        {"name": "store", "type": "int"},
        {"name": "price", "type": "double"},
        {"name": "discount", "type": "double"},
        {"name": "status", "type": "string"},
        {"name": "sku", "type": "string"},
        {"name": "gift", "type": "boolean"},
        {"name": "note", "type": ["null", "string"]},
    ],
}
STATUSES = ("new", "paid", "shipped", "cancelled", "returned")
PAYMENT = {
    "type": "record",
    "name": "Payment",
    "namespace": "bench",
    "fields": [
        {"name": "payment_id", "type": "string"},
        {"name": "order_id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "card", "type": ["null", "string"]},
    ],
}


def as_union(records):
    """``(spark-avro member structs, confluent's (name, record) values)``: every other
    record a Payment."""
    members, tagged = [], []
    for i, r in enumerate(records):
        if i % 2:
            payment = {
                "payment_id": f"pay-{r['order_id']}",
                "order_id": r["order_id"],
                "amount": r["price"],
                "card": r["note"],
            }
            members.append({"member0": None, "member1": payment})
            tagged.append(("bench.Payment", payment))
        else:
            members.append({"member0": r, "member1": None})
            tagged.append(("bench.Order", r))
    return members, tagged


def make_records(n, seed=7):
    rnd = random.Random(seed)
    for i in range(n):
        yield {
            "order_id": 1_000_000_000 + i,
            "customer_id": rnd.randrange(1 << 40),
            "quantity": rnd.randrange(1, 20),
            "store": rnd.randrange(5000),
            "price": rnd.random() * 500,
            "discount": rnd.random(),
            "status": rnd.choice(STATUSES),
            "sku": f"EU-WEST-RACK-{rnd.randrange(99):02d}/SKU-{rnd.randrange(10**8):08d}",
            "gift": rnd.random() < 0.1,
            "note": None
            if rnd.random() < 0.5
            else f"leave at door #{rnd.randrange(10**6)} please ok",
        }


def main():
    parser = harness.parser(__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=50_000, help="records per decode call")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--general", action="store_true", help="also time the per-record path")
    parser.add_argument(
        "--union",
        action="store_true",
        help="with --encode: a union of two record types (member struct)",
    )
    parser.add_argument(
        "--encode",
        action="store_true",
        help="time encoding (AvroCodec.encode vs AvroSerializer) instead",
    )
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    if args.encode:
        return encode_benchmark(args)

    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = MockSchemaRegistryClient({"url": "mock://bench-avro"})
    ctx = SerializationContext("orders", MessageField.VALUE)
    serializer = AvroSerializer(client, json.dumps(SCHEMA))
    t0 = time.perf_counter()
    messages = [serializer(r, ctx) for r in make_records(args.records)]
    build = time.perf_counter() - t0
    size = sum(map(len, messages)) / len(messages)
    schema_id = int.from_bytes(messages[0][1:5], "big")
    batches = [
        pa.array(messages[i : i + args.batch], pa.binary())
        for i in range(0, len(messages), args.batch)
    ]
    print(
        f"{args.records} records, {size:.1f} B each framed, batches of {args.batch} "
        f"(built in {build:.1f} s)"
    )

    reader = RegisteredSchema("AVRO", json.dumps(SCHEMA), schema_id=schema_id)
    codec = AvroCodec(reader, framed=True, lookup=MockLookup(client))
    first = codec.decode(batches[0])
    assert first.bad_rows.size == 0, first.reasons[:3]

    def ours():
        for batch in batches:
            codec.decode(batch)

    deserializer = AvroDeserializer(client)
    # the same values both ways
    assert first.array.slice(0, 100).to_pylist() == [deserializer(m, ctx) for m in messages[:100]]

    def theirs():
        for m in messages:
            deserializer(m, ctx)

    ours_s = harness.best_of(args.repeat, ours)
    theirs_s = harness.best_of(max(1, args.repeat - 1), theirs)
    n = args.records
    print(
        f"kafka_ds AvroCodec.decode (fast path): {ours_s:7.3f} s  {n / ours_s / 1e6:6.2f} M records/s"
    )
    print(
        f"confluent-kafka AvroDeserializer:      {theirs_s:7.3f} s  {n / theirs_s / 1e6:6.2f} M records/s"
    )
    print(f"ratio: {theirs_s / ours_s:.1f}x (target >= 3x)")
    if args.general:

        class GeneralPathCodec(AvroCodec):
            def _column_plan(self, writer, reader):
                return None  # every schema through the general path

        general = GeneralPathCodec(reader, framed=True, lookup=MockLookup(client))
        general_s = harness.best_of(1, lambda: [general.decode(b) for b in batches])
        print(
            f"kafka_ds general path (fastavro per record): {general_s:7.3f} s  "
            f"{n / general_s / 1e6:6.2f} M records/s"
        )


def encode_benchmark(args):
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = MockSchemaRegistryClient({"url": "mock://bench-avro-encode"})
    ctx = SerializationContext("orders", MessageField.VALUE)
    schema = [SCHEMA, PAYMENT] if args.union else SCHEMA
    serializer = AvroSerializer(client, json.dumps(schema))
    records = list(make_records(args.records))
    rows = records
    if args.union:
        rows, records = as_union(records)
    first = serializer(records[0], ctx)
    schema_id = int.from_bytes(first[1:5], "big")
    writer = RegisteredSchema("AVRO", json.dumps(schema), schema_id=schema_id)
    codec = AvroCodec(writer, framed=True, schema_id=schema_id)
    batches = [
        pa.array(rows[i : i + args.batch], type=codec.arrow_type)
        for i in range(0, len(rows), args.batch)
    ]
    assert codec._column_encoder(codec.arrow_type) is not None, "not the column-wise path"
    # the same bytes both ways
    check = min(1000, args.records)
    encoded = codec.encode(batches[0])
    assert encoded.to_pylist()[:check] == [serializer(r, ctx) for r in records[:check]]
    size = len(encoded.buffers()[2]) / len(encoded)
    print(
        f"{args.records} records{' of two types (a union)' if args.union else ''}, "
        f"{size:.1f} B each framed (first batch), Arrow batches of {args.batch}"
    )

    def ours():
        for batch in batches:
            codec.encode(batch)

    def theirs():
        for r in records:
            serializer(r, ctx)

    load = harness.load_average()[0]
    ours_s = harness.best_of(args.repeat, ours)
    theirs_s = harness.best_of(max(1, args.repeat - 1), theirs)
    n = args.records
    print(
        f"kafka_ds AvroCodec.encode (column-wise): {ours_s:7.3f} s  {n / ours_s / 1e6:6.2f} M records/s"
    )
    print(
        f"confluent-kafka AvroSerializer:          {theirs_s:7.3f} s  {n / theirs_s / 1e6:6.2f} M records/s"
    )
    print(
        f"ratio: {theirs_s / ours_s:.1f}x (target >= 5x); load average {load:.2f} before, "
        f"{harness.load_average()[0]:.2f} after"
    )
    if args.general:

        class GeneralEncodeCodec(AvroCodec):
            def _column_encoder(self, arrow_type):
                return None  # every column through fastavro per row

        general = GeneralEncodeCodec(writer, framed=True, schema_id=schema_id)
        general_s = harness.best_of(1, lambda: [general.encode(b) for b in batches])
        print(
            f"kafka_ds general path (fastavro per row): {general_s:7.3f} s  "
            f"{n / general_s / 1e6:6.2f} M records/s"
        )


if __name__ == "__main__":
    main()
