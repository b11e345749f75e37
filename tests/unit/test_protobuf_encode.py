"""The column-wise Protobuf encoder (kafka_ds.formats.protobuf.encode) behind
ProtobufCodec.encode.

Its bytes are checked against hand-written wire encodings (the Protobuf encoding guide's
examples), against the protobuf runtime's SerializeToString of the same message (the
general path: a message object per row) and against confluent-kafka's ProtobufSerializer
(frame and message indexes included), on fixed cases and on generated flat messages.
"""

import base64
import itertools

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_ds.formats.protobuf.arrow import fill_message
from kafka_ds.formats.protobuf.codec import ProtobufCodec
from kafka_ds.formats.protobuf.encode import build_message_encoder
from kafka_ds.registry.schema import RegisteredSchema
from tests.support.registry_fixtures import (
    MockLookup,
    MockSchemaRegistryClient,
    file_proto,
    message_classes,
)

pytestmark = pytest.mark.skipif(
    MockSchemaRegistryClient is None, reason="confluent-kafka without MockSchemaRegistryClient"
)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_files = itertools.count()


class GeneralEncodeCodec(ProtobufCodec):
    """A ProtobufCodec that encodes every row through a message object."""

    def _column_encoder(self, arrow_type):
        return None


def schema_of(proto, schema_id=None):
    text = base64.b64encode(proto.SerializeToString()).decode()
    return RegisteredSchema("PROTOBUF", text, schema_id=schema_id)


def codecs(proto, message=None, schema_id=None, framed=False):
    kwargs = {"framed": framed, "schema_id": schema_id, "message_name": message}
    fast = ProtobufCodec(schema_of(proto, schema_id), **kwargs)
    general = GeneralEncodeCodec(schema_of(proto, schema_id), **kwargs)
    return fast, general


def assert_fast_path(codec, arrow_type=None):
    assert codec._column_encoder(arrow_type or codec.arrow_type) is not None


# --- golden bytes --------------------------------------------------------------------------

GOLDEN_FILE = file_proto(
    "golden.proto",
    {
        "Test": [
            ("a", "int32"),
            ("b", "string"),
            ("c", "sint32"),
            ("d", "sint64"),
            ("e", "uint32"),
            ("f", "fixed32"),
            ("g", "sfixed64"),
            ("h", "float"),
            ("i", "double"),
            ("j", "bool"),
            ("k", "bytes"),
            ("m", "optional int64"),
            ("n", "uint64"),
        ]
    },
)


@pytest.mark.parametrize(
    "row,encoded",
    [
        ({"a": 150}, "08 96 01"),  # the encoding guide's example
        ({"b": "testing"}, "12 07 74 65 73 74 69 6e 67"),  # ... and its string
        ({"a": -1}, "08 ff ff ff ff ff ff ff ff ff 01"),  # int32 negative: 10 bytes
        ({"c": -1, "d": 1}, "18 01 20 02"),  # zigzag
        ({"e": -1}, "28 ff ff ff ff 0f"),  # Spark int holds uint32 bits
        ({"f": 1, "g": -2}, "35 01 00 00 00 39 fe ff ff ff ff ff ff ff"),
        ({"h": 1.0, "i": -2.0}, "45 00 00 80 3f 49 00 00 00 00 00 00 00 c0"),
        ({"h": -0.0}, "45 00 00 00 80"),  # -0.0 is not the default
        ({"j": True, "k": b"\x00"}, "50 01 5a 01 00"),
        ({"a": 0, "b": "", "j": False, "k": b"", "h": 0.0}, ""),  # proto3 defaults: not written
        ({"m": 0}, "60 00"),  # presence: written even if 0
        ({"n": -1}, "68 ff ff ff ff ff ff ff ff ff 01"),
        ({"m": None, "a": None}, ""),
    ],
)
def test_golden_wire_bytes(row, encoded):
    fast, general = codecs(GOLDEN_FILE)
    assert_fast_path(fast)
    array = pa.array([row, None], fast.arrow_type)
    expected = [bytes.fromhex(encoded), None]
    assert fast.encode(array).to_pylist() == expected
    assert general.encode(array).to_pylist() == expected


def test_confluent_serializer_bytes_equal_with_message_indexes():
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    proto = file_proto(
        "two.proto",
        {
            "First": [("x", "int32")],
            "Second": [("id", "int64"), ("name", "string"), ("score", "optional double")],
        },
    )
    classes = message_classes(proto)
    client = MockSchemaRegistryClient({"url": "mock://protobuf-encode"})
    serialize = ProtobufSerializer(classes["test.Second"], client, {"use.deprecated.format": False})
    ctx = SerializationContext("t", MessageField.VALUE)
    rows = [
        {"id": 7, "name": "é", "score": 0.0},
        {"id": 0, "name": "", "score": None},
        {"id": -(1 << 63), "name": "x" * 300, "score": -1.5},
    ]
    messages = []
    for row in rows:
        message = classes["test.Second"]()
        fill_message(message, row)
        messages.append(serialize(message, ctx))
    schema_id = int.from_bytes(messages[0][1:5], "big")
    assert messages[0][5:7] == b"\x02\x02"  # message index [1]
    lookup = MockLookup(client)
    codec = ProtobufCodec(
        lookup.schema_by_id(schema_id, fmt="serialized"),
        framed=True,
        lookup=lookup,
        schema_id=schema_id,
        message_name="Second",
    )
    assert_fast_path(codec)
    assert codec.encode(pa.array(rows + [None], codec.arrow_type)).to_pylist() == messages + [None]
    assert codec.decode(pa.array(messages)).array.to_pylist() == rows


