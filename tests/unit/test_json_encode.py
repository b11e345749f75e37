"""The column-wise JSON encoder (kafka_ds.formats.json.encode) behind JsonCodec.encode.

Its text is checked against hand-written JSON and against the general path
(``json.dumps(..., separators=(",", ":"), ensure_ascii=False, allow_nan=False)`` per row)
on fixed cases and generated flat objects; confluent-kafka's JSONSerializer frames the
same way and its payload parses to the same value.
"""

import json

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_ds.formats.json.codec import JsonCodec
from kafka_ds.formats.json.encode import build_object_encoder
from kafka_ds.formats.json.schema import compile_schema
from kafka_ds.registry.schema import RegisteredSchema
from tests.support.registry_fixtures import MockSchemaRegistryClient

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class GeneralEncodeCodec(JsonCodec):
    """A JsonCodec that encodes every row with json.dumps."""

    def _column_encoder(self, arrow_type):
        return None


def schema(**properties):
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in properties.items()},
    }


def codecs(json_schema, schema_id=None):
    registered = RegisteredSchema("JSON", json.dumps(json_schema), schema_id=schema_id)
    kwargs = {"framed": schema_id is not None, "schema_id": schema_id}
    return JsonCodec(registered, **kwargs), GeneralEncodeCodec(registered, **kwargs)


ORDER = schema(id="integer", name="string", price="number", ok="boolean")


@pytest.mark.parametrize(
    "row,text",
    [
        (
            {"id": 1, "name": "a", "price": 1.5, "ok": True},
            '{"id":1,"name":"a","price":1.5,"ok":true}',
        ),
        (
            {"id": None, "name": None, "price": None, "ok": None},
            '{"id":null,"name":null,"price":null,"ok":null}',
        ),
        (
            {"id": -(1 << 63), "name": "", "price": 1e16, "ok": False},
            '{"id":-9223372036854775808,"name":"","price":1e+16,"ok":false}',
        ),
        (
            {"id": 0, "name": 'q"b\\s\n\t\x01\x7fé😀\u2028', "price": 100.0, "ok": True},
            '{"id":0,"name":"q\\"b\\\\s\\n\\t\\u0001\x7fé😀\u2028","price":100.0,"ok":true}',
        ),
        (
            {"id": 7, "name": "x", "price": 1e-05, "ok": True},
            '{"id":7,"name":"x","price":1e-05,"ok":true}',
        ),
        (
            {"id": 7, "name": "x", "price": -0.0, "ok": True},
            '{"id":7,"name":"x","price":-0.0,"ok":true}',
        ),
        (
            {"id": 7, "name": "x", "price": 0.1, "ok": True},
            '{"id":7,"name":"x","price":0.1,"ok":true}',
        ),
    ],
)
def test_golden_text(row, text):
    fast, general = codecs(ORDER, schema_id=9)
    assert fast._column_encoder(fast.arrow_type) is not None
    array = pa.array([row, None], fast.arrow_type)
    expected = [b"\x00\x00\x00\x00\x09" + text.encode("utf-8"), None]
    assert fast.encode(array).to_pylist() == expected
    assert general.encode(array).to_pylist() == expected


def test_column_types_missing_and_extra_properties_match_the_general_path():
    fast, general = codecs(ORDER)
    arrow_type = pa.struct(
        [
            ("price", pa.float32()),
            ("id", pa.int8()),
            ("extra", pa.string()),
            ("name", pa.large_string()),
        ]
    )
    assert fast._column_encoder(arrow_type) is not None
    array = pa.array(
        [
            {"price": 0.1, "id": -3, "extra": "e", "name": "n"},
            None,
            {"price": None, "id": None, "extra": None, "name": "\\"},
        ],
        arrow_type,
    )
    assert fast.encode(array).to_pylist() == general.encode(array).to_pylist()
    assert fast.encode(array.slice(1)).to_pylist() == general.encode(array.slice(1)).to_pylist()
    # the float32 0.1 as the double it is, as to_pylist gives it
    assert (
        fast.encode(array).to_pylist()[0]
        == b'{"id":-3,"name":"n","price":0.10000000149011612,"ok":null}'
    )


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_numbers_fail_naming_the_row(value):
    fast, _general = codecs(ORDER)
    array = pa.array([{"price": 1.0}, {"price": value}], fast.arrow_type)
    with pytest.raises(ValueError, match="row 1: cannot encode as JSON: Out of range float"):
        fast.encode(array)


