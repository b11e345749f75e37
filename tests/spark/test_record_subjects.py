"""``valueSubjects`` for Protobuf and JSON Schema through Spark, on both brokers, against
Apicurio Registry (tests/support/apicurio.py): records of several types written by
confluent-kafka's ``ProtobufSerializer`` / ``JSONSerializer`` with ``subject.name.strategy``
TopicRecordNameStrategy / RecordNameStrategy are read as one struct with a field per subject
(a type not listed is a bad record), and that struct written back row by row is confluent's
bytes, read back by its deserializers. The codec's cases (both strategies, both
registrations, errors): tests/unit/test_record_subjects.py."""

import json

import pytest
from confluent_kafka.schema_registry import (
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.spark.test_typed_registry import confluent_registry, consume_raw, read
from tests.support.apicurio import apicurio_registry  # noqa: F401  (fixture)
from tests.support.brokers import produce_confluent
from tests.support.registry_fixtures import message_classes
from tests.support.spark_support import spark  # noqa: F401  (fixture)
from tests.unit.test_record_subjects import REFUND, SHOP, SHOP_SPARK


def write(df, broker, topic, registry, fmt, subjects, **options):
    writer = (
        df.write.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", topic)
        .option("valueFormat", fmt)
        .option("valueSubjects", subjects)
        .option("schema.registry.url", registry.url)
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


def test_protobuf_types_by_subject_read_and_written_as_confluent(  # noqa: F811
    spark, broker, new_topic, apicurio_registry
):  # noqa: F811
    topic, copy = new_topic(partitions=1), new_topic(partitions=1)
    client = confluent_registry(apicurio_registry)
    classes = {**message_classes(SHOP), **message_classes(REFUND)}
    ctx = SerializationContext(topic, MessageField.VALUE)
    serialize = {
        name: ProtobufSerializer(
            classes[name],
            client,
            conf={
                "subject.name.strategy": topic_record_subject_name_strategy,
                "use.deprecated.format": False,
            },
        )
        for name in classes
        if name != "shop.Order.Line"
    }
    messages = [
        classes["shop.Order"](order_id=i, note=f"n{i}")
        if i % 2 == 0
        else classes["shop.Payment"](payment_id=f"p{i}", cents=i)
        for i in range(6)
    ]
    raw = [serialize[m.DESCRIPTOR.full_name](m, ctx) for m in messages]
    refund = serialize["shop.Refund"](classes["shop.Refund"](refund_id="r"), ctx)
    produce_confluent(broker.bootstrap_servers, topic, raw + [refund])
    subjects = f"{topic}-shop.Order,{topic}-shop.Payment"

    with pytest.raises(Exception) as caught:
        read(
            spark,
            broker,
            topic,
            valueFormat="protobuf",
            valueSubjects=subjects,
            **{"schema.registry.url": apicurio_registry.url},
        ).collect()
    assert "at offset 6" in str(caught.value) and "its type shop.Refund" in str(caught.value), str(
        caught.value
    )[-1500:]
    df = read(
        spark,
        broker,
        topic,
        valueFormat="protobuf",
        valueSubjects=subjects,
        mode="PERMISSIVE",
        **{"schema.registry.url": apicurio_registry.url},
    )
    assert df.schema["value"].dataType.simpleString() == SHOP_SPARK
    got = sorted(df.select("offset", "value", "valueError").collect())
    assert [tuple(r.value) if r.value else None for r in got] == [
        ((m.order_id, m.note), None) if i % 2 == 0 else (None, (m.payment_id, m.cents))
        for i, m in enumerate(messages)
    ] + [None]
    assert got[6].valueError.raw == refund and all(r.valueError is None for r in got[:6])

    # written back: each row with its subject's schema id and message indexes
    write(
        df.where("value IS NOT NULL").select("value"),
        broker,
        copy,
        apicurio_registry,
        "protobuf",
        subjects,
    )
    copied = [value for _, _, _, value in consume_raw(broker.bootstrap_servers, copy, 6)]
    assert sorted(copied) == sorted(raw)
    for value in copied:
        name = "shop.Order" if value[5:6] == b"\x00" else "shop.Payment"
        assert (
            ProtobufDeserializer(classes[name], {"use.deprecated.format": False})(value, ctx)
            in messages
        )


JSON_TYPES = {
    name: {"title": f"rs.{name}", "type": "object", "properties": properties}
    for name, properties in (
        ("Order", {"order_id": {"type": "integer"}, "note": {"type": "string"}}),
        ("Payment", {"payment_id": {"type": "string"}, "cents": {"type": "integer"}}),
        ("Refund", {"refund_id": {"type": "string"}}),
    )
}


def test_json_types_by_subject_read_and_written_as_confluent(  # noqa: F811
    spark, broker, new_topic, apicurio_registry
):  # noqa: F811
    from kafka_ds.functions import from_registry

    topic, copy = new_topic(partitions=1), new_topic(partitions=1)
    client = confluent_registry(apicurio_registry)
    ctx = SerializationContext(topic, MessageField.VALUE)
    serialize = {
        name: JSONSerializer(
            json.dumps(schema), client, conf={"subject.name.strategy": record_subject_name_strategy}
        )
        for name, schema in JSON_TYPES.items()
    }
    events = [
        {"order_id": i, "note": f"n{i}"} if i % 2 == 0 else {"payment_id": f"p{i}", "cents": i}
        for i in range(6)
    ]
    raw = [serialize["Order" if "order_id" in e else "Payment"](e, ctx) for e in events]
    refund = serialize["Refund"]({"refund_id": "r"}, ctx)
    produce_confluent(broker.bootstrap_servers, topic, raw + [refund])
    registry = {"schema.registry.url": apicurio_registry.url}
    options = {
        "valueFormat": "json",
        "valueSubjects": "rs.Order,rs.Payment",
        "valueMemberNames": "type",
    }
    spark_type = (
        "struct<Order:struct<order_id:bigint,note:string>,"
        "Payment:struct<payment_id:string,cents:bigint>>"
    )

    df = read(spark, broker, topic, mode="PERMISSIVE", **options, **registry)
    assert df.schema["value"].dataType.simpleString() == spark_type
    got = sorted(df.select("offset", "value", "valueError").collect())
    expected = [
        ((e["order_id"], e["note"]), None)
        if "order_id" in e
        else (None, (e["payment_id"], e["cents"]))
        for e in events
    ] + [None]
    assert [tuple(r.value) if r.value else None for r in got] == expected
    assert "its type rs.Refund" in got[6].valueError.reason
    # the column function reads the same way
    decoded = read(spark, broker, topic).select(
        from_registry(
            "value",
            "json",
            subjects="rs.Order,rs.Payment",
            memberNames="type",
            mode="PERMISSIVE",
            schema_registry_url=apicurio_registry.url,
        ).alias("v")
    )
    assert decoded.schema["v"].dataType.simpleString() == spark_type
    assert sorted(
        (tuple(tuple(m) if m else None for m in r.v) if r.v else None for r in decoded.collect()),
        key=repr,
    ) == sorted(expected, key=repr)

    write(
        df.where("value IS NOT NULL").select("value"),
        broker,
        copy,
        apicurio_registry,
        "json",
        "rs.Order,rs.Payment",
        valueMemberNames="type",
    )
    copied = [value for _, _, _, value in consume_raw(broker.bootstrap_servers, copy, 6)]
    assert sorted(v[:5] for v in copied) == sorted(v[:5] for v in raw)  # the subjects' ids
    deserialize = JSONDeserializer(None, schema_registry_client=client)
    assert sorted(json.dumps(deserialize(v, ctx), sort_keys=True) for v in copied) == sorted(
        json.dumps(e, sort_keys=True) for e in events
    )
