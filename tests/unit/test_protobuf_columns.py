"""The column-wise Protobuf decoder (kafka_ds.formats.protobuf.columns) behind
ProtobufCodec.decode.

Checked against hand-written wire bytes, against the general path (the protobuf runtime
parses each record) on the same records -- values, proto3 defaults, unknown fields, bad
rows -- and against confluent-kafka's ProtobufDeserializer; generated flat messages,
mutated and truncated, must give the same rows and the same bad rows both ways.
"""

import base64
import itertools

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_ds.formats.protobuf.arrow import fill_message
from kafka_ds.formats.protobuf.codec import ProtobufCodec
from kafka_ds.formats.protobuf.columns import build_message_decoder
from kafka_ds.registry.schema import RegisteredSchema
from tests.support.registry_fixtures import (
    DictLookup,
    MockLookup,
    MockSchemaRegistryClient,
    file_proto,
    message_classes,
)

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_files = itertools.count()


class GeneralPathCodec(ProtobufCodec):
    """A ProtobufCodec that parses every record with the protobuf runtime."""

    def _column_decoder(self, writer_desc, reader_desc):
        return None


def schema_of(proto, schema_id=None):
    return RegisteredSchema(
        "PROTOBUF", base64.b64encode(proto.SerializeToString()).decode(), schema_id=schema_id
    )


def both(reader, writers=None):
    """(fast codec, general codec) reading unframed records of ``reader``, or framed ones
    of ``writers`` (schema id -> file proto)."""
    if writers is None:
        kwargs = {"framed": False}
    else:
        lookup = DictLookup({i: schema_of(w, i) for i, w in writers.items()})
        kwargs = {"framed": True, "lookup": lookup}
    fast = ProtobufCodec(schema_of(reader), **kwargs)
    general = GeneralPathCodec(schema_of(reader), **kwargs)
    return fast, general


def assert_same(fast, general, values):
    values = pa.array(values, pa.binary())
    a, b = fast.decode(values), general.decode(values)
    assert a.bad_rows.tolist() == b.bad_rows.tolist(), (a.reasons, b.reasons)
    assert a.array.to_pylist() == b.array.to_pylist()
    assert a.schema_ids.tolist() == b.schema_ids.tolist()
    return a


FLAT = file_proto(
    "flat.proto",
    {
        "M": [
            ("a", "int32"),
            ("b", "string"),
            ("c", "sint64"),
            ("d", "fixed32"),
            ("e", "double"),
            ("f", "bool"),
            ("g", "bytes"),
            ("h", "optional int64"),
            ("i", "uint32"),
            ("j", "float"),
        ]
    },
)


@pytest.mark.parametrize(
    "payload,expected",
    [
        ("08 96 01 12 07 74 65 73 74 69 6e 67", {"a": 150, "b": "testing"}),  # the guide's example
        ("", {}),  # every field its default
        ("08 01 08 02", {"a": 2}),  # the last occurrence wins
        ("a0 06 05 08 07", {"a": 7}),  # unknown field 100 skipped
        ("fa 06 02 ff ff 08 07", {"a": 7}),  # unknown bytes: not UTF-8 checked
        ("0d 01 00 00 00", {}),  # field 1 with another wire type
        ("08 ff ff ff ff ff ff ff ff ff 01", {"a": -1}),  # int32 -1: ten bytes
        ("18 03", {"c": -2}),
        ("25 ff ff ff ff", {"d": -1}),  # zigzag; fixed32 bits
        ("29 00 00 00 00 00 00 f0 3f", {"e": 1.0}),
        ("30 05", {"f": True}),
        ("3a 00", {"g": b""}),
        ("40 00", {"h": 0}),  # presence: set to 0 is 0
        ("48 ff ff ff ff 0f", {"i": -1}),
        ("55 00 00 c0 3f", {"j": 1.5}),
    ],
)
def test_golden_payloads(payload, expected):
    fast, general = both(FLAT)
    result = assert_same(fast, general, [bytes.fromhex(payload), None])
    defaults = {
        "a": 0,
        "b": "",
        "c": 0,
        "d": 0,
        "e": 0.0,
        "f": False,
        "g": b"",
        "h": None,
        "i": 0,
        "j": 0.0,
    }
    row = result.array.to_pylist()[0]
    assert row == {**defaults, **expected}
    assert result.array.to_pylist()[1] is None


@pytest.mark.parametrize(
    "payload",
    [
        "08 96",
        "12 07 74 65",
        "12",
        "00 01",
        "0e 00",
        "0f",
        "12 01 ff",
        "29 00 00",
        "08 ff ff ff ff ff ff ff ff ff ff 01",
        "12 ff ff ff ff 0f",
    ],
)
def test_bad_payloads_are_the_runtimes_bad_rows(payload):
    fast, general = both(FLAT)
    result = assert_same(fast, general, [bytes.fromhex("08 01"), bytes.fromhex(payload)])
    assert result.bad_rows.tolist() == [1]
    assert result.reasons[0].startswith("invalid Protobuf payload")


def test_groups_go_to_the_runtime():
    fast, general = both(FLAT)
    # an unknown group (field 20: start 0xa3 0x01, end 0xa4 0x01) around a varint
    assert_same(fast, general, [bytes.fromhex("a3 01 08 05 a4 01 08 07"), b"\x08\x01"])


