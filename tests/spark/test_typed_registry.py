"""Schema-Registry Avro, Protobuf and JSON through Spark, cross-checked both ways with
confluent-kafka's serializers on both brokers, against a real registry: Apicurio Registry
3.3's Confluent-compatible API (tests/support/apicurio.py; its REST answers beside the
fake's: tests/integration/test_registries.py). The fake registry of
tests/support/schema_registry.py (proven with confluent-kafka's own client in
tests/integration/test_schema_registry.py) serves what a real server will not do on
request: the outage of the streaming test below (its requests are counted) and a
credentials test on the mock cluster (basic auth on Apicurio: test_registries.py).

* records confluent-kafka's serializers produced read by kafka_ds into the values its
  deserializers return (Avro across three schema versions in one topic);
* records kafka_ds wrote read back by confluent-kafka's deserializers;
* every bad-record reason in FAILFAST and PERMISSIVE;
* the column functions ``from_registry``/``to_registry``.
"""

import datetime as dt
import json
import uuid

import pytest
from chispa import assert_df_equality
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafka_ds.errors import ConfigurationError
from tests.support.apicurio import apicurio_registry  # noqa: F401  (fixture)
from tests.support.brokers import produce_confluent
from tests.support.spark_support import spark  # noqa: F401  (fixture)


def avro_record(*fields):
    return json.dumps(
        {"type": "record", "name": "User", "namespace": "shop", "fields": list(fields)}
    )


