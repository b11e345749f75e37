"""Avro schema references (#30) in the codec, no broker, no Spark: the fake registry (real
HTTP) and confluent-kafka's serializers give the bytes.

* a top-level union of referenced records decodes (fastavro alone cannot: UnknownType) and
  encodes to confluent-kafka's bytes;
* references of references, a type in the null namespace used inside a namespaced
  record, a name used twice (defined once);
* referenced subjects are fetched once per process, however many codecs use them.
"""

import json

import fastavro
import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry import SchemaReference as ConfluentReference
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafka_ds.formats.avro.codec import AvroCodec
from kafka_ds.formats.avro.references import inline_references, self_contained
from kafka_ds.registry.client import SchemaRegistry
from kafka_ds.registry.settings import RegistrySettings
from tests.support.schema_registry import schema_registry  # noqa: F401  (fixture)

ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "com.acme.geo",
    "fields": [{"name": "city", "type": "string"}],
}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "com.acme",
    "fields": [
        {"name": "order_id", "type": "long"},
        {"name": "ship_to", "type": "com.acme.geo.Address"},
        {"name": "bill_to", "type": ["null", "com.acme.geo.Address"], "default": None},
    ],
}
CURRENCY = {
    "type": "enum",
    "name": "Currency",
    "namespace": "com.acme.money",
    "symbols": ["EUR", "USD"],
}
PAYMENT = {
    "type": "record",
    "name": "Payment",
    "namespace": "com.acme",
    "fields": [
        {"name": "payment_id", "type": "string"},
        {"name": "currency", "type": "com.acme.money.Currency"},
    ],
}


def ref(name, version=1):
    return ConfluentReference(name, name, version)


@pytest.fixture
def events(schema_registry):  # noqa: F811
    """``events-value`` = [Order, Payment]; Order references Address and Payment
    Currency (references of references)."""
    client = SchemaRegistryClient({"url": schema_registry.url})
    client.register_schema("com.acme.geo.Address", Schema(json.dumps(ADDRESS), "AVRO"))
    client.register_schema("com.acme.money.Currency", Schema(json.dumps(CURRENCY), "AVRO"))
    client.register_schema(
        "com.acme.Order", Schema(json.dumps(ORDER), "AVRO", [ref("com.acme.geo.Address")])
    )
    client.register_schema(
        "com.acme.Payment", Schema(json.dumps(PAYMENT), "AVRO", [ref("com.acme.money.Currency")])
    )
    client.register_schema(
        "events-value",
        Schema(
            json.dumps(["com.acme.Order", "com.acme.Payment"]),
            "AVRO",
            [ref("com.acme.Order"), ref("com.acme.Payment")],
        ),
    )
    return client


def lookup_for(registry):
    # a client of its own (not registry_for's per-process one): the fetch count is this test's
    return SchemaRegistry(RegistrySettings.from_options({"schema.registry.url": registry.url}))


EVENTS = [
    {"order_id": 1, "ship_to": {"city": "Oslo"}, "bill_to": None},
    {"payment_id": "p1", "currency": "USD"},
    {"order_id": 2, "ship_to": {"city": "Rome"}, "bill_to": {"city": "Pisa"}},
]
ROWS = [
    {"member0": EVENTS[0], "member1": None},
    {"member0": None, "member1": EVENTS[1]},
    {"member0": EVENTS[2], "member1": None},
]


def test_union_of_references_decodes_and_encodes_as_confluent(events, schema_registry):  # noqa: F811
    ctx = SerializationContext("events", MessageField.VALUE)
    serializer = AvroSerializer(
        events, None, conf={"use.latest.version": True, "auto.register.schemas": False}
    )
    raw = [serializer(e, ctx) for e in EVENTS]
    assert [AvroDeserializer(events)(r, ctx) for r in raw] == EVENTS

    lookup = lookup_for(schema_registry)
    codec = AvroCodec(lookup.schema_version("events-value", "latest"), framed=True, lookup=lookup)
    assert codec.spark_type == (
        "struct<member0:struct<order_id:bigint,ship_to:struct<city:string>,"
        "bill_to:struct<city:string>>,member1:struct<payment_id:string,currency:string>>"
    )
    decoded = codec.decode(pa.array(raw))
    assert decoded.reasons == []
    assert decoded.array.to_pylist() == ROWS
    assert codec.encode(decoded.array).to_pylist() == raw


