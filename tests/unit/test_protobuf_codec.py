"""formats/protobuf/codec.py: Confluent-framed Protobuf into Arrow, checked against
confluent-kafka's ProtobufSerializer / ProtobufDeserializer over its in-memory registry client."""

from __future__ import annotations

import base64
import datetime as dt
import pickle

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_ds.formats.protobuf.codec import ProtobufCodec
from kafka_ds.formats.protobuf.schema import (
    ProtobufSchemaError,
    decode_message_indexes,
    encode_message_indexes,
)
from kafka_ds.registry.errors import RegistryUnavailableError
from kafka_ds.registry.schema import RegisteredSchema
from tests.support.registry_fixtures import (
    DictLookup,
    DownLookup,
    MockLookup,
    MockSchemaRegistryClient,
    assert_decode_contract,
    file_proto,
    message_classes,
)

pytestmark = pytest.mark.skipif(
    MockSchemaRegistryClient is None, reason="confluent-kafka without MockSchemaRegistryClient"
)

from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

CTX = SerializationContext("events", MessageField.VALUE)
UTC = dt.timezone.utc

# a file covering the type table; Kind is an enum, Inner a nested message
ALL_TYPES = file_proto(
    "all.proto",
    {
        "Everything": (
            [
                ("i32", "int32"),
                ("s32", "sint32"),
                ("sf32", "sfixed32"),
                ("u32", "uint32"),
                ("f32", "fixed32"),
                ("i64", "int64"),
                ("s64", "sint64"),
                ("sf64", "sfixed64"),
                ("u64", "uint64"),
                ("f64", "fixed64"),
                ("fl", "float"),
                ("db", "double"),
                ("ok", "bool"),
                ("text", "string"),
                ("raw", "bytes"),
                ("kind", "enum:.test.Kind"),
                ("inner", ".test.Everything.Inner"),
                ("nums", "repeated int32"),
                ("inners", "repeated .test.Everything.Inner"),
                ("counts", "map<string,int64>"),
                ("by_id", "map<int32,.test.Everything.Inner>"),
                ("email", "oneof:contact string"),
                ("phone", "oneof:contact int64"),
                ("maybe", "optional int32"),
                ("at", ".google.protobuf.Timestamp"),
                ("took", ".google.protobuf.Duration"),
                ("wrapped", ".google.protobuf.Int32Value"),
                ("label", ".google.protobuf.StringValue"),
            ],
            {"Inner": [("x", "int32"), ("y", "string")]},
        ),
    },
    enums={"Kind": ["UNKNOWN", "SMALL", "LARGE"]},
    deps=[
        "google/protobuf/timestamp.proto",
        "google/protobuf/duration.proto",
        "google/protobuf/wrappers.proto",
    ],
)

ALL_TYPES_SPARK = (
    "struct<i32:int,s32:int,sf32:int,u32:int,f32:int,i64:bigint,s64:bigint,sf64:bigint,"
    "u64:bigint,f64:bigint,fl:float,db:double,ok:boolean,text:string,raw:binary,kind:string,"
    "inner:struct<x:int,y:string>,nums:array<int>,inners:array<struct<x:int,y:string>>,"
    "counts:map<string,bigint>,by_id:map<int,struct<x:int,y:string>>,"
    "email:string,phone:bigint,maybe:int,at:timestamp,took:interval day to second,wrapped:int,"
    "label:string>"
)


def _registry():
    client = MockSchemaRegistryClient({"url": "mock://test"})
    return client, MockLookup(client)


def _codec(lookup, schema_id, **kwargs):
    return ProtobufCodec(
        lookup.schema_by_id(schema_id, fmt="serialized"),
        framed=True,
        lookup=lookup,
        schema_id=schema_id,
        **kwargs,
    )


# -- message indexes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "indexes, encoded",
    [
        ([0], b"\x00"),
        ([1], b"\x02\x02"),
        ([0, 1], b"\x04\x00\x02"),
        ([2], b"\x02\x04"),
        ([1, 0, 3], b"\x06\x02\x00\x06"),
        ([64], b"\x02\x80\x01"),
    ],
)
def test_message_index_golden_bytes(indexes, encoded):
    assert encode_message_indexes(indexes) == encoded
    assert decode_message_indexes(encoded, 0, len(encoded)) == (tuple(indexes), len(encoded))