@pytest.mark.parametrize(
    "json_schema,arrow_type",
    [
        (
            {"type": "object", "properties": {"t": {"type": "string", "format": "date-time"}}},
            pa.struct([("t", pa.timestamp("us", tz="UTC"))]),
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "array", "items": {"type": "integer"}}},
            },
            pa.struct([("a", pa.list_(pa.int64()))]),
        ),
        (
            {
                "type": "object",
                "properties": {"o": {"type": "object", "properties": {"x": {"type": "integer"}}}},
            },
            pa.struct([("o", pa.struct([("x", pa.int64())]))]),
        ),
        (schema(id="integer"), pa.struct([("id", pa.string())])),
        ({"type": "string"}, pa.string()),
    ],
)
def test_other_schemas_take_the_general_path(json_schema, arrow_type):
    assert build_object_encoder(compile_schema(json.dumps(json_schema)), arrow_type) is None


def test_confluent_json_serializer_frames_alike():
    if MockSchemaRegistryClient is None:
        pytest.skip("confluent-kafka without MockSchemaRegistryClient")
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = MockSchemaRegistryClient({"url": "mock://json-encode"})
    serializer = JSONSerializer(json.dumps(ORDER), client)
    ctx = SerializationContext("t", MessageField.VALUE)
    row = {"id": 3, "name": "é\n", "price": 2.5, "ok": False}
    theirs = serializer(row, ctx)
    schema_id = int.from_bytes(theirs[1:5], "big")
    fast, _general = codecs(ORDER, schema_id=schema_id)
    ours = fast.encode(pa.array([row], fast.arrow_type)).to_pylist()[0]
    assert ours[:5] == theirs[:5]
    assert json.loads(ours[5:]) == json.loads(theirs[5:])


# --- generated flat objects ----------------------------------------------------------------

KINDS = {
    "integer": (pa.int64(), st.integers(-(1 << 63), (1 << 63) - 1)),
    "number": (pa.float64(), st.floats(allow_nan=False, allow_infinity=False)),
    "boolean": (pa.bool_(), st.booleans()),
    "string": (pa.string(), st.text(max_size=8) | st.sampled_from(['"', "\\", "\x00\x1f", "é"])),
}


@st.composite
def flat_objects(draw):
    names = draw(st.lists(st.text(min_size=1, max_size=4), min_size=1, max_size=6, unique=True))
    kinds = [draw(st.sampled_from(sorted(KINDS))) for _ in names]
    nullable = [draw(st.booleans()) for _ in names]
    properties = {
        n: {"type": ["null", k] if opt else k}
        for n, k, opt in zip(names, kinds, nullable, strict=True)
    }
    row = st.fixed_dictionaries(
        {n: st.none() | KINDS[k][1] for n, k in zip(names, kinds, strict=True)}
    )
    rows = draw(st.lists(st.none() | row, max_size=20))
    return {"type": "object", "properties": properties}, rows


@FAST
@given(flat_objects(), st.integers(0, 3))
def test_generated_flat_objects_equal_json_dumps(case, cut):
    json_schema, rows = case
    fast, general = codecs(json_schema, schema_id=77)
    array = pa.array(rows, fast.arrow_type)
    assert fast._column_encoder(array.type) is not None
    encoded = fast.encode(array).to_pylist()
    assert encoded == general.encode(array).to_pylist()
    assert fast.encode(array.slice(min(cut, len(rows)))).to_pylist() == encoded[cut:]


BOUNDARIES = [
    0.0,
    -0.0,
    1e-4,
    9.999999999999999e-05,
    -1e-4,
    1e15,
    9.999999999999998e14,
    999999999999999.9,
    1e16,
    9999999999999998.0,
    5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    123456789012345.6,
    1e22,
    1e-7,
    2.5e-7,
    0.1 + 0.2,
    3.0,
]


@pytest.mark.parametrize("value", BOUNDARIES + [-v for v in BOUNDARIES])
def test_numbers_at_notation_boundaries_are_pythons_repr(value):
    fast, _general = codecs(schema(x="number"))
    text = fast.encode(pa.array([{"x": value}], fast.arrow_type)).to_pylist()[0]
    assert text == json.dumps({"x": value}, separators=(",", ":")).encode()


@FAST
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=30))
def test_generated_numbers_are_pythons_repr(values):
    fast, _general = codecs(schema(x="number"))
    texts = fast.encode(pa.array([{"x": v} for v in values], fast.arrow_type)).to_pylist()
    assert texts == [json.dumps({"x": v}, separators=(",", ":")).encode() for v in values]