def test_referenced_subjects_are_fetched_once_per_client(events, schema_registry):  # noqa: F811
    ctx = SerializationContext("events", MessageField.VALUE)
    serializer = AvroSerializer(
        events, None, conf={"use.latest.version": True, "auto.register.schemas": False}
    )
    raw = pa.array([serializer(e, ctx) for e in EVENTS])
    lookup = lookup_for(schema_registry)
    reader = lookup.schema_version("events-value", "latest")
    before = len(schema_registry.requests)
    for _ in range(3):  # three codecs (three tasks) in one process
        assert AvroCodec(reader, framed=True, lookup=lookup).decode(raw).reasons == []
    fetched = [r.path for r in schema_registry.requests[before:]]
    # the writer schema by id once, each of the four referenced versions once
    assert sorted(fetched) == sorted(
        ["/schemas/ids/5"]
        + [
            f"/subjects/{s}/versions/1"
            for s in (
                "com.acme.geo.Address",
                "com.acme.money.Currency",
                "com.acme.Order",
                "com.acme.Payment",
            )
        ]
    ), fetched


def test_inlining_defines_each_name_once_where_first_used():
    referenced = [ADDRESS, CURRENCY, ORDER, PAYMENT]
    inlined = inline_references(["com.acme.Order", "com.acme.Payment"], referenced)
    order, payment = inlined
    assert order["fields"][1]["type"]["name"] == "Address"  # defined at first use
    assert order["fields"][2]["type"] == ["null", "com.acme.geo.Address"]  # then named
    assert payment["fields"][1]["type"] == CURRENCY
    fastavro.parse_schema(inlined)  # no table of names needed
    # a type of the null namespace named (bare) inside com.acme keeps its name there
    plain = {"type": "enum", "name": "Plain", "symbols": ["A"]}
    wrap = {
        "type": "record",
        "name": "Wrap",
        "namespace": "com.acme",
        "fields": [{"name": "p", "type": "Plain"}],
    }
    inlined = inline_references(wrap, [plain])
    assert inlined["fields"][0]["type"] == {**plain, "namespace": ""}
    parsed = fastavro.parse_schema(inlined)
    assert "Plain" in parsed["__named_schemas"]
    # nothing referenced: the schema itself
    assert inline_references(ORDER, []) is ORDER


def test_self_contained_keeps_the_id_and_drops_the_references(events, schema_registry):  # noqa: F811
    lookup = lookup_for(schema_registry)
    registered = lookup.schema_version("events-value", "latest")
    contained = self_contained(registered, lookup)
    assert contained.references == () and contained.schema_id == registered.schema_id
    # a codec without a registry encodes with it (the writer's tasks do)
    codec = AvroCodec(contained, framed=True, schema_id=contained.schema_id)
    assert codec.encode(pa.array(ROWS, type=codec.arrow_type)).to_pylist() == [
        AvroSerializer(
            events, None, conf={"use.latest.version": True, "auto.register.schemas": False}
        )(e, SerializationContext("events", MessageField.VALUE))
        for e in EVENTS
    ]
    with pytest.raises(Exception, match="no registry to fetch it from"):
        AvroCodec(registered, framed=True)


# --- one subject per type (valueSubjects): a writer record read into its union member --------


