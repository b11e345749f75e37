"""The column-wise Avro encoder (kafka_ds.formats.avro.encode) behind AvroCodec.encode.

Its bytes are checked against hand-written encodings of the Avro specification, against
fastavro's schemaless_writer and against confluent-kafka's AvroSerializer (the frame
included), on fixed cases and on generated flat schemas and rows; schemas and column
types it does not take are shown to go to the general path (fastavro per row) with the
same results.
"""

import datetime
import io
import json
import struct

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_ds.formats.avro.codec import AvroCodec
from kafka_ds.formats.avro.encode import UnionEncoder, build_encoder
from kafka_ds.formats.avro.types import parse_schema
from kafka_ds.registry.schema import RegisteredSchema
from tests.support.registry_fixtures import MockLookup, MockSchemaRegistryClient

UTC = datetime.timezone.utc
FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def avro(schema, schema_id=None):
    return RegisteredSchema("AVRO", json.dumps(schema), schema_id=schema_id)


def rec(*fields, name="R"):
    return {"type": "record", "name": name, "fields": list(fields)}


def fastavro_bytes(schema, rows, header=b""):
    parsed = fastavro.parse_schema(schema)
    out = []
    for row in rows:
        if row is None:
            out.append(None)
            continue
        stream = io.BytesIO()
        fastavro.schemaless_writer(stream, parsed, row)
        out.append(header + stream.getvalue())
    return out


class GeneralEncodeCodec(AvroCodec):
    """An AvroCodec that encodes every column with fastavro per row."""

    def _column_encoder(self, arrow_type):
        return None


class GeneralDecodeCodec(AvroCodec):
    """An AvroCodec that decodes every schema with fastavro per record."""

    def _column_plan(self, writer, reader):
        return None


def fast_codec(schema, arrow_type=None, **kwargs):
    codec = AvroCodec(avro(schema), **{"framed": False, **kwargs})
    assert codec._column_encoder(arrow_type or codec.arrow_type) is not None, (
        "expected the column-wise encoder to take this schema"
    )
    return codec


# --- golden bytes ------------------------------------------------------------------------