# --- which messages and columns take the column-wise path ---------------------------------


@pytest.mark.parametrize(
    "fields,arrow_type",
    [
        ([("k", "enum:.test.Kind")], pa.struct([("k", pa.string())])),
        ([("a", "repeated int32")], pa.struct([("a", pa.list_(pa.int32()))])),
        (
            [("a", "oneof:o int32"), ("b", "oneof:o string")],
            pa.struct([("a", pa.int32()), ("b", pa.string())]),
        ),
        ([("m", ".google.protobuf.Int32Value")], pa.struct([("m", pa.int32())])),
        ([("a", "int32")], pa.struct([("a", pa.int64())])),  # may not fit
        ([("a", "float")], pa.struct([("a", pa.float64())])),
        ([("a", "string")], pa.struct([("a", pa.binary())])),
        ([("a", "int32")], pa.int32()),
    ],
)
def test_other_messages_and_columns_take_the_general_path(fields, arrow_type):
    proto = file_proto(
        f"other{next(_files)}.proto",
        {"M": fields},
        enums={"Kind": ["A"]},
        deps=["google/protobuf/wrappers.proto"],
    )
    desc = message_classes(proto)["test.M"].DESCRIPTOR
    assert build_message_encoder(desc, arrow_type) is None


def test_columns_missing_widened_or_reordered_match_the_general_path():
    proto = file_proto(
        "wide.proto", {"M": [("a", "int64"), ("b", "double"), ("c", "string"), ("d", "sint64")]}
    )
    fast, general = codecs(proto)
    arrow_type = pa.struct(
        [("c", pa.large_string()), ("a", pa.int8()), ("b", pa.float32()), ("extra", pa.int32())]
    )
    assert_fast_path(fast, arrow_type)
    array = pa.array(
        [
            {"c": "z", "a": -3, "b": 0.5, "extra": 1},
            None,
            {"c": None, "a": 0, "b": None, "extra": None},
        ],
        arrow_type,
    )
    assert fast.encode(array).to_pylist() == general.encode(array).to_pylist()
    assert fast.encode(array.slice(1)).to_pylist() == general.encode(array.slice(1)).to_pylist()


# --- generated flat messages ---------------------------------------------------------------

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
    "float": st.floats(width=32, allow_nan=False) | st.just(0.0) | st.just(-0.0),
    "double": st.floats(allow_nan=False),
    "bool": st.booleans(),
    "string": st.text(max_size=10) | st.just(""),
    "bytes": st.binary(max_size=10),
}


@st.composite
def flat_messages(draw):
    count = draw(st.integers(1, 8))
    fields, values = [], {}
    for i in range(count):
        kind = draw(st.sampled_from(sorted(SCALARS)))
        optional = draw(st.booleans())
        fields.append((f"f{i}", f"optional {kind}" if optional else kind))
        values[f"f{i}"] = st.none() | SCALARS[kind]
    # field numbers out of declaration order: the wire is in number order
    order = draw(st.permutations(range(len(fields))))
    fields = [fields[i] for i in order]
    rows = draw(st.lists(st.none() | st.fixed_dictionaries(values), max_size=20))
    return fields, rows


@FAST
@given(flat_messages(), st.integers(0, 3))
def test_generated_flat_messages_equal_the_runtime_and_confluent(case, cut):
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    fields, rows = case
    proto = file_proto(f"gen{next(_files)}.proto", {"M": fields})
    # declared numbers follow the list; renumber so declaration order != number order
    for number, field in zip(range(len(fields), 0, -1), proto.message_type[0].field, strict=True):
        field.number = number
    classes = message_classes(proto)
    client = MockSchemaRegistryClient({"url": "mock://protobuf-encode-property"})
    serialize = ProtobufSerializer(classes["test.M"], client, {"use.deprecated.format": False})
    ctx = SerializationContext("t", MessageField.VALUE)
    expected = []
    for row in rows:
        if row is None:
            expected.append(None)
            continue
        message = classes["test.M"]()
        fill_message(message, row)
        expected.append(serialize(message, ctx))
    framed = [e for e in expected if e is not None]
    schema_id = int.from_bytes(framed[0][1:5], "big") if framed else 1
    fast, general = codecs(proto, schema_id=schema_id, framed=True)
    array = pa.array(rows, fast.arrow_type)
    assert_fast_path(fast)
    encoded = fast.encode(array).to_pylist()
    if framed:
        assert encoded == expected
    assert encoded == general.encode(array).to_pylist()
    assert fast.encode(array.slice(min(cut, len(rows)))).to_pylist() == encoded[cut:]