def test_writer_records_fill_their_member_column_wise_or_record_by_record(schema_registry):  # noqa: F811
    from kafka_ds.formats.avro.codec import _GeneralDecoder
    from kafka_ds.formats.avro.members import MemberPlan
    from kafka_ds.formats.avro.subjects import union_reader_schema
    from kafka_ds.options.formats import ColumnFormatSpec

    client = SchemaRegistryClient({"url": schema_registry.url})
    flat = {
        "type": "record",
        "name": "Flat",
        "namespace": "t",
        "fields": [{"name": "a", "type": "long"}, {"name": "b", "type": ["null", "string"]}],
    }
    nested = {
        "type": "record",
        "name": "Nested",
        "namespace": "t",
        "fields": [{"name": "xs", "type": {"type": "array", "items": "int"}}],
    }
    other = {
        "type": "record",
        "name": "Other",
        "namespace": "t",
        "fields": [{"name": "z", "type": "int"}],
    }
    ctx = SerializationContext("t", MessageField.VALUE)
    from confluent_kafka.schema_registry import record_subject_name_strategy

    serialize = {
        name: AvroSerializer(
            client, json.dumps(schema), conf={"subject.name.strategy": record_subject_name_strategy}
        )
        for name, schema in (("flat", flat), ("nested", nested), ("other", other))
    }
    raw = [
        serialize["flat"]({"a": 1, "b": None}, ctx),
        serialize["nested"]({"xs": [1, 2]}, ctx),
        serialize["flat"]({"a": 2, "b": "x"}, ctx),
        serialize["other"]({"z": 3}, ctx),
    ]
    truncated = raw[2][:-1]

    lookup = lookup_for(schema_registry)
    spec = ColumnFormatSpec("value", "avro", subjects=("t.Flat", "t.Nested"))
    codec = AvroCodec(union_reader_schema(lookup, spec), framed=True, lookup=lookup)
    assert (
        codec.spark_type
        == "struct<member0:struct<a:bigint,b:string>,member1:struct<xs:array<int>>>"
    )
    result = codec.decode(pa.array(raw + [truncated]))
    assert result.array.to_pylist() == [
        {"member0": {"a": 1, "b": None}, "member1": None},
        {"member0": None, "member1": {"xs": [1, 2]}},
        {"member0": {"a": 2, "b": "x"}, "member1": None},
        None,
        None,
    ]
    assert result.bad_rows.tolist() == [3, 4]
    assert "type t.Other is none of the types read (t.Flat, t.Nested)" in result.reasons[0]
    assert result.reasons[1].startswith("truncated")
    # the flat type column-wise, the nested one through fastavro
    kinds = {type(d).__name__ for d in codec._decoders.values()}
    assert kinds == {MemberPlan.__name__, _GeneralDecoder.__name__, "_Failed"}


def test_value_subjects_errors_name_the_option(schema_registry):  # noqa: F811
    from kafka_ds.errors import ConfigurationError
    from kafka_ds.formats.avro.subjects import union_reader_schema
    from kafka_ds.options.formats import ColumnFormatSpec

    client = SchemaRegistryClient({"url": schema_registry.url})
    client.register_schema("c.A", Schema(json.dumps(ADDRESS), "AVRO"))
    client.register_schema("c.B", Schema(json.dumps(ADDRESS), "AVRO"))
    client.register_schema("c.S", Schema('"string"', "AVRO"))
    lookup = lookup_for(schema_registry)

    def fails(subjects, match):
        with pytest.raises(ConfigurationError, match=match):
            union_reader_schema(lookup, ColumnFormatSpec("value", "avro", subjects=subjects))

    fails(
        ("c.A", "c.B"),
        "'valueSubjects': subjects 'c.A' and 'c.B' both hold type com.acme.geo.Address",
    )
    fails(("c.A", "c.S"), "subject 'c.S' version 1 is not a named Avro type")
    fails(("nope-*",), "no subject of the registry starts with 'nope-'")
    fails(("c.A",), "names one subject .*use 'valueSubject'")


def test_value_subjects_option_conflicts_name_both_options():
    from kafka_ds.errors import ConfigurationError
    from kafka_ds.options.core import READ
    from kafka_ds.options.formats import parse_typed_columns

    base = {"schema.registry.url": "http://registry:8081", "valueformat": "avro"}
    read = READ
    spec = parse_typed_columns({**base, "valuesubjects": " a.A, b.B "}, read)
    assert spec.value.subjects == ("a.A", "b.B")
    for extra, match in (
        (
            {"valueformat": "protobuf", "valuemessagename": "x"},
            "'valueSubjects' and 'valueMessageName' both",
        ),
        ({"valuesubject": "x"}, "'valueSubjects' and 'valueSubject' both"),
        ({"valueschemaversion": "2"}, "'valueSubjects' and 'valueSchemaVersion'"),
        ({"valuesubjects": "a,,b"}, "valueSubjects"),
        ({"valueformat": "binary"}, "has no effect while 'valueFormat'"),
    ):
        options = {**base, "valuesubjects": "a.A,b.B", **extra}
        with pytest.raises(ConfigurationError, match=match):
            parse_typed_columns(options, read)


