"""Several record types in one topic, one subject per type, for Protobuf and JSON Schema
(``valueSubjects`` with ``protobuf``/``json``: formats/record_subjects.py), no broker, no
Spark: the fake registry (real HTTP) and confluent-kafka's serializers give the bytes, with
``subject.name.strategy`` = RecordNameStrategy and TopicRecordNameStrategy, the schemas
registered by the serializer (``auto.register.schemas``) or beforehand
(``use.latest.version``); kafka_ds's bytes are read back by confluent's deserializers."""

import base64
import json

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import (
    Schema,
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import StructField

from kafka_ds.errors import ConfigurationError
from kafka_ds.formats.record_subjects import subjects_codec
from kafka_ds.options.formats import ColumnFormatSpec, TypedColumnsSpec
from kafka_ds.registry.client import SchemaRegistry
from kafka_ds.registry.settings import RegistrySettings
from tests.support.registry_fixtures import file_proto, message_classes
from tests.support.schema_registry import schema_registry  # noqa: F401  (fixture)

CTX = SerializationContext("events", MessageField.VALUE)
STRATEGIES = {
    "record": (record_subject_name_strategy, ""),
    "topic-record": (topic_record_subject_name_strategy, "events-"),
}

# one file, two messages (Order at index [0], Payment at [1]) and a nested one; Refund in
# a file of its own, never listed
SHOP = file_proto(
    "shop.proto",
    {
        "Order": ([("order_id", "int64"), ("note", "string")], {"Line": [("sku", "string")]}),
        "Payment": [("payment_id", "string"), ("cents", "int64")],
    },
    package="shop",
)
REFUND = file_proto("refund.proto", {"Refund": [("refund_id", "string")]}, package="shop")
SHOP_SPARK = (
    "struct<member0:struct<order_id:bigint,note:string>,"
    "member1:struct<payment_id:string,cents:bigint>>"
)


def lookup_for(registry):
    return SchemaRegistry(RegistrySettings.from_options({"schema.registry.url": registry.url}))


def spec(fmt, *subjects, **kwargs):
    return ColumnFormatSpec("value", fmt, subjects=subjects, **kwargs)


def struct(text):
    """A pyspark StructType of ``member:struct<name:bigint|string,...>`` fields, parsed."""
    from pyspark.sql.types import LongType, StringType, StructType

    kinds = {"bigint": LongType(), "string": StringType()}
    members = []
    for member in text[len("struct<") : -2].split(">,"):
        name, _, fields = member.partition(":struct<")
        members.append(
            StructField(
                name,
                StructType(
                    [
                        StructField(f.split(":")[0], kinds[f.split(":")[1]])
                        for f in fields.split(",")
                    ]
                ),
            )
        )
    return StructType(members)


def _encoder(registry, fmt, subjects, spark_type):
    from kafka_ds.write.typed_writes import several_subjects_encoder

    column = spec(fmt, *subjects)
    typed = TypedColumnsSpec(
        value=column,
        key=ColumnFormatSpec("key"),
        registry=RegistrySettings.from_options({"schema.registry.url": registry.url}),
    )
    return several_subjects_encoder(column, typed, StructField("value", struct(spark_type)))


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("registered", ["auto.register", "use.latest.version"])
def test_protobuf_records_go_to_their_subject_by_message_and_back(
    schema_registry, strategy, registered
):  # noqa: F811
    name_of, prefix = STRATEGIES[strategy]
    client = SchemaRegistryClient({"url": schema_registry.url})
    classes = {**message_classes(SHOP), **message_classes(REFUND)}
    conf = {"subject.name.strategy": name_of, "use.deprecated.format": False}
    if registered == "use.latest.version":
        b64 = {"shop": SHOP, "refund": REFUND}
        for subject, proto in (
            (f"{prefix}shop.Order", "shop"),
            (f"{prefix}shop.Payment", "shop"),
            (f"{prefix}shop.Refund", "refund"),
        ):
            client.register_schema(
                subject,
                Schema(base64.b64encode(b64[proto].SerializeToString()).decode(), "PROTOBUF"),
            )
        conf.update({"use.latest.version": True, "auto.register.schemas": False})
    serializers = {
        name: ProtobufSerializer(classes[name], client, conf=dict(conf))
        for name in ("shop.Order", "shop.Payment", "shop.Refund")
    }
    order = classes["shop.Order"](order_id=7, note="n")
    payment = classes["shop.Payment"](payment_id="p", cents=250)
    raw = [
        serializers["shop.Order"](order, CTX),
        serializers["shop.Payment"](payment, CTX),
        None,
        serializers["shop.Refund"](classes["shop.Refund"](refund_id="r"), CTX),
        serializers["shop.Order"](classes["shop.Order"](order_id=8), CTX)[:-1],
    ]
    # both messages of shop.proto, registered under two subjects: one schema id
    assert raw[0][1:5] == raw[1][1:5] and raw[1][5:7] == b"\x02\x02"

    listed = (f"{prefix}shop.Order", f"{prefix}shop.Payment")
    codec = subjects_codec(spec("protobuf", *listed), lookup_for(schema_registry))
    assert codec.spark_type == SHOP_SPARK
    result = codec.decode(pa.array(raw, pa.binary()))
    assert result.array.to_pylist() == [
        {"member0": {"order_id": 7, "note": "n"}, "member1": None},
        {"member0": None, "member1": {"payment_id": "p", "cents": 250}},
        None,
        None,
        None,
    ]
    assert result.bad_rows.tolist() == [3, 4]
    assert result.reasons[0].startswith("its type shop.Refund (schema id ") and result.reasons[
        0
    ].endswith("(shop.Order, shop.Payment), the types of the subjects 'valueSubjects' lists")
    assert "truncated" in result.reasons[1] or "invalid" in result.reasons[1]

    # written: each row with its field's subject's schema, confluent's bytes exactly
    encoder = _encoder(schema_registry, "protobuf", listed, SHOP_SPARK)
    written = encoder.encode(result.array.slice(0, 3))
    assert written.to_pylist() == [raw[0], raw[1], None]
    for value, cls, expected in (
        (written[0].as_py(), "shop.Order", order),
        (written[1].as_py(), "shop.Payment", payment),
    ):
        assert (
            ProtobufDeserializer(classes[cls], {"use.deprecated.format": False})(value, CTX)
            == expected
        )


JSON_TYPES = {
    "Order": {
        "title": "Order",
        "type": "object",
        "properties": {"order_id": {"type": "integer"}, "note": {"type": ["null", "string"]}},
        "required": ["order_id"],
    },
    "Payment": {
        "title": "Payment",
        "type": "object",
        "properties": {"payment_id": {"type": "string"}, "cents": {"type": "integer"}},
    },
    "Refund": {
        "title": "Refund",
        "type": "object",
        "properties": {"refund_id": {"type": "string"}},
    },
}
JSON_SPARK = (
    "struct<member0:struct<order_id:bigint,note:string>,"
    "member1:struct<payment_id:string,cents:bigint>>"
)


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("registered", ["auto.register", "use.latest.version"])
def test_json_records_go_to_their_subject_by_title_and_back(schema_registry, strategy, registered):  # noqa: F811
    name_of, prefix = STRATEGIES[strategy]
    client = SchemaRegistryClient({"url": schema_registry.url})
    conf = {"subject.name.strategy": name_of}
    if registered == "use.latest.version":
        for name, schema in JSON_TYPES.items():
            client.register_schema(f"{prefix}{name}", Schema(json.dumps(schema), "JSON"))
        conf.update({"use.latest.version": True, "auto.register.schemas": False})
    serialize = {
        name: JSONSerializer(json.dumps(schema), client, conf=dict(conf))
        for name, schema in JSON_TYPES.items()
    }
    untitled = {"type": "object", "properties": {"x": {"type": "integer"}}}
    raw = [
        serialize["Payment"]({"payment_id": "p", "cents": 3}, CTX),
        serialize["Order"]({"order_id": 1, "note": None}, CTX),
        serialize["Refund"]({"refund_id": "r"}, CTX),
        JSONSerializer(json.dumps(untitled), client)({"x": 1}, CTX),
        None,
        serialize["Order"]({"order_id": 2, "note": "b"}, CTX),
    ]

    listed = (f"{prefix}Order", f"{prefix}Payment")
    codec = subjects_codec(spec("json", *listed), lookup_for(schema_registry))
    assert codec.spark_type == JSON_SPARK
    result = codec.decode(pa.array(raw, pa.binary()))
    assert result.array.to_pylist() == [
        {"member0": None, "member1": {"payment_id": "p", "cents": 3}},
        {"member0": {"order_id": 1, "note": None}, "member1": None},
        None,
        None,
        None,
        {"member0": {"order_id": 2, "note": "b"}, "member1": None},
    ]
    assert result.bad_rows.tolist() == [2, 3]
    assert result.reasons[0].startswith("its type Refund (schema id ")
    assert "has no title" in result.reasons[1]
    # a batch of one type only: that subject's codec decodes it whole
    assert codec.decode(pa.array([raw[5], raw[1]])).array.to_pylist() == [
        {"member0": {"order_id": 2, "note": "b"}, "member1": None},
        {"member0": {"order_id": 1, "note": None}, "member1": None},
    ]

    encoder = _encoder(schema_registry, "json", listed, JSON_SPARK)
    written = encoder.encode(result.array)
    deserialize = JSONDeserializer(None, schema_registry_client=client)
    assert [deserialize(v, CTX) if v is not None else None for v in written.to_pylist()] == [
        {"payment_id": "p", "cents": 3},
        {"order_id": 1, "note": None},
        None,
        None,
        None,
        {"order_id": 2, "note": "b"},
    ]
    assert written[0].as_py()[1:5] == raw[0][1:5] and written[1].as_py()[1:5] == raw[1][1:5]


def test_member_names_by_type_and_a_prefix(schema_registry):  # noqa: F811
    from kafka_ds.options.core import READ
    from kafka_ds.options.formats import parse_typed_columns
    from kafka_ds.read.typed_columns import resolve_for_read

    client = SchemaRegistryClient({"url": schema_registry.url})
    for name in ("Order", "Payment"):
        client.register_schema(f"named-{name}", Schema(json.dumps(JSON_TYPES[name]), "JSON"))
    client.register_schema("named-value", Schema(json.dumps(JSON_TYPES["Refund"]), "JSON"))
    typed = resolve_for_read(
        parse_typed_columns(
            {
                "valueformat": "json",
                "valuesubjects": "named-*",
                "valuemembernames": "type",
                "schema.registry.url": schema_registry.url,
            },
            READ,
        ),
        ["named"],
    )
    assert typed.columns[0].spark_type == JSON_SPARK.replace("member0", "Order").replace(
        "member1", "Payment"
    )
    # keySubjects the same way; a key of a type not listed fails the batch (FAILFAST)
    # naming topic, partition, offset, schema id and its type
    typed = resolve_for_read(
        parse_typed_columns(
            {
                "keyformat": "json",
                "keysubjects": "named-Order,named-Payment",
                "schema.registry.url": schema_registry.url,
            },
            READ,
        ),
        ["named"],
    )
    assert typed.columns[0].name == "key" and typed.columns[0].spark_type == JSON_SPARK
    refund = JSONSerializer(
        json.dumps(JSON_TYPES["Refund"]),
        client,
        conf={"subject.name.strategy": topic_record_subject_name_strategy},
    )({"refund_id": "r"}, SerializationContext("named", MessageField.KEY))
    order = JSONSerializer(
        json.dumps(JSON_TYPES["Order"]),
        client,
        conf={"subject.name.strategy": topic_record_subject_name_strategy},
    )({"order_id": 1}, CTX)
    batch = pa.RecordBatch.from_arrays(
        [pa.array([order, refund]), pa.array([40, 41])], names=["key", "offset"]
    )
    from kafka_ds.errors import RecordDecodeError

    with pytest.raises(
        RecordDecodeError,
        match=r"key of named-0 at offset 41 as json \(schema "
        r"id \d+\): its type Refund.*'keySubjects' lists",
    ):
        typed.decode_batch(batch, "named", 0)


def test_planning_errors_name_the_option_and_the_fix(schema_registry):  # noqa: F811
    from kafka_ds.options.core import READ
    from kafka_ds.options.formats import parse_typed_columns

    client = SchemaRegistryClient({"url": schema_registry.url})
    client.register_schema("j.A", Schema(json.dumps(JSON_TYPES["Order"]), "JSON"))
    client.register_schema("j.B", Schema(json.dumps(JSON_TYPES["Order"] | {"x": 1}), "JSON"))
    client.register_schema("j.U", Schema(json.dumps({"type": "object"}), "JSON"))
    client.register_schema("j.P", Schema(json.dumps(JSON_TYPES["Payment"]), "JSON"))
    client.register_schema("a.A", Schema('"string"', "AVRO"))
    lookup = lookup_for(schema_registry)

    def fails(subjects, match, fmt="json"):
        with pytest.raises(ConfigurationError, match=match):
            subjects_codec(spec(fmt, *subjects), lookup)

    fails(("j.A", "j.B"), "'valueSubjects': subjects 'j.A' and 'j.B' both hold type Order")
    fails(
        ("j.A", "j.U"),
        "subject 'j.U' version 1 is a JSON Schema without a 'title'.*give the schema a title",
    )
    fails(("j.A", "a.A"), "reads json .*subject 'a.A' holds a AVRO schema: remove it")
    fails(("j.A",), "names one subject .*use 'valueSubject'")
    with pytest.raises(ConfigurationError, match="'valueSubjects' and 'valueMessageName'"):
        parse_typed_columns(
            {
                "valueformat": "protobuf",
                "valuesubjects": "a,b",
                "valuemessagename": "x",
                "schema.registry.url": "http://r",
            },
            READ,
        )
    # the write's fit check names the field and the subject
    with pytest.raises(
        ConfigurationError, match="Field 'value.member1' does not fit subject 'j.P' version 1"
    ):
        _encoder(
            schema_registry,
            "json",
            ("j.A", "j.P"),
            "struct<member0:struct<order_id:bigint>,member1:struct<nope:string>>",
        )
    with pytest.raises(
        ConfigurationError, match="names 2 subjects .* must be a struct of as many fields"
    ):
        _encoder(schema_registry, "json", ("j.A", "j.P"), "struct<member0:struct<order_id:bigint>>")


def test_protobuf_messages_after_the_first_read_column_wise_as_row_by_row(schema_registry):  # noqa: F811
    # message indexes [k] (k < 64) are found for all rows at once; any other spelling
    # (here [1] with a two-byte count varint) row by row: the same rows either way
    from kafka_ds.formats.protobuf.codec import ProtobufCodec

    client = SchemaRegistryClient({"url": schema_registry.url})
    classes = message_classes(SHOP)
    payment = ProtobufSerializer(
        classes["shop.Payment"],
        client,
        conf={
            "subject.name.strategy": record_subject_name_strategy,
            "use.deprecated.format": False,
        },
    )
    raw = [payment(classes["shop.Payment"](payment_id=f"p{i}", cents=i), CTX) for i in range(4)]
    assert all(v[5:7] == b"\x02\x02" for v in raw)
    other = [v[:5] + b"\x82\x00\x02" + v[7:] for v in raw]
    schema = lookup_for(schema_registry).schema_version("shop.Payment", "latest", fmt="serialized")
    codec = ProtobufCodec(
        schema, framed=True, lookup=lookup_for(schema_registry), message_name="shop.Payment"
    )
    fast = codec.decode(pa.array(raw, pa.binary()))
    slow = codec.decode(pa.array(other, pa.binary()))
    assert not len(fast.bad_rows) and not len(slow.bad_rows)
    assert (
        fast.array.to_pylist()
        == slow.array.to_pylist()
        == [{"payment_id": f"p{i}", "cents": i} for i in range(4)]
    )


def test_protobuf_subject_importing_another_read_and_written(schema_registry):  # noqa: F811
    # ProtobufSerializer registers the imported file as a subject of its own (a reference):
    # read and written through the registry, the bytes confluent's
    client = SchemaRegistryClient({"url": schema_registry.url})
    common = file_proto("money.proto", {"Money": [("cents", "int64")]}, package="imp")
    order = file_proto(
        "imp_order.proto",
        {"Order": [("id", "int64"), ("price", ".imp.Money")]},
        package="imp",
        deps=["money.proto"],
    )
    other = file_proto("imp_other.proto", {"Note": [("text", "string")]}, package="imp")
    classes = {**message_classes(common, order), **message_classes(other)}
    conf = {"subject.name.strategy": record_subject_name_strategy, "use.deprecated.format": False}
    raw = [
        ProtobufSerializer(classes["imp.Order"], client, conf=dict(conf))(
            classes["imp.Order"](id=1, price=classes["imp.Money"](cents=5)), CTX
        ),
        ProtobufSerializer(classes["imp.Note"], client, conf=dict(conf))(
            classes["imp.Note"](text="t"), CTX
        ),
    ]
    codec = subjects_codec(spec("protobuf", "imp.Order", "imp.Note"), lookup_for(schema_registry))
    spark_type = (
        "struct<member0:struct<id:bigint,price:struct<cents:bigint>>,member1:struct<text:string>>"
    )
    assert codec.spark_type == spark_type
    result = codec.decode(pa.array(raw, pa.binary()))
    assert result.array.to_pylist() == [
        {"member0": {"id": 1, "price": {"cents": 5}}, "member1": None},
        {"member0": None, "member1": {"text": "t"}},
    ]
    from pyspark.sql.types import LongType, StringType, StructType

    field = StructField(
        "value",
        StructType(
            [
                StructField(
                    "member0",
                    StructType(
                        [
                            StructField("id", LongType()),
                            StructField("price", StructType([StructField("cents", LongType())])),
                        ]
                    ),
                ),
                StructField("member1", StructType([StructField("text", StringType())])),
            ]
        ),
    )
    from kafka_ds.write.typed_writes import several_subjects_encoder

    column = spec("protobuf", "imp.Order", "imp.Note")
    encoder = several_subjects_encoder(
        column,
        TypedColumnsSpec(
            value=column,
            key=ColumnFormatSpec("key"),
            registry=RegistrySettings.from_options({"schema.registry.url": schema_registry.url}),
        ),
        field,
    )
    assert encoder.encode(result.array).to_pylist() == raw


_FUZZ = {}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.binary(max_size=30),
            st.tuples(
                st.sampled_from([b"\x00", b"\x02\x02", b"\x02\x04", b"\x03", b"\x04\x02\x00", b""]),
                st.binary(max_size=30),
            ).map(lambda t: t[0] + t[1]),
        ),
        max_size=12,
    ),
    st.sampled_from(["protobuf", "json"]),
)
def test_fuzz_decode_keeps_the_contract(schema_registry, values, fmt):  # noqa: F811
    # any bytes, also after a real header of one of the types: one row out per row in,
    # null exactly where the input is null or the row is reported bad, never an exception
    from tests.support.registry_fixtures import assert_decode_contract

    if fmt not in _FUZZ:
        client = SchemaRegistryClient({"url": schema_registry.url})
        shop = Schema(base64.b64encode(SHOP.SerializeToString()).decode(), "PROTOBUF")
        subjects = (
            ("fzp-shop.Order", "fzp-shop.Payment")
            if fmt == "protobuf"
            else ("fzj.Order", "fzj.Payment")
        )
        for subject in subjects:
            client.register_schema(
                subject,
                shop
                if fmt == "protobuf"
                else Schema(json.dumps(JSON_TYPES[subject[4:]] | {"title": subject}), "JSON"),
            )
        codec = subjects_codec(spec(fmt, *subjects), lookup_for(schema_registry))
        _FUZZ[fmt] = (codec, client.get_latest_version(subjects[0]).schema_id)
    codec, schema_id = _FUZZ[fmt]
    header = b"\x00" + schema_id.to_bytes(4, "big")
    values = [v if v is None or len(v) % 3 else header + v for v in values]
    assert_decode_contract(codec.decode(pa.array(values, pa.binary())), values)