def test_message_index_count_zero_means_first_message():
    assert decode_message_indexes(b"\x00rest", 0, 5) == ((0,), 1)


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=6))
def test_message_indexes_agree_with_confluent(indexes):
    serde = pytest.importorskip("confluent_kafka.schema_registry.common.serde")
    theirs = serde.SchemaId("PROTOBUF", 7, message_indexes=indexes).id_to_bytes()
    assert theirs == b"\x00\x00\x00\x00\x07" + encode_message_indexes(indexes)
    assert decode_message_indexes(theirs, 5, len(theirs)) == (tuple(indexes), len(theirs))


def test_serializer_frames_second_message_with_its_index():
    client, lookup = _registry()
    classes = message_classes(
        file_proto("two.proto", {"A": [("a", "int32")], "B": [("b", "string")]})
    )
    framed = ProtobufSerializer(classes["test.B"], client)(classes["test.B"](b="hi"), CTX)
    assert framed == b"\x00\x00\x00\x00\x01" + b"\x02\x02" + b"\x0a\x02hi"
    result = _codec(lookup, 1, message_name="B").decode(pa.array([framed]))
    assert result.array.to_pylist() == [{"b": "hi"}]


# -- type table ------------------------------------------------------------------------------


def test_type_table():
    codec = ProtobufCodec(
        RegisteredSchema("PROTOBUF", base64.b64encode(ALL_TYPES.SerializeToString()).decode()),
        framed=False,
    )
    assert codec.spark_type == ALL_TYPES_SPARK
    inner = pa.struct([("x", pa.int32()), ("y", pa.string())])
    assert codec.arrow_type.field("u64").type == pa.int64()
    assert codec.arrow_type.field("inners").type == pa.list_(inner)
    assert codec.arrow_type.field("by_id").type == pa.map_(pa.int32(), inner)
    assert codec.arrow_type.field("at").type == pa.timestamp("us", tz="UTC")
    assert codec.arrow_type.field("took").type == pa.duration("us")
    assert codec.arrow_type.field("label").type == pa.string()


def _everything(classes, **overrides):
    Everything = classes["test.Everything"]
    Inner = classes["test.Everything.Inner"]
    message = Everything(
        i32=-5,
        s32=-6,
        sf32=-7,
        u32=4_000_000_000,
        f32=7,
        i64=-(1 << 40),
        s64=9,
        sf64=-10,
        u64=(1 << 64) - 1,
        f64=12,
        fl=1.5,
        db=2.25,
        ok=True,
        text="héllo",
        raw=b"\x00\xff",
        kind=2,
        inner=Inner(x=1, y="a"),
        nums=[1, 2, 3],
        inners=[Inner(x=2), Inner(y="b")],
        counts={"k": 1 << 40},
        by_id={3: Inner(x=3)},
        maybe=0,
        phone=555,
    )
    message.at.FromDatetime(dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC))
    message.took.FromTimedelta(dt.timedelta(seconds=90, microseconds=5))
    message.wrapped.value = 0
    for name, value in overrides.items():
        setattr(message, name, value)
    return message


def _expected(message):
    """What spark-protobuf-style reading of the test message gives, field by field."""

    def inner(m):
        return {"x": m.x, "y": m.y}

    present = message.HasField
    return {
        "i32": message.i32,
        "s32": message.s32,
        "sf32": message.sf32,
        "u32": message.u32 - (1 << 32) if message.u32 >= 1 << 31 else message.u32,
        "f32": message.f32,
        "i64": message.i64,
        "s64": message.s64,
        "sf64": message.sf64,
        "u64": message.u64 - (1 << 64) if message.u64 >= 1 << 63 else message.u64,
        "f64": message.f64,
        "fl": message.fl,
        "db": message.db,
        "ok": message.ok,
        "text": message.text,
        "raw": message.raw,
        "kind": message.DESCRIPTOR.fields_by_name["kind"]
        .enum_type.values_by_number[message.kind]
        .name,
        "inner": inner(message.inner) if present("inner") else None,
        "nums": list(message.nums),
        "inners": [inner(m) for m in message.inners],
        "counts": sorted(message.counts.items()),
        "by_id": sorted((k, inner(v)) for k, v in message.by_id.items()),
        "maybe": message.maybe if present("maybe") else None,
        "email": message.email if present("email") else None,
        "phone": message.phone if present("phone") else None,
        "at": message.at.ToDatetime(tzinfo=UTC) if present("at") else None,
        "took": message.took.ToTimedelta() if present("took") else None,
        "wrapped": message.wrapped.value if present("wrapped") else None,
        "label": message.label.value if present("label") else None,
    }