def test_evolution_widening_writer_only_and_reader_only_fields():
    writer = file_proto("w.proto", {"M": [("a", "int32"), ("gone", "string"), ("f", "float")]})
    reader = file_proto("r.proto", {"M": [("a", "int64"), ("f", "double"), ("new", "string")]})
    fast, general = both(reader, {1: writer})
    w = message_classes(writer)["test.M"]
    records = [
        b"\x00\x00\x00\x00\x01\x00" + w(a=-5, gone="x", f=0.5).SerializeToString(),
        b"\x00\x00\x00\x00\x01\x00",
    ]
    result = assert_same(fast, general, records)
    assert result.array.to_pylist() == [
        {"a": -5, "f": 0.5, "new": None},
        {"a": 0, "f": 0.0, "new": None},
    ]
    desc_w = message_classes(writer)["test.M"].DESCRIPTOR
    desc_r = message_classes(reader)["test.M"].DESCRIPTOR
    assert build_message_decoder(desc_w, desc_r, fast.arrow_type) is not None


@pytest.mark.parametrize(
    "fields",
    [
        [("k", "enum:.test.Kind")],
        [("a", "repeated int32")],
        [("m", ".test.Kind2")],
        [("a", "oneof:o int32"), ("b", "oneof:o string")],
    ],
)
def test_other_messages_take_the_general_path(fields):
    proto = file_proto(
        f"o{next(_files)}.proto", {"M": fields, "Kind2": [("x", "int32")]}, enums={"Kind": ["A"]}
    )
    desc = message_classes(proto)["test.M"].DESCRIPTOR
    codec = ProtobufCodec(schema_of(proto), framed=False)
    assert build_message_decoder(desc, desc, codec.arrow_type) is None


def test_confluent_deserializer_agrees():
    if MockSchemaRegistryClient is None:
        pytest.skip("confluent-kafka without MockSchemaRegistryClient")
    from confluent_kafka.schema_registry.protobuf import (
        ProtobufDeserializer,
        ProtobufSerializer,
    )
    from confluent_kafka.serialization import MessageField, SerializationContext

    M = message_classes(FLAT)["test.M"]
    client = MockSchemaRegistryClient({"url": "mock://protobuf-columns"})
    ctx = SerializationContext("t", MessageField.VALUE)
    serialize = ProtobufSerializer(M, client, {"use.deprecated.format": False})
    messages = [
        M(a=i - 3, b="é" * i, c=-(i << 40), d=i, e=i / 3, f=i % 2 == 0, g=b"\x00" * i, i=i, j=0.5)
        for i in range(6)
    ]
    messages[2].h = 0
    framed = [serialize(m, ctx) for m in messages]
    schema_id = int.from_bytes(framed[0][1:5], "big")
    lookup = MockLookup(client)
    codec = ProtobufCodec(
        lookup.schema_by_id(schema_id, fmt="serialized"), framed=True, lookup=lookup
    )
    result = codec.decode(pa.array(framed))
    assert result.bad_rows.tolist() == []
    deserialize = ProtobufDeserializer(M, {"use.deprecated.format": False})
    theirs = [deserialize(f, ctx) for f in framed]
    for row, message in zip(result.array.to_pylist(), theirs, strict=True):
        assert row == {
            "a": message.a,
            "b": message.b,
            "c": message.c,
            "d": message.d,
            "e": message.e,
            "f": message.f,
            "g": message.g,
            "h": message.h if message.HasField("h") else None,
            "i": message.i,
            "j": message.j,
        }


# --- generated flat messages, mutated -----------------------------------------------------

_INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
_INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
SCALARS = {
    "int32": _INT32,
    "sint32": _INT32,
    "sfixed32": _INT32,
    "uint32": _INT32,
    "fixed32": _INT32,
    "int64": _INT64,
    "sint64": _INT64,
    "sfixed64": _INT64,
    "uint64": _INT64,
    "fixed64": _INT64,
    "float": st.floats(width=32, allow_nan=False),
    "double": st.floats(allow_nan=False),
    "bool": st.booleans(),
    "string": st.text(max_size=6),
    "bytes": st.binary(max_size=6),
}
# unknown fields, repeated fields, wrong wire types, junk: appended to valid payloads
EXTRAS = st.sampled_from(
    [
        b"",
        b"\xa0\x06\x05",
        b"\xfa\x06\x02\xff\xff",
        b"\x0d\x01\x00\x00\x00",
        b"\x08\x01",
        b"\x12\x01\xff",
        b"\x12\x02ok",
        b"\x1a\x00",
        b"\x00",
        b"\x08",
        b"\x0f",
        b"\xff",
        b"\x11\x01\x02\x03\x04\x05\x06\x07\x08",
        b"\x15\x01\x02\x03\x04",
    ]
)


@st.composite
def mutated_records(draw):
    count = draw(st.integers(1, 6))
    fields = [
        (
            f"f{i}",
            ("optional " if draw(st.booleans()) else "") + draw(st.sampled_from(sorted(SCALARS))),
        )
        for i in range(count)
    ]
    proto = file_proto(f"gen{next(_files)}.proto", {"M": fields})
    M = message_classes(proto)["test.M"]
    values = st.fixed_dictionaries(
        {name: st.none() | SCALARS[spec.split()[-1]] for name, spec in fields}
    )
    records = []
    for row in draw(st.lists(values, max_size=12)):
        message = M()
        fill_message(message, row)
        payload = message.SerializeToString()
        payload += draw(EXTRAS)
        if draw(st.integers(0, 5)) == 0:
            payload = payload[: draw(st.integers(0, len(payload)))]
        records.append(payload)
    records += draw(st.lists(st.binary(max_size=12), max_size=4))
    return proto, records


@FAST
@given(mutated_records())
def test_generated_records_decode_as_the_runtime_does(case):
    proto, records = case
    fast, general = both(proto)
    assert fast._writer(-1, ()).columns is not None, "expected the column-wise decoder"
    assert_same(fast, general, records + [None])
