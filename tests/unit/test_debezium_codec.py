"""The debezium-json codec's parts, below Spark and without a broker: its column-wise base64
and decimal decoding against Python's own (hypothesis), the envelope's bad records, the
DDL option's errors, and the codec contract on arbitrary bytes. The codec on real change
events from PostgreSQL: tests/spark/test_debezium.py."""

import base64
import json
from decimal import Context, Decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_ds.errors import ConfigurationError
from kafka_ds.formats.debezium import debezium_codec
from kafka_ds.formats.debezium.convert import base64_decode, unscaled_decimal, variable_decimal
from kafka_ds.formats.debezium.types import Node, from_connect, from_ddl
from kafka_ds.options.formats import ColumnFormatSpec
from tests.support.registry_fixtures import assert_decode_contract

DDL = "id INT, amount DECIMAL(10,2), at TIMESTAMP_NTZ, name STRING"


def codec(ddl=DDL, flatten=False):
    spec = ColumnFormatSpec(column="value", format="debezium-json", inline_schema=ddl)
    return debezium_codec(spec, None, flatten=flatten, tombstones="drop", topics=["t"])


def event(op="c", after=None, before=None):
    return json.dumps(
        {"before": before, "after": after, "source": {"table": "t"}, "op": op, "ts_ms": 1}
    ).encode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=30))
def test_base64_decodes_as_python_does(values):
    text = pa.array([None if v is None else base64.b64encode(v).decode() for v in values])
    decoded, bad = base64_decode(text, "x")
    assert not bad
    assert decoded.to_pylist() == values


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.one_of(st.none(), st.integers(-(10**37), 10**37)), max_size=30),
    st.integers(0, 10),
)
def test_scaled_bytes_are_the_decimal_java_s_bigdecimal_wrote(numbers, scale):
    def to_bytes(n):  # BigInteger.toByteArray: the shortest two's complement
        return n.to_bytes((n + (n < 0)).bit_length() // 8 + 1, "big", signed=True)

    raw = pa.array([None if n is None else to_bytes(n) for n in numbers], pa.binary())
    decoded, bad = unscaled_decimal(raw, 38, scale, "x")
    assert not bad
    assert decoded.to_pylist() == [
        None if n is None else Decimal(n).scaleb(-scale, Context(prec=60)) for n in numbers
    ]


def test_a_variable_scale_beyond_18_is_a_bad_row_not_a_rounded_value():
    raw = pa.array(
        [
            {"scale": 5, "value": base64.b64encode((-52015).to_bytes(3, "big", signed=True))},
            {"scale": 20, "value": base64.b64encode((1).to_bytes(1, "big"))},
        ],
        pa.struct([("scale", pa.int32()), ("value", pa.string())]),
    )
    node = Node("variable_decimal", precision=38, scale=18)
    decoded, bad = variable_decimal(raw, node, "after.ratio")
    assert decoded.to_pylist() == [Decimal("-0.52015"), None]
    assert bad.reasons == {1: "after.ratio: scale 20 does not fit decimal(38,18)"}


def test_bad_records_are_named_and_the_others_decoded():
    good = event(after={"id": 1, "amount": "BNI=", "at": 1704164645123456, "name": "a"})
    values = [
        good,
        None,  # a tombstone: null, not bad
        b"",
        b'{"op": "c", "after": {"id": "not a number"}}',
        b'{"op": "c\n", "after": null}',  # a raw newline in a string: not JSON
        event(after={"id": 2, "amount": "B!I=", "at": None, "name": None}),
        b"\xff\xfe",
    ]
    result = codec().decode(pa.array(values, pa.binary()))
    decoded = assert_decode_contract(result, values)
    assert decoded[0]["after"] == {
        "id": 1,
        "amount": Decimal("12.34"),
        "at": decoded[0]["after"]["at"],
        "name": "a",
    }
    assert str(decoded[0]["after"]["at"]) == "2024-01-02 03:04:05.123456"
    reasons = dict(zip(result.bad_rows.tolist(), result.reasons, strict=True))
    assert sorted(reasons) == [2, 3, 4, 5, 6]
    assert reasons[2] == "empty value (not JSON)"
    assert reasons[5] == "after.amount: not base64"
    assert "not a change event" in reasons[3]


def test_the_flat_form_takes_before_for_a_delete():
    values = [
        event("d", before={"id": 7, "amount": None, "at": None, "name": "gone"}),
        event("t"),
    ]
    rows = codec(flatten=True).decode(pa.array(values, pa.binary())).array.to_pylist()
    assert rows[0]["id"] == 7 and rows[0]["__op"] == "d" and rows[0]["name"] == "gone"
    assert rows[1]["id"] is None and rows[1]["__op"] == "t"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.none(), st.binary(max_size=60)), max_size=12))