def _normalise(row):
    return {**row, "counts": sorted(row["counts"]), "by_id": sorted(row["by_id"])}


def test_confluent_serializer_output_decodes_as_its_deserializer_reads_it():
    client, lookup = _registry()
    classes = message_classes(ALL_TYPES)
    Everything = classes["test.Everything"]
    messages = [_everything(classes), Everything(), _everything(classes, email="a@b")]
    framed = [ProtobufSerializer(Everything, client)(m, CTX) for m in messages]
    deserialize = ProtobufDeserializer(Everything)
    result = _codec(lookup, 1).decode(pa.array(framed))
    assert len(result.bad_rows) == 0
    expected = [_expected(deserialize(b, CTX)) for b in framed]
    assert [_normalise(r) for r in result.array.to_pylist()] == expected
    # no presence: defaults; unset messages and presence fields: null
    empty = result.array.to_pylist()[1]
    assert (empty["i32"], empty["text"], empty["kind"], empty["nums"]) == (0, "", "UNKNOWN", [])
    assert (empty["inner"], empty["maybe"], empty["at"], empty["wrapped"]) == (None,) * 4
    assert result.array.to_pylist()[0]["u32"] == 4_000_000_000 - (1 << 32)


def test_encode_is_byte_identical_to_confluent_serializer_and_round_trips():
    client, lookup = _registry()
    classes = message_classes(ALL_TYPES)
    Everything = classes["test.Everything"]
    serialize = ProtobufSerializer(Everything, client)
    messages = [_everything(classes), Everything(), _everything(classes, email="x")]
    framed = [serialize(m, CTX) for m in messages]
    codec = _codec(lookup, 1)
    decoded = codec.decode(pa.array(framed + [None])).array
    encoded = codec.encode(decoded)
    assert encoded.to_pylist() == framed + [None]
    assert codec.decode(encoded).array.equals(decoded)


def test_references_and_well_known_imports():
    client, lookup = _registry()
    common = file_proto(
        "common.proto", {"Money": [("units", "int64"), ("currency", "string")]}, package="shop"
    )
    order = file_proto(
        "order.proto",
        {"Order": [("total", ".shop.Money"), ("at", ".google.protobuf.Timestamp")]},
        package="shop",
        deps=["common.proto", "google/protobuf/timestamp.proto"],
    )
    classes = message_classes(common, order)
    Order, Money = classes["shop.Order"], classes["shop.Money"]
    message = Order(total=Money(units=12, currency="EUR"))
    message.at.FromSeconds(1_700_000_000)
    framed = ProtobufSerializer(Order, client)(message, CTX)
    writer_id = int.from_bytes(framed[1:5], "big")
    codec = _codec(lookup, writer_id)
    assert codec.spark_type == "struct<total:struct<units:bigint,currency:string>,at:timestamp>"
    assert codec.decode(pa.array([framed])).array.to_pylist() == [
        {
            "total": {"units": 12, "currency": "EUR"},
            "at": dt.datetime.fromtimestamp(1_700_000_000, UTC),
        }
    ]
    assert ("version", "common.proto", 1, "serialized") in lookup.calls


def _register_versions(client):
    v1 = file_proto("user.proto", {"User": [("id", "int64"), ("name", "string"), ("age", "int32")]})
    v2 = file_proto(
        "user.proto",
        {"User": [("id", "int64"), ("name", "string"), ("age", "int64"), ("email", "string")]},
    )
    old_class = message_classes(v1)["test.User"]
    new_class = message_classes(v2)["test.User"]
    old = ProtobufSerializer(old_class, client)(old_class(id=1, name="a", age=30), CTX)
    new = ProtobufSerializer(new_class, client)(new_class(id=2, name="b", age=40, email="b@x"), CTX)
    return old, new


