"""formats/json/codec.py: Confluent-framed JSON into Arrow, checked against confluent-kafka's
JSONSerializer / JSONDeserializer over its in-memory registry client."""

from __future__ import annotations

import datetime as dt
import json
import pickle

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_ds.formats.json.codec import JsonCodec
from kafka_ds.formats.json.schema import JsonSchemaError, compile_schema
from kafka_ds.registry.errors import RegistryUnavailableError
from kafka_ds.registry.schema import RegisteredSchema
from tests.support.registry_fixtures import (
    DictLookup,
    DownLookup,
    MockLookup,
    MockSchemaRegistryClient,
    assert_decode_contract,
)

pytestmark = pytest.mark.skipif(
    MockSchemaRegistryClient is None, reason="confluent-kafka without MockSchemaRegistryClient"
)

from confluent_kafka.schema_registry import Schema  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

CTX = SerializationContext("events", MessageField.VALUE)
UTC = dt.timezone.utc

ORDER = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": ["null", "string"]},
        "price": {"type": "number"},
        "paid": {"type": "boolean"},
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ship": {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/Address"}]},
        "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
    },
    "required": ["id"],
    "definitions": {
        "Address": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}},
        }
    },
}
ORDER_SPARK = (
    "struct<id:bigint,name:string,price:double,paid:boolean,at:timestamp,"
    "day:date,tags:array<string>,ship:struct<city:string,zip:bigint>,note:string>"
)


def _registry(schema=ORDER):
    client = MockSchemaRegistryClient({"url": "mock://test"})
    client.register_schema("events-value", Schema(json.dumps(schema), "JSON"))
    serialize = JSONSerializer(json.dumps(schema), client)
    return client, MockLookup(client), serialize


def _codec(lookup, schema_id=1, **kwargs):
    return JsonCodec(
        lookup.schema_by_id(schema_id), framed=True, lookup=lookup, schema_id=schema_id, **kwargs
    )


def _order(i):
    return {
        "id": i,
        "name": f"n{i}" if i % 3 else None,
        "price": i * 1.25,
        "paid": i % 2 == 0,
        "at": f"2024-01-{1 + i % 28:02d}T10:00:0{i % 10}.25+02:00",
        "day": f"2023-12-{1 + i % 28:02d}",
        "tags": ["a"] * (i % 3),
        "ship": {"city": "Oslo", "zip": i} if i % 4 else None,
        "note": "x\ny" if i == 5 else None,
    }


def _as_arrow_values(record):
    """A JSONDeserializer result with the reader's formats applied (the expected row)."""
    out = {name: record.get(name) for name in ORDER["properties"]}
    if out["at"] is not None:
        out["at"] = dt.datetime.fromisoformat(out["at"]).astimezone(UTC)
    if out["day"] is not None:
        out["day"] = dt.date.fromisoformat(out["day"])
    if out["ship"] is not None:
        out["ship"] = {"city": out["ship"].get("city"), "zip": out["ship"].get("zip")}
    return out


def test_type_table():
    assert compile_schema(ORDER).spark_type == ORDER_SPARK
    assert (
        compile_schema({"type": "object", "additionalProperties": {"type": "number"}}).spark_type
        == "map<string,double>"
    )
    root = compile_schema(ORDER)
    assert root.arrow_type.field("at").type == pa.timestamp("us", tz="UTC")
    assert root.arrow_type.field("day").type == pa.date32()
    assert root.read_type.field("day").type == pa.string()


@pytest.mark.parametrize(
    "schema, message",
    [
        ({"type": ["string", "integer"]}, "type \\['string', 'integer'\\] is not supported"),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "oneOf of 2 non-null schemas"),
        ({"type": "object", "properties": {"a": {}}}, "\\$.a: a schema without a type"),
        ({"type": "object", "properties": {"n": {"$ref": "#"}}}, "recursive \\$ref"),
        ({"type": "object", "properties": {"n": {"$ref": "other.json"}}}, "outside the document"),
        ({"type": "object"}, "an object needs properties"),
        ({"type": "array"}, "an array needs one items schema"),
    ],
)
def test_unsupported_schemas_are_clear_errors(schema, message):
    with pytest.raises(JsonSchemaError, match=message):
        compile_schema(schema)


