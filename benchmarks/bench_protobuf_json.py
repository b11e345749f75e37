"""Protobuf and JSON value decode: kafka_ds (into Arrow, per batch) vs confluent-kafka.

    python benchmarks/bench_protobuf_json.py                     # 1M records per format
    python benchmarks/bench_protobuf_json.py --records 100000    # quick run

The values: a flat 10-field message (int64 id and timestamp, int32 quantity and code,
double amount, float score, bool flag, three short strings), ~100 bytes as JSON, ~75 as
Protobuf, written by confluent-kafka's ProtobufSerializer / JSONSerializer (Confluent
framing, schema registered in its in-memory MockSchemaRegistryClient), cut into batches
of ``--batch`` records (what one fetched partition chunk gives the reader).

Timed, batch by batch in turns (best of ``--repeat`` per batch, summed):

* kafka_ds: ``ProtobufCodec.decode`` / ``JsonCodec.decode`` of a ``pa.BinaryArray`` ->
  one Arrow StructArray;
* confluent-kafka: its ProtobufDeserializer / JSONDeserializer called on every record
  (Python message objects / dicts, no columnar result). JSONDeserializer is timed with
  ``validate: False`` (kafka_ds checks types but not the full JSON Schema) and, on every
  tenth batch, with its default ``validate: True``.

The machine is shared: figures move between runs; the ratios compare figures of the
same run.
"""

from __future__ import annotations

import json

import harness
import pyarrow as pa
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafka_ds.formats.json.codec import JsonCodec
from kafka_ds.formats.protobuf.codec import ProtobufCodec
from tests.support.registry_fixtures import (
    MockLookup,
    MockSchemaRegistryClient,
    file_proto,
    message_classes,
)

CTX = SerializationContext("bench", MessageField.VALUE)
FIELDS = [
    ("id", "int64"),
    ("ts", "int64"),
    ("user", "string"),
    ("country", "string"),
    ("amount", "double"),
    ("qty", "int32"),
    ("score", "float"),
    ("flag", "bool"),
    ("session", "string"),
    ("code", "int32"),
]
JSON_TYPES = {
    "int64": "integer",
    "int32": "integer",
    "string": "string",
    "double": "number",
    "float": "number",
    "bool": "boolean",
}
JSON_SCHEMA = {
    "type": "object",
    "properties": {name: {"type": JSON_TYPES[kind]} for name, kind in FIELDS},
}


def record(i):
    return {
        "id": i,
        "ts": 1_700_000_000_000 + i,
        "user": f"user-{i % 100_000:06d}",
        "country": ("NO", "SE", "DK", "FI")[i % 4],
        "amount": i * 0.25,
        "qty": i % 50,
        "score": (i % 1000) / 8,
        "flag": i % 3 == 0,
        "session": f"s{i * 7919 % 10**9:09d}",
        "code": i % 7,
    }


def batches(values, size):
    return [values[at : at + size] for at in range(0, len(values), size)]


def run(name, ours, theirs, chunks, repeat, extra=None):
    ours_s = theirs_s = extra_s = 0.0
    extra_n = 0
    for k, (chunk, array) in enumerate(chunks):
        ours_s += harness.best_of(repeat, lambda array=array: ours(array))
        theirs_s += harness.best_of(repeat, lambda chunk=chunk: [theirs(v, CTX) for v in chunk])
        if extra is not None and k % 10 == 0:
            extra_s += harness.best_of(1, lambda chunk=chunk: [extra(v, CTX) for v in chunk])
            extra_n += len(chunk)
    n = sum(len(c) for c, _ in chunks)
    out = {
        "format": name,
        "records": n,
        "kafka_ds_rows_per_s": n / ours_s,
        "confluent_rows_per_s": n / theirs_s,
        "ratio": theirs_s / ours_s,
    }
    if extra_n:
        out["confluent_validating_rows_per_s"] = extra_n / extra_s
        out["ratio_vs_validating"] = (extra_s / extra_n) / (ours_s / n)
    return out


def main(argv=None):
    parser = harness.parser(__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    client = MockSchemaRegistryClient({"url": "mock://bench"})
    lookup = MockLookup(client)
    rows = [record(i) for i in range(args.records)]
    results = []

    Message = message_classes(file_proto("bench.proto", {"Event": FIELDS}))["test.Event"]
    serialize = ProtobufSerializer(Message, client)
    values = [serialize(Message(**r), CTX) for r in rows]
    schema_id = int.from_bytes(values[0][1:5], "big")
    codec = ProtobufCodec(
        lookup.schema_by_id(schema_id, fmt="serialized"),
        framed=True,
        lookup=lookup,
        schema_id=schema_id,
    )
    chunks = [(c, pa.array(c, pa.binary())) for c in batches(values, args.batch)]
    print(f"protobuf: {sum(map(len, values)) / len(values):.0f} B per value", flush=True)
    results.append(
        run("protobuf", codec.decode, ProtobufDeserializer(Message), chunks, args.repeat)
    )
    del values, chunks

    client.register_schema("bench-value", Schema(json.dumps(JSON_SCHEMA), "JSON"))
    serialize = JSONSerializer(json.dumps(JSON_SCHEMA), client, conf={"validate": False})
    values = [serialize(r, CTX) for r in rows]
    schema_id = int.from_bytes(values[0][1:5], "big")
    codec = JsonCodec(
        lookup.schema_by_id(schema_id), framed=True, lookup=lookup, schema_id=schema_id
    )
    chunks = [(c, pa.array(c, pa.binary())) for c in batches(values, args.batch)]
    print(f"json: {sum(map(len, values)) / len(values):.0f} B per value", flush=True)
    plain = JSONDeserializer(
        json.dumps(JSON_SCHEMA), schema_registry_client=client, conf={"validate": False}
    )
    validating = JSONDeserializer(json.dumps(JSON_SCHEMA), schema_registry_client=client)
    results.append(run("json", codec.decode, plain, chunks, args.repeat, extra=validating))

    for r in results:
        line = (
            f"{r['format']:8s} {r['records']:>9,} records  kafka_ds "
            f"{r['kafka_ds_rows_per_s']:>12,.0f} rows/s   confluent-kafka "
            f"{r['confluent_rows_per_s']:>12,.0f} rows/s   ratio {r['ratio']:.2f}x"
        )
        if "ratio_vs_validating" in r:
            line += (
                f"   (confluent validate=True {r['confluent_validating_rows_per_s']:,.0f}"
                f" rows/s, ratio {r['ratio_vs_validating']:.1f}x)"
            )
        print(line)
    print(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
