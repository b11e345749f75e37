"""``valueSubjects`` with Protobuf and JSON: the cost of routing records to their subject.

    python benchmarks/bench_subjects.py                    # 400,000 records per format
    python benchmarks/bench_subjects.py --records 100000   # quick run

Two record types in one topic, one subject each (RecordNameStrategy), written by
confluent-kafka's ProtobufSerializer / JSONSerializer into the fake registry
(tests/support/schema_registry.py, real HTTP; every schema is fetched once, before timing):
Protobuf ``Order``/``Payment`` of one file (one schema id, message indexes [0] and [1]),
JSON Schemas titled ``benchjson.Order``/``benchjson.Payment``. The types alternate row by row, cut into
batches of ``--batch`` records.

Timed, batch by batch in turns (best of ``--repeat`` per batch, summed):

* ours: ``SubjectsCodec.decode`` of the mixed batch -> ``struct<member0, member1>``;
* peer: the same two subject codecs (``ProtobufCodec`` / ``JsonCodec``) decoding the
  batch's rows of their type, already split (what the decode costs without the routing).

The ratio ours/peer is what routing costs (grouping, take, struct assembly). The machine is
shared: figures move between runs; the ratios compare figures of the same run.
"""

from __future__ import annotations

import json

import harness
import pyarrow as pa
from confluent_kafka.schema_registry import SchemaRegistryClient, record_subject_name_strategy
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafka_ds.formats.record_subjects import subjects_codec
from kafka_ds.options.formats import ColumnFormatSpec
from kafka_ds.registry.client import SchemaRegistry
from kafka_ds.registry.settings import RegistrySettings
from tests.support.registry_fixtures import file_proto, message_classes
from tests.support.schema_registry import start_registry

CTX = SerializationContext("bench", MessageField.VALUE)
SHOP = file_proto(
    "bench_shop.proto",
    {
        "Order": [
            ("order_id", "int64"),
            ("user", "string"),
            ("amount", "double"),
            ("qty", "int32"),
            ("note", "string"),
        ],
        "Payment": [("payment_id", "string"), ("cents", "int64"), ("ok", "bool")],
    },
    package="bench",
)
JSON_SCHEMAS = {
    "Order": {
        "title": "benchjson.Order",
        "type": "object",
        "properties": {
            "order_id": {"type": "integer"},
            "user": {"type": "string"},
            "amount": {"type": "number"},
            "qty": {"type": "integer"},
            "note": {"type": "string"},
        },
    },
    "Payment": {
        "title": "benchjson.Payment",
        "type": "object",
        "properties": {
            "payment_id": {"type": "string"},
            "cents": {"type": "integer"},
            "ok": {"type": "boolean"},
        },
    },
}


def record(i):
    if i % 2 == 0:
        return "Order", {
            "order_id": i,
            "user": f"user-{i % 1000:04d}",
            "amount": i * 0.25,
            "qty": i % 50,
            "note": "n" * (i % 7),
        }
    return "Payment", {"payment_id": f"p{i:08d}", "cents": i * 3, "ok": i % 3 == 0}


def values(fmt, client, count):
    if fmt == "protobuf":
        classes = message_classes(SHOP)
        conf = {
            "subject.name.strategy": record_subject_name_strategy,
            "use.deprecated.format": False,
        }
        serialize = {
            name: ProtobufSerializer(classes[f"bench.{name}"], client, conf=conf)
            for name in ("Order", "Payment")
        }
        return [
            serialize[name](classes[f"bench.{name}"](**fields), CTX)
            for name, fields in map(record, range(count))
        ]
    serialize = {
        name: JSONSerializer(
            json.dumps(schema), client, conf={"subject.name.strategy": record_subject_name_strategy}
        )
        for name, schema in JSON_SCHEMAS.items()
    }
    return [serialize[name](fields, CTX) for name, fields in map(record, range(count))]


def bench(fmt, registry, records, batch, repeat):
    raw = values(fmt, SchemaRegistryClient({"url": registry.url}), records)
    lookup = SchemaRegistry(RegistrySettings.from_options({"schema.registry.url": registry.url}))
    package = "bench" if fmt == "protobuf" else "benchjson"
    codec = subjects_codec(
        ColumnFormatSpec("value", fmt, subjects=(f"{package}.Order", f"{package}.Payment")), lookup
    )
    ours_s = peer_s = 0.0
    for at in range(0, records, batch):
        chunk = raw[at : at + batch]
        mixed = pa.array(chunk, pa.binary())
        split = [pa.array(chunk[k::2], pa.binary()) for k in (0, 1)]  # Order, Payment rows
        result = codec.decode(mixed)  # warm: every schema fetched once
        assert not len(result.bad_rows), result.reasons[:1]
        ours_s += harness.best_of(repeat, lambda mixed=mixed: codec.decode(mixed))
        peer_s += harness.best_of(
            repeat,
            lambda split=split: [c.decode(a) for c, a in zip(codec.codecs, split, strict=True)],
        )
    return ours_s, peer_s


def main():
    parser = harness.parser(__doc__)
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    registry = start_registry()
    try:
        print(
            f"load: {harness.load_average()[0]:.2f}  records: {args.records}  batch: {args.batch}"
        )
        print(
            "| format | SubjectsCodec.decode (ns/record) | member codecs on pre-split rows "
            "(ns/record) | ratio |"
        )
        print("|---|---|---|---|")
        for fmt in ("protobuf", "json"):
            ours, peer = bench(fmt, registry, args.records, args.batch, args.repeat)
            print(
                f"| {fmt} | {ours / args.records * 1e9:.0f} | {peer / args.records * 1e9:.0f} "
                f"| {ours / peer:.2f}x |"
            )
        print(f"load: {harness.load_average()[0]:.2f}")
    finally:
        registry.stop()


if __name__ == "__main__":
    main()