def test_writer_evolution_field_added_and_removed():
    client, lookup = _registry()
    old, new = _register_versions(client)
    assert old[1:5] != new[1:5]
    values = pa.array([old, new])
    # the old reader skips email; age int64 -> int32 would narrow: not resolvable
    as_old = _codec(lookup, 1).decode(values)
    assert as_old.array.to_pylist() == [{"id": 1, "name": "a", "age": 30}, None]
    assert as_old.bad_rows.tolist() == [1]
    assert as_old.reasons[0].startswith("cannot be resolved to the reader schema: field age")
    # the new reader: email is null for old records, age widens int32 -> bigint
    as_new = _codec(lookup, 2).decode(values)
    assert as_new.array.to_pylist() == [
        {"id": 1, "name": "a", "age": 30, "email": None},
        {"id": 2, "name": "b", "age": 40, "email": "b@x"},
    ]
    assert len(as_new.bad_rows) == 0


def test_a_registry_down_past_its_budget_fails_the_decode_and_is_asked_again():
    """An unreachable registry fails the decode (RegistryUnavailableError) instead of making
    the records bad rows, and is asked again later (test_avro_codec.py has the story)."""
    client, lookup = _registry()
    old, _ = _register_versions(client)
    down = DownLookup(lookup)
    codec = ProtobufCodec(
        lookup.schema_by_id(2, fmt="serialized"), framed=True, lookup=down, schema_id=2
    )
    with pytest.raises(RegistryUnavailableError, match="schema id 1"):
        codec.decode(pa.array([old]))
    down.down = False
    result = codec.decode(pa.array([old]))
    assert result.array.to_pylist() == [{"id": 1, "name": "a", "age": 30, "email": None}]
    assert len(result.bad_rows) == 0


def test_bad_rows_of_every_kind():
    client, lookup = _registry()
    old, _ = _register_versions(client)
    codec = _codec(lookup, 1)
    header = old[:6]
    values = [
        old,
        None,
        b"\x00\x00",
        b"\x01" + old[1:],
        header + b"\x0a\x05ab",  # truncated
        header + b"\xff\xff\xff",
        b"\x00\x00\x00\x00\x63\x00",
        b"\x00\x00\x00\x00\x01",
        b"\x00\x00\x00\x00\x01\x02\x08",
        b"\x00\x00\x00\x00\x01\x04\x00",
        old,
    ]
    result = codec.decode(pa.array(values, pa.binary()))
    assert result.bad_rows.tolist() == [2, 3, 4, 5, 6, 7, 8, 9]
    reasons = dict(zip(result.bad_rows.tolist(), result.reasons, strict=True))
    assert reasons[2].startswith("not framed: 2 bytes")
    assert reasons[3] == "not framed: magic byte 1 (expected 0)"
    assert reasons[4].startswith("invalid Protobuf payload (truncated or corrupt)")
    assert reasons[5].startswith("invalid Protobuf payload")
    assert reasons[6].startswith("unknown schema id 99")
    assert reasons[7] == "invalid message indexes: truncated message indexes"
    assert reasons[8] == "schema id 1: message index path [4] not found in schema_1.proto"
    assert reasons[9] == "invalid message indexes: invalid message index count 2"
    assert result.schema_ids.tolist() == [-1, -1, 1, 1, 99, 1, 1, 1]
    rows = result.array.to_pylist()
    assert rows[0] == rows[10] == {"id": 1, "name": "a", "age": 30}
    assert rows[1:10] == [None] * 9


def test_not_framed_records_use_the_reader_message():
    classes = message_classes(ALL_TYPES)
    message = _everything(classes)
    codec = ProtobufCodec(
        RegisteredSchema("PROTOBUF", base64.b64encode(ALL_TYPES.SerializeToString()).decode()),
        framed=False,
    )
    result = codec.decode(pa.array([message.SerializeToString(), b"\x0a"]))
    assert _normalise(result.array.to_pylist()[0]) == _expected(message)
    assert result.bad_rows.tolist() == [1]
    assert codec.encode(result.array.slice(0, 1)).to_pylist() == [message.SerializeToString()]


def test_bad_reader_schemas_are_clear_errors():
    recursive = file_proto(
        "tree.proto", {"Node": [("value", "int32"), ("children", "repeated .test.Node")]}
    )
    with pytest.raises(ProtobufSchemaError, match="recursive message type test.Node"):
        ProtobufCodec(
            RegisteredSchema("PROTOBUF", base64.b64encode(recursive.SerializeToString()).decode()),
            framed=False,
        )
    with pytest.raises(ProtobufSchemaError, match="format=serialized"):
        ProtobufCodec(RegisteredSchema("PROTOBUF", 'syntax = "proto3"; message A {}'), framed=False)
    with pytest.raises(ProtobufSchemaError, match="not PROTOBUF"):
        ProtobufCodec(RegisteredSchema("AVRO", '"int"'), framed=False)
    with pytest.raises(ProtobufSchemaError, match="message 'Nope'"):
        ProtobufCodec(
            RegisteredSchema("PROTOBUF", base64.b64encode(ALL_TYPES.SerializeToString()).decode()),
            framed=False,
            message_name="Nope",
        )