# Three versions of one subject, each BACKWARD compatible with the one before.
USER_V1 = avro_record({"name": "id", "type": "long"}, {"name": "name", "type": "string"})
USER_V2 = avro_record(
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "score", "type": "double", "default": 0.5},
)
USER_V3 = avro_record(
    {"name": "id", "type": "long"},
    {"name": "score", "type": "double", "default": 0.5},
    {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
    {
        "name": "seen",
        "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
        "default": None,
    },
)


# confluent-kafka's registry client waits for an answer without a time limit; with one,
# an answer that never comes is a transport error, which the client asks again (seen
# once: a request to Apicurio on a kept-alive connection got no answer, and the test
# hung until pytest's timeout)
CONFLUENT_TIMEOUT_S = 30


def confluent_registry(registry):
    return SchemaRegistryClient({"url": registry.url, "timeout": CONFLUENT_TIMEOUT_S})


def schema_fetches(registry) -> int:
    return sum(
        1 for r in registry.requests if r.method == "GET" and r.path.startswith("/schemas/ids/")
    )


def consume_raw(bootstrap, topic, count, timeout=30.0):
    """``count`` records of ``topic`` as (key, value) bytes, read by confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": uuid.uuid4().hex,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    # assign, not subscribe: no group join (seconds of rebalance delay on Tansu)
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    # offset 0, not OFFSET_BEGINNING: Tansu deviation 15 (tests/README.md)
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    out = []
    try:
        import time

        deadline = time.time() + timeout
        while len(out) < count and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    assert len(out) == count, f"read {len(out)} of {count} records of {topic}"
    return sorted(out)


def read(spark, broker, topic, **options):
    reader = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


# --- Avro ------------------------------------------------------------------------------------


def test_avro_three_writer_versions_read_with_the_latest_as_confluent_reads_them(
    spark, broker, new_topic, apicurio_registry
):
    topic = new_topic(partitions=2)
    client = confluent_registry(apicurio_registry)
    value_ctx = SerializationContext(topic, MessageField.VALUE)
    key_ctx = SerializationContext(topic, MessageField.KEY)
    key_serializer = AvroSerializer(client, '"long"')
    records, written = [], []
    for version, schema in enumerate((USER_V1, USER_V2, USER_V3), start=1):
        serializer = AvroSerializer(client, schema)
        for i in range(6):
            value = {
                "id": version * 100 + i,
                "name": f"u{i}",
                "score": i / 4,
                "tags": [f"t{j}" for j in range(i % 3)],
                "seen": dt.datetime(2026, 1, 1, i, tzinfo=dt.timezone.utc) if i % 2 else None,
            }
            raw = serializer(value, value_ctx)  # (fields the schema lacks are not written)
            records.append(
                {
                    "key": key_serializer(version * 100 + i, key_ctx),
                    "value": raw if i != 5 else None,
                    "partition": i % 2,
                }
            )
            written.append(raw if i != 5 else None)
    produce_confluent(broker.bootstrap_servers, topic, records)

    df = read(
        spark,
        broker,
        topic,
        valueFormat="avro",
        keyFormat="avro",
        **{"schema.registry.url": apicurio_registry.url},
    )
    assert df.schema.simpleString().startswith(
        "struct<key:bigint,value:struct<id:bigint,score:double,tags:array<string>,"
        "seen:timestamp>,topic:string,"
    )

    # What confluent-kafka's deserializer gives with the latest schema as reader schema.
    reader = AvroDeserializer(client, USER_V3)
    key_reader = AvroDeserializer(client)
    expected = []
    for record in records:
        key = key_reader(record["key"], key_ctx)
        value = reader(record["value"], value_ctx) if record["value"] is not None else None
        expected.append(
            (
                key,
                None
                if value is None
                else (value["id"], value["score"], value["tags"], value["seen"]),
            )
        )
    got = df.select("key", "value")
    assert_df_equality(got, spark.createDataFrame(expected, got.schema), ignore_row_order=True)


def test_avro_written_by_kafka_ds_read_by_confluent(spark, broker, new_topic, apicurio_registry):
    topic = new_topic(partitions=1)
    rows = [(f"k{i}", i, f"name {i}", None if i % 3 == 0 else i * 1.5) for i in range(20)]
    source = spark.createDataFrame(rows, "k string, id bigint, name string, score double")
    (
        source.selectExpr("k AS key", "struct(id, name, score) AS value")
        .write.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", topic)
        .option("valueFormat", "avro")
        .option("schema.registry.url", apicurio_registry.url)
        .mode("append")
        .save()
    )

    client = confluent_registry(apicurio_registry)
    registered = client.get_latest_version(f"{topic}-value")
    # derived from the Spark type as spark-avro derives it: nullable -> a union with null
    assert json.loads(registered.schema.schema_str)["fields"][0] == {
        "name": "id",
        "type": ["null", "long"],
        "default": None,
    }
    deserializer = AvroDeserializer(client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    got = sorted(
        (
            key.decode(),
            deserializer(value, ctx)["id"],
            deserializer(value, ctx)["name"],
            deserializer(value, ctx)["score"],
        )
        for _, _, key, value in consume_raw(broker.bootstrap_servers, topic, 20)
    )
    assert got == sorted(rows)

    # A second write with a type that does not fit, registration off: refused at planning.
    bad = spark.createDataFrame([("x", 1)], "id string, extra int")
    with pytest.raises(Exception) as caught:
        (
            bad.selectExpr("struct(id, extra) AS value")
            .write.format("pykafka")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("topic", topic)
            .option("valueFormat", "avro")
            .option("schema.registry.url", apicurio_registry.url)
            .option("schema.registry.auto.register.schemas", "false")
            .mode("append")
            .save()
        )
    message = str(caught.value)
    assert f"Column 'value' does not fit subject '{topic}-value'" in message, message[-1500:]
    assert "value.extra: no field 'extra'" in message or "value.id" in message, message[-1500:]


def test_plain_avro_with_an_inline_schema_round_trips_without_a_registry(spark, broker, new_topic):
    topic = new_topic(partitions=1)
    schema = avro_record(
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"], "default": None},
    )
    source = spark.createDataFrame(
        [(i, None if i == 2 else f"n{i}") for i in range(5)], "id bigint, name string"
    )
    (
        source.selectExpr("struct(id, name) AS value")
        .write.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", topic)
        .option("valueFormat", "avro")
        .option("valueSchema", schema)
        .mode("append")
        .save()
    )
    import io

    import fastavro

    raw = consume_raw(broker.bootstrap_servers, topic, 5)
    parsed = fastavro.parse_schema(json.loads(schema))
    assert sorted(fastavro.schemaless_reader(io.BytesIO(v), parsed)["id"] for *_, v in raw) == list(
        range(5)
    )
    got = read(spark, broker, topic, valueFormat="avro", valueSchema=schema).select("value.*")
    assert_df_equality(got, source, ignore_row_order=True, ignore_nullable=True)


def test_avro_top_level_bytes_key_and_value_are_raw_as_confluent_frames_them(
    spark, broker, new_topic, apicurio_registry, tmp_path
):
    """Subjects whose schema is "bytes": confluent-kafka's AvroSerializer writes the header
    and the bytes alone (no Avro length). kafka_ds reads such keys and values (batch,
    stream, from_registry) and writes them (batch, stream, to_registry) as it does."""
    from confluent_kafka.schema_registry import Schema

    from kafka_ds.functions import from_registry, to_registry

    values = [b"", b"\x01", b"\x00\x00\x00", bytes(range(256))]
    source, batch_sink, stream_sink = (new_topic(partitions=1) for _ in range(3))
    client = confluent_registry(apicurio_registry)
    for topic in (source, batch_sink, stream_sink):
        for field in ("key", "value"):
            client.register_schema(f"{topic}-{field}", Schema('"bytes"', "AVRO"))
    contexts = {
        f: SerializationContext(source, getattr(MessageField, f.upper())) for f in ("key", "value")
    }
    serializer = AvroSerializer(client, '"bytes"')
    records = [
        {
            "key": serializer(v[::-1], contexts["key"]),
            "value": serializer(v, contexts["value"]),
            "partition": 0,
        }
        for v in values
    ]
    schema_id = int.from_bytes(records[0]["value"][1:5], "big")
    header = b"\x00" + schema_id.to_bytes(4, "big")
    assert [r["value"] for r in records] == [header + v for v in values]  # raw, no length
    produce_confluent(broker.bootstrap_servers, source, records)
    registry = {"schema.registry.url": apicurio_registry.url}
    typed = {"keyFormat": "avro", "valueFormat": "avro", **registry}
    expected = sorted((v[::-1], v) for v in values)

    df = read(spark, broker, source, **typed)
    assert df.schema["value"].dataType.simpleString() == "binary"
    assert sorted((bytes(r.key), bytes(r.value)) for r in df.collect()) == expected
    (
        df.select("key", "value")
        .write.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", batch_sink)
        .options(**typed)
        .mode("append")
        .save()
    )

    query = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .options(**typed)
        .load()
        .select("key", "value")
        .writeStream.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", stream_sink)
        .options(**typed)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120), "the availableNow query did not finish"
        assert query.exception() is None
    finally:
        query.stop()
    deserializer = AvroDeserializer(client)
    for sink in (batch_sink, stream_sink):
        written = consume_raw(broker.bootstrap_servers, sink, len(values))
        ids = [client.get_latest_version(f"{sink}-{f}").schema_id for f in ("key", "value")]
        # the sink subjects' ids, then byte for byte what the AvroSerializer wrote
        assert {(k[:5], v[:5]) for _, _, k, v in written} == {
            tuple(b"\x00" + i.to_bytes(4, "big") for i in ids)
        }
        assert sorted((k[5:], v[5:]) for _, _, k, v in written) == expected
        ctx = SerializationContext(sink, MessageField.VALUE)
        # confluent-kafka's AvroDeserializer refuses the 5-byte record of b"" (see
        # docs/typed-values.md), its own serializer's as well
        assert sorted(deserializer(v, ctx) for _, _, _, v in written if len(v) > 5) == sorted(
            v for v in values if v
        )

    raw = read(spark, broker, source)
    decoded = raw.select(
        from_registry("value", "avro", subject=f"{source}-value", **registry).alias("bytes")
    )
    assert sorted(bytes(r.bytes) for r in decoded.collect()) == sorted(values)
    encoded = decoded.select(
        to_registry("bytes", "avro", subject=f"{source}-value", **registry).alias("value")
    )
    assert sorted(bytes(r.value) for r in encoded.collect()) == sorted(r["value"] for r in records)


# --- Protobuf --------------------------------------------------------------------------------


def test_protobuf_read_as_confluent_reads_and_written_as_confluent_writes(
    spark, broker, new_topic, apicurio_registry
):
    from confluent_kafka.schema_registry.protobuf import (
        ProtobufDeserializer,
        ProtobufSerializer,
    )

    from tests.integration.test_schema_registry import order_message_class

    topic = new_topic(partitions=1)
    order_class = order_message_class()
    client = confluent_registry(apicurio_registry)
    ctx = SerializationContext(topic, MessageField.VALUE)
    conf = {"use.deprecated.format": False}
    serializer = ProtobufSerializer(order_class, client, conf)
    orders = []
    for i in range(6):
        order = order_class(id=f"o-{i}", status=i % 2)
        order.created.FromSeconds(1_700_000_000 + i)
        for j in range(i % 3):
            order.items.add(sku=f"s{j}", qty=j + i)
        orders.append(order)
    produce_confluent(
        broker.bootstrap_servers,
        topic,
        [{"value": serializer(o, ctx), "partition": 0} for o in orders],
    )
    df = read(
        spark,
        broker,
        topic,
        valueFormat="protobuf",
        **{"schema.registry.url": apicurio_registry.url},
    )
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:string,created:timestamp,items:array<struct<sku:string,qty:int>>,status:string>"
    )
    utc = dt.timezone.utc
    expected = [
        (
            o.id,
            o.created.ToDatetime(tzinfo=utc),
            [(it.sku, it.qty) for it in o.items],
            ["NEW", "SHIPPED"][o.status],
        )
        for o in orders
    ]
    got = df.select("value.*")
    assert_df_equality(got, spark.createDataFrame(expected, got.schema), ignore_row_order=True)

    # kafka_ds writes the same rows with the subject's schema; confluent reads them back.
    out = new_topic(partitions=1)
    client.register_schema(f"{out}-value", client.get_latest_version(f"{topic}-value").schema)
    (
        got.selectExpr("struct(*) AS value")
        .write.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", out)
        .option("valueFormat", "protobuf")
        .option("schema.registry.url", apicurio_registry.url)
        .option("schema.registry.auto.register.schemas", "false")
        .mode("append")
        .save()
    )
    deserializer = ProtobufDeserializer(order_class, conf, client)
    back = [
        deserializer(value, SerializationContext(out, MessageField.VALUE))
        for *_, value in consume_raw(broker.bootstrap_servers, out, len(orders))
    ]
    assert sorted(o.SerializeToString(deterministic=True) for o in back) == sorted(
        o.SerializeToString(deterministic=True) for o in orders
    )


def test_protobuf_write_of_the_second_message_is_checked_and_framed_for_it(
    spark, broker, new_topic, apicurio_registry
):
    # A schema file of two messages, A first: valueMessageName=B writes (and fit-checks)
    # B, framed with its message index, as confluent's serializer of B does
    from confluent_kafka.schema_registry.protobuf import (
        ProtobufDeserializer,
        ProtobufSerializer,
    )

    from tests.support.registry_fixtures import file_proto, message_classes

    classes = message_classes(
        file_proto("two_messages.proto", {"A": [("a", "int32")], "B": [("b", "string")]})
    )
    out = new_topic(partitions=1)
    client = confluent_registry(apicurio_registry)
    ctx = SerializationContext(out, MessageField.VALUE)
    conf = {"use.deprecated.format": False}
    expected = ProtobufSerializer(classes["test.B"], client, conf)(classes["test.B"](b="one"), ctx)
    (
        spark.createDataFrame([("one",), ("two",)], "b string")
        .selectExpr("struct(b) AS value")
        .write.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", out)
        .option("valueFormat", "protobuf")
        .option("valueMessageName", "B")
        .option("schema.registry.url", apicurio_registry.url)
        .option("schema.registry.auto.register.schemas", "false")
        .mode("append")
        .save()
    )
    written = sorted(value for *_, value in consume_raw(broker.bootstrap_servers, out, 2))
    assert written[0] == expected
    deserializer = ProtobufDeserializer(classes["test.B"], conf, client)
    assert sorted(deserializer(v, ctx).b for v in written) == ["one", "two"]


# --- JSON ------------------------------------------------------------------------------------

EVENT_SCHEMA = json.dumps(
    {
        "type": "object",
        "title": "Event",
        "properties": {
            "id": {"type": "integer"},
            "kind": {"type": "string"},
            "score": {"type": ["null", "number"]},
            "at": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["id"],
    }
)


def test_json_read_as_confluent_reads_and_written_as_confluent_writes(
    spark, broker, new_topic, apicurio_registry
):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    topic = new_topic(partitions=1)
    client = confluent_registry(apicurio_registry)
    ctx = SerializationContext(topic, MessageField.VALUE)
    serializer = JSONSerializer(EVENT_SCHEMA, client)
    events = [
        {
            "id": i,
            "kind": f"k{i % 2}",
            "score": None if i == 3 else i / 2,
            "at": f"2026-11-0{1 + i % 5}T10:00:0{i % 10}+00:00",
            "tags": ["a"] * (i % 3),
        }
        for i in range(8)
    ]
    produce_confluent(
        broker.bootstrap_servers,
        topic,
        [{"value": serializer(e, ctx), "partition": 0} for e in events],
    )
    df = read(
        spark, broker, topic, valueFormat="json", **{"schema.registry.url": apicurio_registry.url}
    )
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,kind:string,score:double,at:timestamp,tags:array<string>>"
    )
    deserializer = JSONDeserializer(EVENT_SCHEMA, schema_registry_client=client)
    expected = []
    for event in events:
        back = deserializer(serializer(event, ctx), ctx)
        expected.append(
            (
                back["id"],
                back["kind"],
                back["score"],
                dt.datetime.fromisoformat(back["at"]),
                back["tags"],
            )
        )
    got = df.select("value.*")
    assert_df_equality(got, spark.createDataFrame(expected, got.schema), ignore_row_order=True)

    # Written by kafka_ds with a schema it derives and registers; read back by confluent.
    out = new_topic(partitions=1)
    (
        got.selectExpr("struct(id, kind, score, tags) AS value")
        .write.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", out)
        .option("valueFormat", "json")
        .option("schema.registry.url", apicurio_registry.url)
        .mode("append")
        .save()
    )
    registered = client.get_latest_version(f"{out}-value").schema
    assert registered.schema_type == "JSON"
    reader = JSONDeserializer(registered.schema_str, schema_registry_client=client)
    back = sorted(
        (
            reader(value, SerializationContext(out, MessageField.VALUE))
            for *_, value in consume_raw(broker.bootstrap_servers, out, len(events))
        ),
        key=lambda e: e["id"],
    )
    assert back == [{k: e[k] for k in ("id", "kind", "score", "tags")} for e in events]


# --- bad records -----------------------------------------------------------------------------


def test_every_bad_record_reason_fails_fast_or_reads_as_null(
    spark, broker, new_topic, apicurio_registry
):
    topic = new_topic(partitions=1)
    client = confluent_registry(apicurio_registry)
    ctx = SerializationContext(topic, MessageField.VALUE)
    good = AvroSerializer(client, USER_V1)({"id": 1, "name": "a"}, ctx)
    # a writer schema the reader schema (the subject's latest, USER_V1) cannot resolve
    other = SerializationContext(topic + "-other", MessageField.VALUE)
    unresolvable = AvroSerializer(client, avro_record({"name": "id", "type": "string"}))(
        {"id": "x"}, other
    )
    values = [good, b"plain text", b"\x00\x00\x0f\x42\x3f" + good[5:], good[:-2], unresolvable]
    produce_confluent(
        broker.bootstrap_servers, topic, [{"value": v, "partition": 0} for v in values]
    )
    options = {
        "valueFormat": "avro",
        "schema.registry.url": apicurio_registry.url,
        "valueSubject": f"{topic}-value",
    }
    reasons = ["not framed", "unknown schema id 999999", "truncated", "cannot be resolved"]
    for offset, reason in enumerate(reasons, start=1):
        df = read(
            spark,
            broker,
            topic,
            startingOffsets=json.dumps({topic: {"0": offset}}),
            endingOffsets=json.dumps({topic: {"0": offset + 1}}),
            **options,
        )
        with pytest.raises(Exception) as caught:
            df.collect()
        message = str(caught.value)
        assert f"Cannot decode the value of {topic}-0 at offset {offset} as avro" in message, (
            message[-2000:]
        )
        assert reason in message, (reason, message[-2000:])

    permissive = read(spark, broker, topic, mode="PERMISSIVE", **options).orderBy("offset")
    rows = permissive.select("offset", "value", "valueError").collect()
    assert rows[0].value.asDict() == {"id": 1, "name": "a"} and rows[0].valueError is None
    for row, reason, raw in zip(rows[1:], reasons, values[1:], strict=True):
        assert row.value is None
        assert reason in row.valueError.reason, (reason, row.valueError.reason)
        assert bytes(row.valueError.raw) == raw
    assert rows[2].valueError.schemaId == 999999 and rows[1].valueError.schemaId is None


# --- column functions ------------------------------------------------------------------------


def test_from_registry_and_to_registry_on_a_plain_kafka_read(
    spark, broker, new_topic, apicurio_registry
):
    from kafka_ds.functions import from_registry, to_registry

    topic = new_topic(partitions=1)
    client = confluent_registry(apicurio_registry)
    ctx = SerializationContext(topic, MessageField.VALUE)
    serializer = AvroSerializer(client, USER_V1)
    produce_confluent(
        broker.bootstrap_servers,
        topic,
        [{"value": serializer({"id": i, "name": f"n{i}"}, ctx), "partition": 0} for i in range(8)],
    )
    raw = read(spark, broker, topic)
    decoded = raw.select(
        from_registry(
            "value", "avro", subject=f"{topic}-value", schema_registry_url=apicurio_registry.url
        ).alias("user")
    )
    assert decoded.schema.simpleString() == "struct<user:struct<id:bigint,name:string>>"
    assert sorted(r.user.id for r in decoded.collect()) == list(range(8))
    encoded = decoded.select(
        to_registry(
            "user",
            "avro",
            subject=f"{topic}-value",
            **{"schema.registry.url": apicurio_registry.url},
        ).alias("value")
    )
    deserializer = AvroDeserializer(client)
    assert sorted(deserializer(bytes(r.value), ctx)["name"] for r in encoded.collect()) == sorted(
        f"n{i}" for i in range(8)
    )
    with pytest.raises(ConfigurationError, match="name the schema with subject"):
        from_registry("value", "avro", schema_registry_url=apicurio_registry.url)


# --- streaming -------------------------------------------------------------------------------


@pytest.mark.heavy
def test_stream_decodes_a_new_writer_version_after_the_registry_was_down_20s(
    spark, kafka_broker, tmp_path
):
    """The reader schema is fixed when the query starts; a writer version first seen while
    the registry is down is fetched once it is back (the look-up's retry budget, 60 s by
    default, outlasts the outage), and no record is lost or skipped."""
    import threading
    import time

    from tests.support.schema_registry import start_registry

    registry = start_registry()
    try:
        topic = kafka_broker.unique_topic("typedstream")
        kafka_broker.create_topic(topic, partitions=1)
        client = confluent_registry(registry)
        ctx = SerializationContext(topic, MessageField.VALUE)
        v1 = AvroSerializer(client, USER_V1)
        produce_confluent(
            kafka_broker.bootstrap_servers,
            topic,
            [{"value": v1({"id": i, "name": "a"}, ctx), "partition": 0} for i in range(5)],
        )
        name = "typed_" + uuid.uuid4().hex[:8]
        query = (
            spark.readStream.format("pykafka")
            .option("kafka.bootstrap.servers", kafka_broker.bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("valueFormat", "avro")
            .option("schema.registry.url", registry.url)
            .load()
            .select("offset", "value.id", "value.name")
            .writeStream.format("memory")
            .queryName(name)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .start()
        )
        try:
            query.processAllAvailable()
            # a second writer version, registered while the registry is up ...
            v2 = AvroSerializer(client, USER_V2)
            later = [v2({"id": 10 + i, "name": "b", "score": 1.0}, ctx) for i in range(5)]
            fetched_before = schema_fetches(registry)
            # ... and first needed by the query while it is down for 20 s
            registry.stop()
            threading.Timer(20.0, registry.start).start()
            produce_confluent(
                kafka_broker.bootstrap_servers, topic, [{"value": v, "partition": 0} for v in later]
            )
            started = time.monotonic()
            query.processAllAvailable()
            waited = time.monotonic() - started
            assert query.exception() is None
            rows = sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {name}").collect())
            assert rows == [(i, i, "a") for i in range(5)] + [
                (5 + i, 10 + i, "b") for i in range(5)
            ]
            assert waited >= 15, waited  # the batch did wait for the registry
            assert schema_fetches(registry) > fetched_before
        finally:
            query.stop()
    finally:
        registry.stop()


# --- registry credentials ----------------------------------------------------------------------


def test_registry_credentials_are_used_and_never_shown(spark, mock_cluster, tmp_path):
    from tests.support.schema_registry import start_registry

    registry = start_registry(basic_auth="reader:s3cret-pw")
    try:
        topic = mock_cluster.unique_topic("typedauth")
        mock_cluster.create_topic(topic, partitions=1)
        client = SchemaRegistryClient(
            {"url": registry.url, "basic.auth.user.info": "reader:s3cret-pw"}
        )
        ctx = SerializationContext(topic, MessageField.VALUE)
        produce_confluent(
            mock_cluster.bootstrap_servers,
            topic,
            [
                {
                    "value": AvroSerializer(client, USER_V1)({"id": 7, "name": "x"}, ctx),
                    "partition": 0,
                }
            ],
        )

        def load(user_info):
            return (
                spark.read.format("pykafka")
                .option("kafka.bootstrap.servers", mock_cluster.bootstrap_servers)
                .option("subscribe", topic)
                .option("valueFormat", "avro")
                .option("schema.registry.url", registry.url)
                .option("schema.registry.basic.auth.user.info", user_info)
                .load()
            )

        df = load("reader:s3cret-pw")
        assert [tuple(r) for r in df.select("value.*").collect()] == [(7, "x")]
        plan = df._jdf.queryExecution().toString()
        assert "s3cret-pw" not in plan
        with pytest.raises(Exception) as caught:
            load("reader:wrong-pw")
        message = str(caught.value)
        assert registry.url in message and "401" in message, message[-1500:]
        assert "wrong-pw" not in message
    finally:
        registry.stop()