def test_confluent_serializer_output_decodes_as_its_deserializer_reads_it():
    client, lookup, serialize = _registry()
    records = [_order(i) for i in range(12)]
    framed = [serialize(r, CTX) for r in records]
    deserialize = JSONDeserializer(json.dumps(ORDER), schema_registry_client=client)
    result = _codec(lookup).decode(pa.array(framed + [None]))
    assert len(result.bad_rows) == 0
    expected = [_as_arrow_values(deserialize(b, CTX)) for b in framed] + [None]
    assert result.array.to_pylist() == expected
    assert result.array.type == compile_schema(ORDER).arrow_type


def test_batch_path_and_per_record_path_agree():
    client, lookup, serialize = _registry()
    framed = [serialize(_order(i), CTX) for i in range(12)]
    codec = _codec(lookup)
    batch = codec.decode(pa.array(framed))
    # one bad row makes pyarrow refuse the batch: every row is then parsed on its own
    mixed = codec.decode(pa.array(framed + [b'\x00\x00\x00\x00\x01{"id": true}']))
    assert mixed.bad_rows.tolist() == [12]
    assert mixed.array.slice(0, 12).equals(batch.array)


def test_a_registry_down_past_its_budget_fails_the_decode_and_is_asked_again():
    """An unreachable registry fails the decode (RegistryUnavailableError) instead of making
    the records bad rows, and is asked again later (test_avro_codec.py has the story)."""
    client, lookup, _ = _registry()
    other = client.register_schema(
        "other-value",
        Schema(json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}}), "JSON"),
    )
    down = DownLookup(lookup)
    codec = JsonCodec(lookup.schema_by_id(1), framed=True, lookup=down, schema_id=1)
    values = pa.array([b"\x00" + other.to_bytes(4, "big") + b'{"id": 7}'])
    with pytest.raises(RegistryUnavailableError, match=f"schema id {other}"):
        codec.decode(values)
    down.down = False
    result = codec.decode(values)
    assert result.array.to_pylist()[0]["id"] == 7
    assert len(result.bad_rows) == 0


def test_bad_rows_of_every_kind():
    client, lookup, serialize = _registry()
    good = serialize(_order(2), CTX)
    header = good[:5]
    values = [
        good,
        None,
        b"{}",
        b"\x02" + good[1:],
        header + b'{"id": 1',
        header + b"\xff\xfe",
        header + b'{"id": "1"}',
        header + b'{"id": 1.5}',
        b"\x00\x00\x00\x00\x2a{}",
        header + b"null",
        header + b"[1]",
        header,
        header + b'{"id": 1, "id": 2}',
        header + b'{"day": "2024-02-30"}',
        header + b'{"id": 9223372036854775808}',
        good,
    ]
    result = _codec(lookup).decode(pa.array(values, pa.binary()))
    reasons = dict(zip(result.bad_rows.tolist(), result.reasons, strict=True))
    assert sorted(reasons) == list(range(2, 15))
    assert reasons[2] == "not framed: 2 bytes, shorter than the 5-byte Confluent header"
    assert reasons[3] == "not framed: magic byte 2 (expected 0)"
    for row in (4, 5, 11, 12):
        assert reasons[row].startswith("invalid JSON: "), reasons[row]
    assert "duplicate key 'id'" in reasons[12]
    assert reasons[6] == "does not match the reader schema: $.id: expected bigint, got str '1'"
    assert reasons[7].startswith("does not match the reader schema: $.id: expected bigint")
    assert reasons[8].startswith("unknown schema id 42")
    assert (
        reasons[9] == "does not match the reader schema: $: null, and the schema does not allow it"
    )
    assert reasons[10].startswith("does not match the reader schema: $: expected an object")
    assert reasons[13].startswith("does not match the reader schema: $.day: ")
    assert (
        reasons[14] == "does not match the reader schema: $.id: 9223372036854775808 "
        "does not fit a bigint"
    )
    assert result.schema_ids.tolist() == [-1, -1] + [1] * 4 + [42] + [1] * 6
    rows = result.array.to_pylist()
    assert rows[0] == rows[15] == _as_arrow_values(_order(2))
    assert rows[1:15] == [None] * 14