def test_encode_rejects_unknown_enum_name():
    codec = ProtobufCodec(
        RegisteredSchema(
            "PROTOBUF", base64.b64encode(ALL_TYPES.SerializeToString()).decode(), schema_id=3
        ),
        framed=True,
    )
    row = pa.array([{"kind": "HUGE"}], pa.struct([("kind", pa.string())]))
    with pytest.raises(ValueError, match="row 0: .*'HUGE' is not a value of enum test.Kind"):
        codec.encode(row.cast(pa.struct([codec.arrow_type.field("kind")])))


def test_pickled_codec_decodes_on_an_executor():
    client, lookup = _registry()
    old, new = _register_versions(client)
    portable = DictLookup(
        {1: lookup.schema_by_id(1, "serialized"), 2: lookup.schema_by_id(2, "serialized")}
    )
    codec = ProtobufCodec(portable.schema_by_id(2), framed=True, lookup=portable, schema_id=2)
    before = codec.decode(pa.array([old, new])).array
    state = codec.__getstate__()
    assert not any(k in state for k in ("_reader_desc", "_writers", "_writer_files"))
    clone = pickle.loads(pickle.dumps(codec))
    assert clone.decode(pa.array([old, new])).array.equals(before)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.binary(max_size=40),
            st.binary(max_size=40).map(lambda b: b"\x00\x00\x00\x00\x01" + b),
        ),
        max_size=12,
    )
)
def test_fuzz_decode_never_raises(values):
    assert_decode_contract(FUZZ_CODEC.decode(pa.array(values, pa.binary())), values)


FUZZ_CODEC = ProtobufCodec(
    RegisteredSchema(
        "PROTOBUF", base64.b64encode(ALL_TYPES.SerializeToString()).decode(), schema_id=1
    ),
    framed=True,
    schema_id=1,
    lookup=DictLookup(
        {
            1: RegisteredSchema(
                "PROTOBUF", base64.b64encode(ALL_TYPES.SerializeToString()).decode(), schema_id=1
            )
        }
    ),
)


def test_header_with_an_id_above_java_int_range_is_a_bad_row():
    result = FUZZ_CODEC.decode(pa.array([b"\x00\x80\x00\x00\x00\x00"]))
    assert result.reasons == ["unknown schema id 2147483648 (registry ids are at most 2^31-1)"]
    assert result.schema_ids.tolist() == [-1]


def test_rows_of_one_writer_in_both_index_encodings_keep_their_order():
    client, lookup = _registry()
    old, _ = _register_versions(client)
    # [0] written as the short byte 0 and as count 1, index 0: one writer group
    long_form = old[:5] + b"\x02\x00" + old[6:]
    result = _codec(lookup, 1).decode(pa.array([long_form, old[:6] + b"\x08\x07", long_form]))
    assert [r["id"] for r in result.array.to_pylist()] == [1, 7, 1]


def test_values_out_of_arrow_range_are_bad_rows_not_a_failed_batch():
    classes = message_classes(ALL_TYPES)
    message = _everything(classes)
    message.at.seconds = 1 << 60  # parses, but is no int64 of microseconds
    codec = ProtobufCodec(
        RegisteredSchema("PROTOBUF", base64.b64encode(ALL_TYPES.SerializeToString()).decode()),
        framed=False,
    )
    result = codec.decode(
        pa.array([_everything(classes).SerializeToString(), message.SerializeToString()])
    )
    assert result.bad_rows.tolist() == [1]
    assert result.reasons[0].startswith("cannot be converted to the reader type: ")
    assert result.array.to_pylist()[0]["i32"] == -5


WELL_KNOWN_IN_CONTAINERS = file_proto(
    "wk.proto",
    {
        "Log": [
            ("times", "repeated .google.protobuf.Timestamp"),
            ("levels", "map<string,.google.protobuf.Int32Value>"),
            ("names", "repeated .google.protobuf.StringValue"),
        ]
    },
    deps=["google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto"],
)