def test_member_names_by_type():
    from kafka_ds.errors import ConfigurationError
    from kafka_ds.options.core import READ
    from kafka_ds.options.formats import parse_typed_columns
    from kafka_ds.read.typed_columns import decode_column, resolve_for_read

    a = {
        "type": "record",
        "name": "Order",
        "namespace": "x",
        "fields": [{"name": "n", "type": "int"}],
    }
    b = {**a, "namespace": "y"}  # the same short name
    c = {"type": "record", "name": "Payment", "fields": [{"name": "s", "type": "string"}]}
    options = {
        "valueformat": "avro",
        "valueschema": json.dumps(["null", a, b, c]),
        "valuemembernames": "type",
    }
    typed = resolve_for_read(parse_typed_columns(options, READ), ["t"]).columns[0]
    assert typed.spark_type == (
        "struct<x_Order:struct<n:int>,y_Order:struct<n:int>,Payment:struct<s:string>>"
    )
    # branch 2 (y.Order) n=3; null; branch 3 (Payment) s="x"
    array, bad, _reasons, _ids = decode_column(typed, pa.array([b"\x04\x06", None, b"\x06\x02x"]))
    assert bad.tolist() == []
    assert array.type.names == ["x_Order", "y_Order", "Payment"]
    assert array.to_pylist() == [
        {"x_Order": None, "y_Order": {"n": 3}, "Payment": None},
        None,
        {"x_Order": None, "y_Order": None, "Payment": {"s": "x"}},
    ]
    with pytest.raises(
        ConfigurationError,
        match="'valueMemberNames'='type' names the fields of a union of several record types",
    ):
        resolve_for_read(
            parse_typed_columns({**options, "valueschema": json.dumps(a)}, READ), ["t"]
        )
    with pytest.raises(
        ConfigurationError,
        match="'valueMemberNames' applies to valueFormat=avro and to 'valueSubjects' only",
    ):
        parse_typed_columns(
            {"valueformat": "json", "valueschema": "{}", "valuemembernames": "type"}, READ
        )


def test_union_of_records_decodes_column_wise_as_fastavro_does():
    """Confluent's union of references decoded branch by branch (UnionPlan) gives what
    fastavro gives record by record, bad records included."""
    from kafka_ds.formats.avro.codec import _GeneralDecoder, _Schema
    from kafka_ds.formats.avro.members import UnionPlan
    from kafka_ds.formats.framing import frame
    from kafka_ds.registry.schema import RegisteredSchema
    from tests.support.registry_fixtures import DictLookup

    order = {
        "type": "record",
        "name": "Order",
        "namespace": "a",
        "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"]}],
    }
    pay = {
        "type": "record",
        "name": "Pay",
        "namespace": "a",
        "fields": [{"name": "amount", "type": "double"}],
    }
    refund = {
        "type": "record",
        "name": "Refund",
        "namespace": "a",
        "fields": [{"name": "r", "type": "int"}],
    }
    writer = ["null", order, pay, refund]
    reader = ["null", order, pay]  # no Refund: its records are bad, the rest read
    parsed = fastavro.parse_schema(writer)
    values = [
        None,
        {"id": 1, "note": None},
        {"amount": 2.5},
        {"r": 4},
        {"id": -7, "note": "x" * 300},
    ] * 50

    def payload(value):
        import io

        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, value)
        return out.getvalue()

    payloads = [payload(v) for v in values] + [b"", b"\x7f", b"\x02\x01", b"\x04" + bytes(9)]
    framed_values = frame(9, pa.array(payloads, pa.binary()))
    by_id = {9: RegisteredSchema("AVRO", json.dumps(writer), schema_id=9)}
    codec = AvroCodec(
        RegisteredSchema("AVRO", json.dumps(reader)), framed=True, lookup=DictLookup(by_id)
    )
    fast = codec.decode(framed_values)
    assert isinstance(codec._decoders[9], UnionPlan)
    slow_codec = AvroCodec(
        RegisteredSchema("AVRO", json.dumps(reader)), framed=True, lookup=DictLookup(by_id)
    )
    # the same pair forced onto the general path (fastavro per record)
    slow_codec._decoders[9] = _GeneralDecoder(
        _Schema(by_id[9], None), slow_codec._reader(), slow_codec.arrow_type
    )
    slow = slow_codec.decode(framed_values)
    assert fast.array.to_pylist() == slow.array.to_pylist()
    assert (
        fast.bad_rows.tolist()
        == slow.bad_rows.tolist()
        == [i for i in range(250) if i % 5 == 3] + [250, 251, 252, 253]
    )
    assert fast.array.to_pylist()[:3] == [
        None,
        {"member0": {"id": 1, "note": None}, "member1": None},
        {"member0": None, "member1": {"amount": 2.5}},
    ]
    assert "type a.Refund is none of the types read" in fast.reasons[0]
    assert [r.split(":")[0] for r in fast.reasons[-4:]] == [
        "truncated",
        "not valid Avro",
        "truncated",
        "trailing bytes",
    ]