def test_raw_newline_rows_are_parsed_alone_and_the_rest_in_one_batch():
    client, lookup, serialize = _registry()
    pretty = b"\x00\x00\x00\x00\x01" + json.dumps({"id": 7, "tags": ["q"]}, indent=2).encode()
    framed = [serialize(_order(1), CTX), pretty, serialize(_order(3), CTX)]
    result = _codec(lookup).decode(pa.array(framed))
    assert len(result.bad_rows) == 0
    assert result.array.to_pylist()[1]["id"] == 7
    assert result.array.to_pylist()[2] == _as_arrow_values(_order(3))


def test_schema_id_bytes_that_are_newlines_do_not_split_rows():
    schema = RegisteredSchema("JSON", json.dumps(ORDER), schema_id=10)  # id 10 = b"\n"
    codec = JsonCodec(schema, framed=True, lookup=DictLookup({10: schema}), schema_id=10)
    encoded = codec.encode(
        pa.array([_as_arrow_values(_order(i)) for i in range(4)], compile_schema(ORDER).arrow_type)
    )
    assert encoded[0].as_py()[:5] == b"\x00\x00\x00\x00\x0a"
    assert codec.decode(encoded).array.to_pylist() == [
        _as_arrow_values(_order(i)) for i in range(4)
    ]


def test_maps_decode_per_record():
    schema = {
        "type": "object",
        "properties": {"counts": {"type": "object", "additionalProperties": {"type": "integer"}}},
    }
    client, lookup, serialize = _registry(schema)
    framed = [
        serialize({"counts": {"a": 1, "b": 2}}, CTX),
        serialize({"counts": {}}, CTX),
        b'\x00\x00\x00\x00\x01{"counts": {"a": "x"}}',
    ]
    result = _codec(lookup).decode(pa.array(framed))
    assert result.array.to_pylist()[:2] == [{"counts": [("a", 1), ("b", 2)]}, {"counts": []}]
    assert result.reasons == [
        "does not match the reader schema: $.counts.a: expected bigint, got str 'x'"
    ]


def test_encode_round_trips_and_confluent_reads_it():
    client, lookup, serialize = _registry()
    codec = _codec(lookup)
    framed = [serialize(_order(i), CTX) for i in range(6)]
    decoded = codec.decode(pa.array(framed)).array
    encoded = codec.encode(decoded)
    assert codec.decode(encoded).array.equals(decoded)
    deserialize = JSONDeserializer(json.dumps(ORDER), schema_registry_client=client)
    assert [
        _as_arrow_values(deserialize(b, CTX)) for b in encoded.to_pylist()
    ] == decoded.to_pylist()
    assert (
        encoded.to_pylist()[0] == b'\x00\x00\x00\x00\x01{"id":0,"name":null,"price":0.0,'
        b'"paid":true,"at":"2024-01-01T08:00:00.250000Z","day":"2023-12-01","tags":[],'
        b'"ship":null,"note":null}'
    )


def test_plain_json_and_no_reader_schema():
    codec = JsonCodec(RegisteredSchema("JSON", json.dumps(ORDER)), framed=False)
    result = codec.decode(pa.array([b'{"id": 3}', b'{"id": 4, "extra": [1]}', b"5"]))
    assert [r and r["id"] for r in result.array.to_pylist()] == [3, 4, None]
    assert result.bad_rows.tolist() == [2]
    assert codec.encode(result.array.slice(0, 1)).to_pylist()[0].startswith(b'{"id":3,')
    raw = JsonCodec(None, framed=False)
    assert raw.spark_type == "string"
    text = raw.decode(pa.array([b'{"a": [1, 2]}', b"{nope"]))
    assert text.array.to_pylist() == ['{"a": [1, 2]}', None]
    assert text.reasons[0].startswith("invalid JSON: ")