def test_well_known_types_inside_repeated_and_map_fields():
    Log = message_classes(WELL_KNOWN_IN_CONTAINERS)["test.Log"]
    message = Log()
    message.times.add(seconds=1, nanos=2000)
    message.times.add(seconds=-1)
    message.levels["a"].value = 3
    message.levels["b"]  # present with the default value
    message.names.add(value="x")
    codec = ProtobufCodec(
        RegisteredSchema(
            "PROTOBUF",
            base64.b64encode(WELL_KNOWN_IN_CONTAINERS.SerializeToString()).decode(),
            schema_id=4,
        ),
        framed=True,
    )
    assert (
        codec.spark_type
        == "struct<times:array<timestamp>,levels:map<string,int>,names:array<string>>"
    )
    framed = codec.encode(
        pa.array([{"times": [dt.datetime(1970, 1, 1, 0, 0, 1, 2, UTC)]}], codec.arrow_type)
    )
    assert framed[0].as_py() == b"\x00\x00\x00\x00\x04\x00" + b"\x0a\x05\x08\x01\x10\xd0\x0f"
    row = codec.decode(
        pa.array([b"\x00\x00\x00\x00\x04\x00" + message.SerializeToString()], pa.binary())
    ).array.to_pylist()[0]
    assert sorted(row.pop("levels")) == [("a", 3), ("b", 0)]
    assert row == {
        "times": [
            dt.datetime(1970, 1, 1, 0, 0, 1, 2, UTC),
            dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
        ],
        "names": ["x"],
    }


_int32 = st.integers(-(1 << 31), (1 << 31) - 1)
_int64 = st.integers(-(1 << 63), (1 << 63) - 1)
_inner = st.fixed_dictionaries({"x": _int32, "y": st.text(max_size=5)})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "i32": _int32,
            "s32": _int32,
            "u32": st.integers(0, (1 << 32) - 1),
            "i64": _int64,
            "u64": st.integers(0, (1 << 64) - 1),
            "sf64": _int64,
            "db": st.floats(allow_nan=False),
            "ok": st.booleans(),
            "text": st.text(max_size=8),
            "raw": st.binary(max_size=8),
            "kind": st.integers(0, 2),
            "nums": st.lists(_int32),
            "inner": _inner,
            "inners": st.lists(_inner, max_size=3),
            "counts": st.dictionaries(st.text(max_size=4), _int64, max_size=3),
            "maybe": _int32,
            "email": st.text(max_size=4),
        },
    )
)
def test_random_messages_decode_as_their_fields_read(fields):
    Everything = PROPERTY_CLASSES["test.Everything"]
    Inner = PROPERTY_CLASSES["test.Everything.Inner"]
    fields = dict(fields)
    for name in ("inner",):
        if name in fields:
            fields[name] = Inner(**fields[name])
    if "inners" in fields:
        fields["inners"] = [Inner(**i) for i in fields["inners"]]
    message = Everything(**fields)
    result = FUZZ_CODEC.decode(
        pa.array([b"\x00\x00\x00\x00\x01\x00" + message.SerializeToString()])
    )
    assert len(result.bad_rows) == 0
    assert _normalise(result.array.to_pylist()[0]) == _expected(message)
    again = FUZZ_CODEC.decode(FUZZ_CODEC.encode(result.array))
    # map entries may come back in another order
    assert [_normalise(r) for r in again.array.to_pylist()] == [
        _normalise(r) for r in result.array.to_pylist()
    ]


PROPERTY_CLASSES = message_classes(ALL_TYPES)


def test_the_fit_check_on_write_reads_the_message_named_by_message_name():
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    from kafka_ds.formats.protobuf.spark import descriptor_misfit

    text = base64.b64encode(
        file_proto("two.proto", {"A": [("a", "int32")], "B": [("b", "string")]}).SerializeToString()
    )
    b_column = StructType([StructField("b", StringType())])
    assert descriptor_misfit(b_column, text) is not None  # the first message is A
    assert descriptor_misfit(b_column, text, message_name="B") is None
    assert descriptor_misfit(b_column, text, message_name="test.B") is None
    assert (
        descriptor_misfit(StructType([StructField("a", IntegerType())]), text, message_name="B")
        is not None
    )
    assert descriptor_misfit(b_column, text, message_name="C") == "message 'C' is not in the schema"