def test_any_bytes_keep_the_codec_contract(values):
    assert_decode_contract(codec().decode(pa.array(values, pa.binary())), values)


@pytest.mark.parametrize(
    "ddl, message",
    [
        ("id INT,, x", "is not a DDL of the table's columns"),
        ("id MAP<STRING, INT>", "is not a DDL of the table's columns"),
        ("amount DECIMAL(40,2)", "DECIMAL must fit"),
    ],
)
def test_a_wrong_ddl_names_the_option(ddl, message):
    with pytest.raises(ConfigurationError, match=f"'valueSchema'.*{message}|{message}"):
        from_ddl(ddl, "valueSchema")


def test_a_connect_map_is_refused_naming_the_field():
    schema = {
        "type": "struct",
        "fields": [{"type": "map", "keys": {"type": "string"}, "field": "tags"}],
    }
    with pytest.raises(ValueError, match=r"\$\.tags: Connect type 'map'"):
        from_connect(schema)


def test_a_record_without_schema_asks_for_the_ddl():
    spec = ColumnFormatSpec(column="value", format="debezium-json")
    with pytest.raises(ConfigurationError, match="carries no schema.*'valueSchema'"):
        debezium_codec(spec, event(), flatten=False, tombstones="drop", topics=["orders"])


def test_avro_schemas_of_debezium_read_their_logical_types_and_named_records():
    from kafka_ds.formats.debezium.types import from_avro

    row = {
        "type": "record",
        "name": "Value",
        "namespace": "shop.public.orders",
        "fields": [
            {"name": "id", "type": "int"},
            {
                "name": "at",
                "type": [
                    "null",
                    {"type": "long", "connect.name": "io.debezium.time.MicroTimestamp"},
                ],
            },
            {
                "name": "day",
                "type": ["null", {"type": "int", "connect.name": "io.debezium.time.Date"}],
            },
            {
                "name": "amount",
                "type": [
                    "null",
                    {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
                ],
            },
            {
                "name": "ratio",
                "type": [
                    "null",
                    {
                        "type": "record",
                        "name": "VariableScaleDecimal",
                        "namespace": "io.debezium.data",
                        "connect.name": "io.debezium.data.VariableScaleDecimal",
                        "fields": [
                            {"name": "scale", "type": "int"},
                            {"name": "value", "type": "bytes"},
                        ],
                    },
                ],
            },
        ],
    }
    envelope = {
        "type": "record",
        "name": "Envelope",
        "namespace": "shop.public.orders",
        "fields": [
            {"name": "before", "type": ["null", row]},
            {"name": "after", "type": ["null", "Value"]},  # the named record again
        ],
    }
    node = from_avro(envelope)
    assert node.field("after") is node.field("before")
    assert node.field("after").spark_type == (
        "struct<id:int,at:timestamp_ntz,day:date,amount:decimal(10,2),ratio:decimal(38,18)>"
    )


def test_debezium_avro_needs_the_registry_and_no_ddl():
    from kafka_ds.options.core import READ
    from kafka_ds.options.formats import parse_typed_columns

    with pytest.raises(ConfigurationError, match="debezium-avro.*'schema.registry.url'"):
        parse_typed_columns({"valueformat": "debezium-avro"}, READ)
    with pytest.raises(ConfigurationError, match="'valueSchema' has no effect"):
        parse_typed_columns(
            {
                "valueformat": "debezium-avro",
                "schema.registry.url": "http://r",
                "valueschema": "id INT",
            },
            READ,
        )