def test_pickled_codec_decodes_on_an_executor():
    schema = RegisteredSchema("JSON", json.dumps(ORDER), schema_id=1)
    codec = JsonCodec(schema, framed=True, lookup=DictLookup({1: schema}), schema_id=1)
    values = codec.encode(pa.array([_as_arrow_values(_order(1))], compile_schema(ORDER).arrow_type))
    clone = pickle.loads(pickle.dumps(codec))
    assert clone.decode(values).array.equals(codec.decode(values).array)


FUZZ_SCHEMA = RegisteredSchema("JSON", json.dumps(ORDER), schema_id=1)
FUZZ_CODEC = JsonCodec(FUZZ_SCHEMA, framed=True, lookup=DictLookup({1: FUZZ_SCHEMA}), schema_id=1)
_json_text = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(list(ORDER["properties"]) + ["x"]), inner, max_size=4)
    ),
    max_leaves=8,
).map(lambda v: json.dumps(v).encode())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.binary(max_size=30),
            (st.binary(max_size=30) | _json_text).map(lambda b: b"\x00\x00\x00\x00\x01" + b),
        ),
        max_size=10,
    )
)
def test_fuzz_decode_never_raises(values):
    result = FUZZ_CODEC.decode(pa.array(values, pa.binary()))
    for value, decoded in zip(values, assert_decode_contract(result, values), strict=True):
        if decoded is not None:  # the batch reader agrees with the per-record reader
            alone = FUZZ_CODEC.decode(pa.array([value, REFUSED], pa.binary()))
            assert alone.bad_rows.tolist() == [1]
            assert alone.array.to_pylist()[0] == decoded


#: a row pyarrow's batch reader refuses: the batch holding it is read record by record
REFUSED = b'\x00\x00\x00\x00\x01{"id": "q"}'


def test_lone_surrogate_escapes_are_bad_rows():
    codec = JsonCodec(RegisteredSchema("JSON", json.dumps(ORDER)), framed=False)
    result = codec.decode(pa.array([b'{"name": "\\ud800"}', b'{"name": "ok \\u00e9"}']))
    assert result.bad_rows.tolist() == [0]
    assert (
        result.reasons[0] == "does not match the reader schema: $.name: a string with an "
        "unpaired \\uD800-\\uDFFF escape is not valid Unicode"
    )
    assert result.array.to_pylist()[1]["name"] == "ok \u00e9"


def test_writer_evolution_field_added_and_removed():
    v1 = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}
    v2 = {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "email": {"type": ["null", "string"]}},
    }
    client = MockSchemaRegistryClient({"url": "mock://test"})
    lookup = MockLookup(client)
    old_id = client.register_schema("events-value", Schema(json.dumps(v1), "JSON"))
    new_id = client.register_schema("events-value", Schema(json.dumps(v2), "JSON"))
    old = JSONSerializer(json.dumps(v1), client)({"id": 1, "name": "a"}, CTX)
    new = JSONSerializer(json.dumps(v2), client)({"id": 2, "email": "b@x"}, CTX)
    assert (old[1:5], new[1:5]) == (old_id.to_bytes(4, "big"), new_id.to_bytes(4, "big"))
    as_old = _codec(lookup, old_id).decode(pa.array([old, new]))
    assert as_old.array.to_pylist() == [{"id": 1, "name": "a"}, {"id": 2, "name": None}]
    as_new = _codec(lookup, new_id).decode(pa.array([old, new]))
    assert as_new.array.to_pylist() == [{"id": 1, "email": None}, {"id": 2, "email": "b@x"}]
    assert len(as_old.bad_rows) == len(as_new.bad_rows) == 0