EVERY_KIND = rec(
    {"name": "id", "type": "long"},
    {"name": "n", "type": "int"},
    {"name": "s", "type": "string"},
    {"name": "b", "type": "bytes"},
    {"name": "ok", "type": "boolean"},
    {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "note", "type": ["null", "string"]},
    {"name": "late", "type": ["long", "null"]},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
    {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
)

EVERY_KIND_ROWS = [
    {
        "id": 27,
        "n": -1,
        "s": "foo",
        "b": b"\x00\xff",
        "ok": True,
        "f": 1.0,
        "d": -2.0,
        "note": None,
        "late": 64,
        "day": datetime.date(1970, 1, 2),
        "at": datetime.datetime(1970, 1, 1, 0, 0, 0, 1000, tzinfo=UTC),
        "at_us": datetime.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        "local": datetime.datetime(1970, 1, 1, 0, 0, 0, 2000),
        "uid": "",
    },
    None,
    {
        "id": -(1 << 63),
        "n": (1 << 31) - 1,
        "s": "",
        "b": b"",
        "ok": False,
        "f": float("inf"),
        "d": float("nan"),
        "note": "é",
        "late": None,
        "day": datetime.date(1, 1, 1),
        # before 1970 with a sub-millisecond part: fastavro floors to the millisecond below
        "at": datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        "at_us": datetime.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        "local": datetime.datetime(1969, 12, 31, 23, 59, 59, 999001),
        "uid": "7f1b6a7e-0000-4000-8000-000000000001",
    },
]

# each field's bytes in the first row, from the Avro specification by hand
EVERY_KIND_ROW0 = bytes.fromhex(
    "36"  # long 27 -> zigzag 54
    "01"  # int -1 -> zigzag 1
    "06 66 6f 6f"  # "foo": length 3 (zigzag 6), then UTF-8
    "04 00 ff"  # bytes of length 2
    "01"  # true
    "00 00 80 3f"  # float 1.0, little-endian IEEE 754
    "00 00 00 00 00 00 00 c0"  # double -2.0
    "00"  # ["null", "string"]: branch 0, null
    "00 80 01"  # ["long", "null"]: branch 0, then 64 -> zigzag 128 = 80 01
    "02"  # date 1970-01-02: day 1
    "02 02"  # branch 1, timestamp-millis 1
    "02"  # timestamp-micros 1
    "04"  # local-timestamp-millis 2
    "00"
)  # uuid "" (a string)


def test_golden_every_kind_fastavro_and_hand_encoded():
    codec = fast_codec(EVERY_KIND, framed=True, schema_id=300)
    array = pa.array(EVERY_KIND_ROWS, type=codec.arrow_type)
    encoded = codec.encode(array).to_pylist()
    header = b"\x00\x00\x00\x01\x2c"
    assert encoded[0] == header + EVERY_KIND_ROW0
    assert encoded == fastavro_bytes(EVERY_KIND, EVERY_KIND_ROWS, header)
    assert encoded[1] is None
    # the general path writes the same bytes, and the decoder reads the rows back
    general = GeneralEncodeCodec(avro(EVERY_KIND), framed=True, schema_id=300)
    assert general.encode(array).to_pylist() == encoded
    plain = AvroCodec(avro(EVERY_KIND), framed=False)
    back = plain.decode(pa.array([None if e is None else e[5:] for e in encoded], pa.binary()))
    assert back.bad_rows.tolist() == [], back.reasons
    assert back.array.to_pylist()[0]["s"] == "foo"


@pytest.mark.parametrize(
    "schema,value,encoded",
    [
        ("long", -(1 << 63), b"\xff" * 9 + b"\x01"),
        ("long", (1 << 63) - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
        ("long", 63, b"\x7e"),
        ("long", -65, b"\x81\x01"),
        ("int", -(1 << 31), b"\xff\xff\xff\xff\x0f"),
        ("string", "foo", b"\x06foo"),
        ("string", "x" * 64, b"\x80\x01" + b"x" * 64),
        ("bytes", b"", b"\x00"),
        ("boolean", False, b"\x00"),
        ("float", -0.0, b"\x00\x00\x00\x80"),
        ("double", float("inf"), b"\x00" * 6 + b"\xf0\x7f"),
        (["null", "long"], 1, b"\x02\x02"),
        (["string", "null"], "a", b"\x00\x02a"),
    ],
)
def test_golden_single_values(schema, value, encoded):
    codec = fast_codec(schema)
    assert codec.encode(pa.array([value, None], codec.arrow_type)).to_pylist() == [encoded, None]
    assert fastavro_bytes(schema, [value]) == [encoded]


def test_confluent_avro_serializer_bytes_equal():
    if MockSchemaRegistryClient is None:
        pytest.skip("confluent-kafka without MockSchemaRegistryClient")
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = MockSchemaRegistryClient({"url": "mock://avro-encode-golden"})
    serializer = AvroSerializer(client, json.dumps(EVERY_KIND))
    ctx = SerializationContext("orders", MessageField.VALUE)
    messages = [None if row is None else serializer(row, ctx) for row in EVERY_KIND_ROWS]
    schema_id = int.from_bytes(messages[0][1:5], "big")
    codec = fast_codec(EVERY_KIND, framed=True, schema_id=schema_id)
    assert codec.encode(pa.array(EVERY_KIND_ROWS, codec.arrow_type)).to_pylist() == messages


# --- which columns take the column-wise path ------------------------------------------


@pytest.mark.parametrize(
    "schema,arrow_type",
    [
        (rec({"name": "a", "type": "long"}), pa.struct([("a", pa.int32())])),  # widened
        (rec({"name": "a", "type": "double"}), pa.struct([("a", pa.float32())])),
        (rec({"name": "a", "type": "int"}), pa.struct([("a", pa.int8())])),
        (
            rec({"name": "d", "type": {"type": "int", "logicalType": "date"}}),
            pa.struct([("d", pa.int32())]),
        ),
        (
            rec({"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}}),
            pa.struct([("t", pa.int64())]),
        ),  # raw millis
        (rec({"name": "s", "type": "string"}), pa.struct([("s", pa.large_string())])),
        (
            rec({"name": "b", "type": "bytes"}, {"name": "x", "type": "int"}),  # order, extra
            pa.struct([("x", pa.int32()), ("extra", pa.string()), ("b", pa.large_binary())]),
        ),
        (rec(), pa.struct([])),
    ],
)
def test_compatible_column_types_match_fastavro(schema, arrow_type):
    rows = [_sample(arrow_type, i) for i in range(5)] + [None]
    array = pa.array(rows, arrow_type)
    codec = fast_codec(schema, arrow_type)
    general = GeneralEncodeCodec(avro(schema), framed=False)
    assert codec.encode(array).to_pylist() == general.encode(array).to_pylist()


def _sample(arrow_type, i):
    values = {
        pa.int8(): -i,
        pa.int32(): i * 1000 - 7,
        pa.int64(): i << 40,
        pa.float32(): i / 4,
        pa.string(): "é" * i,
        pa.large_string(): "z" * i,
        pa.large_binary(): b"\x01" * i,
    }
    return {f.name: values[f.type] for f in arrow_type}


@pytest.mark.parametrize(
    "schema,arrow_type",
    [
        (rec({"name": "a", "type": "int"}), pa.struct([("a", pa.int64())])),  # may not fit
        (rec({"name": "a", "type": "float"}), pa.struct([("a", pa.float64())])),
        (
            rec({"name": "a", "type": "long"}, {"name": "z", "type": "int", "default": 3}),
            pa.struct([("a", pa.int64())]),
        ),  # a default
        (
            rec({"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}}),
            pa.struct([("e", pa.string())]),
        ),
        (
            rec({"name": "a", "type": {"type": "array", "items": "long"}}),
            pa.struct([("a", pa.list_(pa.int64()))]),
        ),
        (
            rec({"name": "u", "type": ["null", "int", "string"]}),
            pa.struct([("u", pa.struct([("member0", pa.int32()), ("member1", pa.string())]))]),
        ),
        (
            rec({"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}}),
            pa.struct([("t", pa.timestamp("ms", tz="UTC"))]),
        ),
        (
            rec({"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros"}}),
            pa.struct([("t", pa.timestamp("us"))]),
        ),  # naive
        ("string", pa.binary()),
    ],
)
def test_other_schemas_and_column_types_take_the_general_path(schema, arrow_type):
    assert build_encoder(parse_schema(schema), arrow_type) is None


def test_null_in_a_field_without_null_names_the_row():
    codec = fast_codec(
        rec({"name": "a", "type": "long"}, {"name": "s", "type": "string"}),
        pa.struct([pa.field("a", pa.int64()), pa.field("s", pa.string())]),
    )
    array = pa.array(
        [{"a": 1, "s": "x"}, None, {"a": 2, "s": None}],
        pa.struct([("a", pa.int64()), ("s", pa.string())]),
    )
    with pytest.raises(
        ValueError,
        match=r"row 2 cannot be written as Avro .*: s is null and "
        r"Avro string has no null branch",
    ):
        codec.encode(array)
    # a null under a null row is no null value: the row is a tombstone
    assert codec.encode(array.slice(0, 2)).to_pylist() == [b"\x02\x02x", None]


def test_struct_nulls_hide_child_bytes_and_slices_keep_their_rows():
    # row 1 is null but its children hold values: they are not written
    children = [pa.array([1, 2, 3], pa.int64()), pa.array(["a", "bb", "ccc"])]
    validity = pa.py_buffer(np.packbits([True, False, True], bitorder="little"))
    array = pa.StructArray.from_buffers(
        pa.struct([("a", pa.int64()), ("s", pa.string())]), 3, [validity], children=children
    )
    schema = rec({"name": "a", "type": "long"}, {"name": "s", "type": "string"})
    codec = fast_codec(schema, array.type)
    assert codec.encode(array).to_pylist() == [b"\x02\x02a", None, b"\x06\x06ccc"]
    assert codec.encode(array.slice(1)).to_pylist() == [None, b"\x06\x06ccc"]
    assert codec.encode(pa.chunked_array([array.slice(0, 1), array.slice(2)])).to_pylist() == [
        b"\x02\x02a",
        b"\x06\x06ccc",
    ]


# --- generated flat schemas and rows ----------------------------------------------------


def _datetimes(aware):
    return st.datetimes(timezones=st.just(UTC) if aware else st.none())


# (Avro type, Arrow type, values)
KINDS = [
    ("boolean", pa.bool_(), st.booleans()),
    ("int", pa.int32(), st.integers(-(1 << 31), (1 << 31) - 1)),
    ("int", pa.int16(), st.integers(-(1 << 15), (1 << 15) - 1)),
    ("long", pa.int64(), st.integers(-(1 << 63), (1 << 63) - 1)),
    ("long", pa.int32(), st.integers(-(1 << 31), (1 << 31) - 1)),
    ("float", pa.float32(), st.floats(width=32, allow_nan=False)),
    ("double", pa.float64(), st.floats(allow_nan=False)),
    ("string", pa.string(), st.text(max_size=12)),
    ("string", pa.large_string(), st.text(alphabet="aé😀\x00", max_size=5)),
    ("bytes", pa.binary(), st.binary(max_size=12)),
    ({"type": "string", "logicalType": "uuid"}, pa.string(), st.uuids().map(str)),
    ({"type": "int", "logicalType": "date"}, pa.date32(), st.dates()),
    (
        {"type": "long", "logicalType": "timestamp-millis"},
        pa.timestamp("us", tz="UTC"),
        _datetimes(True),
    ),
    (
        {"type": "long", "logicalType": "timestamp-micros"},
        pa.timestamp("us", tz="UTC"),
        _datetimes(True),
    ),
    (
        {"type": "long", "logicalType": "local-timestamp-millis"},
        pa.timestamp("us"),
        _datetimes(False),
    ),
    (
        {"type": "long", "logicalType": "local-timestamp-micros"},
        pa.timestamp("us"),
        _datetimes(False),
    ),
]


# Every shape is drawn in every run (a shape of its own per test, not one hypothesis may
# rarely draw): a flat record, and each kind as a top-level schema alone, as ["null", T]
# and as [T, "null"]. Confluent's serializers frame a top-level bytes value unlike plain
# Avro (without its length), so each top-level kind is compared with them on its own.
SHAPES = ["record"] + [
    (kind, null_index) for kind in range(len(KINDS)) for null_index in (None, 0, 1)
]


def _shape_id(shape):
    if shape == "record":
        return "record"
    kind, null_index = shape
    avro_type = KINDS[kind][0]
    name = avro_type if isinstance(avro_type, str) else avro_type["logicalType"]
    name = f"{name}-{KINDS[kind][1]}"
    return {None: name, 0: f"null|{name}", 1: f"{name}|null"}[null_index]


def _nullable(avro_type, values, null_index):
    if null_index is None:
        return avro_type, values
    return (["null", avro_type] if null_index == 0 else [avro_type, "null"]), st.none() | values


@st.composite
def flat_cases(draw, shape="record"):
    """(Avro schema, Arrow type, rows) of ``shape``: "record", a random flat record, or
    ``(index in KINDS, null_index)``, that kind as the top-level schema (None: alone, 0/1:
    in a union with null at that index). At least one row is not null."""
    if shape == "record":
        count = draw(st.integers(1, 7))
        fields, arrow_fields, value_strategies = [], [], []
        for i in range(count):
            avro_type, arrow_type, values = draw(st.sampled_from(KINDS))
            avro_type, values = _nullable(avro_type, values, draw(st.sampled_from([None, 0, 1])))
            fields.append({"name": f"f{i}", "type": avro_type})
            arrow_fields.append(pa.field(f"f{i}", arrow_type))
            value_strategies.append(values)
        schema, arrow_type = rec(*fields), pa.struct(arrow_fields)
        row = st.fixed_dictionaries({f"f{i}": s for i, s in enumerate(value_strategies)})
    else:
        kind, null_index = shape
        avro_type, arrow_type, values = KINDS[kind]
        schema, row = _nullable(avro_type, values, null_index)
    rows = draw(st.lists(st.none() | row, max_size=24))
    rows.insert(draw(st.integers(0, len(rows))), draw(row.filter(lambda r: r is not None)))
    return schema, arrow_type, rows


def _confluent(schema):
    """A MockSchemaRegistryClient, and confluent-kafka's AvroSerializer of ``schema``."""
    from confluent_kafka.schema_registry.avro import AvroSerializer

    client = MockSchemaRegistryClient({"url": "mock://avro-encode-property"})
    return client, AvroSerializer(client, json.dumps(schema))


def _ctx():
    from confluent_kafka.serialization import MessageField, SerializationContext

    return SerializationContext("t", MessageField.VALUE)


def _deserialized(deserializer, message):
    """confluent-kafka's AvroDeserializer's value of ``message``, or its error's name: it
    refuses a record of the header alone (5 bytes), which its AvroSerializer writes for an
    empty top-level bytes value."""
    if message is None:
        return None
    try:
        return deserializer(message, _ctx())
    except Exception as exc:
        return type(exc).__name__


_MILLIS = ("timestamp-millis", "local-timestamp-millis")


def _as_read(avro_type, value):
    """``value`` as Avro ``avro_type`` gives it back: timestamps in milliseconds floored."""
    if value is None:
        return None
    if isinstance(avro_type, list):
        avro_type = next(t for t in avro_type if t != "null")
    if isinstance(avro_type, dict) and avro_type["type"] == "record":
        return {f["name"]: _as_read(f["type"], value[f["name"]]) for f in avro_type["fields"]}
    if isinstance(avro_type, dict) and avro_type.get("logicalType") in _MILLIS:
        return value.replace(microsecond=value.microsecond // 1000 * 1000)
    return value


@pytest.mark.skipif(
    MockSchemaRegistryClient is None, reason="confluent-kafka without MockSchemaRegistryClient"
)
@pytest.mark.parametrize("shape", SHAPES, ids=[_shape_id(s) for s in SHAPES])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), cut=st.integers(0, 3))
def test_generated_flat_rows_equal_fastavro_and_confluent(shape, data, cut):
    """Written column-wise: unframed, fastavro's bytes; framed, confluent-kafka's
    AvroSerializer's, which its AvroDeserializer reads back as the rows; and confluent's
    records decode to the rows, on the column-wise and the per-row paths."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    schema, arrow_type, rows = data.draw(flat_cases(shape))
    array = pa.array(rows, arrow_type)
    assert fast_codec(schema, arrow_type).encode(array).to_pylist() == fastavro_bytes(schema, rows)
    client, serializer = _confluent(schema)
    messages = [None if row is None else serializer(row, _ctx()) for row in rows]
    schema_id = int.from_bytes(next(m for m in messages if m)[1:5], "big")
    framed = fast_codec(schema, arrow_type, framed=True, schema_id=schema_id)
    encoded = framed.encode(array).to_pylist()
    assert encoded == messages
    # a slice (non-zero offsets in every buffer) gives the slice's rows
    assert framed.encode(array.slice(min(cut, len(rows)))).to_pylist() == messages[cut:]
    general = GeneralEncodeCodec(avro(schema), framed=True, schema_id=schema_id)
    assert general.encode(array).to_pylist() == messages
    deserializer = AvroDeserializer(client)
    assert [_deserialized(deserializer, m) for m in encoded] == [
        _deserialized(deserializer, m) for m in messages
    ]
    # and read back: confluent's records are the rows again
    reader = AvroCodec(avro(schema), framed=True, lookup=MockLookup(client))
    decoded = reader.decode(pa.array(messages, pa.binary()))
    assert decoded.bad_rows.tolist() == [], decoded.reasons
    assert decoded.array.to_pylist() == [_as_read(schema, r) for r in array.to_pylist()]
    general_reader = GeneralDecodeCodec(avro(schema), framed=True, lookup=MockLookup(client))
    assert (
        general_reader.decode(pa.array(messages, pa.binary())).array.to_pylist()
        == decoded.array.to_pylist()
    )


def test_fields_the_column_lacks_take_their_defaults_beside_converted_fields():
    # 'u' needs a converter on the general path (a union struct to fastavro's (name,
    # value)); 'z' and 'tag' are not in the column and are written with their defaults,
    # as fastavro does for a dict without them
    schema = rec(
        {"name": "a", "type": "long"},
        {"name": "u", "type": ["null", "int", "string"]},
        {"name": "z", "type": "int", "default": 3},
        {"name": "tag", "type": "string", "default": "none"},
    )
    arrow_type = pa.struct(
        [("a", pa.int64()), ("u", pa.struct([("member0", pa.int32()), ("member1", pa.string())]))]
    )
    array = pa.array(
        [
            {"a": 1, "u": {"member0": 5, "member1": None}},
            {"a": 2, "u": {"member0": None, "member1": "x"}},
            {"a": 3, "u": None},
            None,
        ],
        arrow_type,
    )
    codec = AvroCodec(avro(schema), framed=False)
    assert build_encoder(parse_schema(schema), arrow_type) is None  # the general path
    expected = fastavro_bytes(
        schema,
        [
            {"a": 1, "u": ("int", 5), "z": 3, "tag": "none"},
            {"a": 2, "u": ("string", "x"), "z": 3, "tag": "none"},
            {"a": 3, "u": None, "z": 3, "tag": "none"},
            None,
        ],
    )
    assert codec.encode(array).to_pylist() == expected


# --- a union of several records (several types in one topic) ------------------------------

ORDER = rec({"name": "order_id", "type": "long"}, {"name": "sku", "type": "string"}, name="Order")
PAYMENT = rec(
    {"name": "payment_id", "type": "string"},
    {"name": "amount", "type": ["null", "double"]},
    name="Payment",
)
MEMBERS = pa.struct(
    [
        ("member0", pa.struct([("order_id", pa.int64()), ("sku", pa.string())])),
        ("member1", pa.struct([("payment_id", pa.string()), ("amount", pa.float64())])),
    ]
)


def test_union_of_records_is_written_column_wise_as_fastavro_writes_it():
    schema = [ORDER, PAYMENT]
    rows = [
        {"member0": {"order_id": 7, "sku": "a"}, "member1": None},
        {"member0": None, "member1": {"payment_id": "p", "amount": None}},
        None,
        {"member0": None, "member1": {"payment_id": "", "amount": 2.5}},
    ]
    codec = fast_codec(schema, MEMBERS, framed=True, schema_id=4)
    assert isinstance(codec._column_encoder(MEMBERS), UnionEncoder)
    got = codec.encode(pa.array(rows, MEMBERS)).to_pylist()
    header = b"\x00\x00\x00\x00\x04"
    assert got == [
        header + b"\x00" + b"\x0e\x02a",  # branch 0, Order(7, "a")
        header + b"\x02" + b"\x02p\x00",  # branch 1, Payment("p", null)
        None,
        header + b"\x02" + b"\x00\x02" + struct.pack("<d", 2.5),
    ]
    assert got == fastavro_bytes(
        schema,
        [
            None
            if r is None
            else (("Order", r["member0"]) if r["member0"] else ("Payment", r["member1"]))
            for r in rows
        ],
        header,
    )


@st.composite
def union_cases(draw):
    """(schema, Arrow member struct type, rows) of a union of 2-3 flat records, with or
    without a null branch; rows with one member set, none, several, or null."""
    records, members = [], []
    for r in range(draw(st.integers(2, 3))):
        kinds = [draw(st.sampled_from(KINDS[:10])) for _ in range(draw(st.integers(1, 3)))]
        records.append(
            rec(*({"name": f"f{i}", "type": k[0]} for i, k in enumerate(kinds)), name=f"R{r}")
        )
        members.append(
            (
                pa.struct([(f"f{i}", k[1]) for i, k in enumerate(kinds)]),
                st.fixed_dictionaries({f"f{i}": k[2] for i, k in enumerate(kinds)}),
            )
        )
    schema = list(records)
    if draw(st.booleans()):
        schema.insert(draw(st.integers(0, len(schema))), "null")
    arrow_type = pa.struct([(f"member{i}", t) for i, (t, _) in enumerate(members)])

    @st.composite
    def row(draw):
        chosen = draw(
            st.sets(st.integers(0, len(members) - 1), max_size=2)
            if draw(st.integers(0, 3)) == 0
            else st.integers(0, len(members) - 1).map(lambda i: {i})
        )
        return {
            f"member{i}": draw(values) if i in chosen else None
            for i, (_, values) in enumerate(members)
        }

    rows = draw(st.lists(st.none() | row(), max_size=12))
    return schema, arrow_type, rows


def _encoded_or_error(codec, array):
    try:
        return codec.encode(array).to_pylist()
    except ValueError as exc:
        return f"{type(exc).__name__}: {str(exc).split(': ', 1)[0]}"  # the row named


@FAST
@given(union_cases(), st.integers(0, 3))
def test_generated_unions_equal_the_per_row_path(case, cut):
    schema, arrow_type, rows = case
    array = pa.array(rows, arrow_type)
    fast = fast_codec(schema, arrow_type, framed=True, schema_id=99)
    general = GeneralEncodeCodec(avro(schema), framed=True, schema_id=99)
    assert _encoded_or_error(fast, array) == _encoded_or_error(general, array)
    sliced = array.slice(min(cut, len(rows)))
    assert _encoded_or_error(fast, sliced) == _encoded_or_error(general, sliced)


def test_a_union_row_with_several_members_set_fails_naming_the_row_on_both_paths():
    rows = [
        {"member0": {"order_id": 1, "sku": "a"}, "member1": None},
        {"member0": {"order_id": 2, "sku": "b"}, "member1": {"payment_id": "p", "amount": 1.0}},
    ]
    for codec in (
        fast_codec([ORDER, PAYMENT], MEMBERS),
        GeneralEncodeCodec(avro([ORDER, PAYMENT]), framed=False),
    ):
        with pytest.raises(ValueError, match="row 1 .*member0, member1 are all set"):
            codec.encode(pa.array(rows, MEMBERS))
