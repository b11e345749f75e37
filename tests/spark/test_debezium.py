"""``valueFormat=debezium-json`` on real change events: a PostgreSQL table's inserts,
updates (one leaving a TOASTed column unchanged), a delete, a truncate and a column added
mid-stream, captured by Debezium 3.6 in Kafka Connect (tests/support/debezium.py) with the
JSON converter's schemas and without, read by kafka_ds and compared with PostgreSQL's own
rows (psycopg) with chispa."""

import json
from decimal import Decimal

import pytest
from chispa import assert_df_equality
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.apicurio import apicurio_registry  # noqa: F401  (fixture)
from tests.support.brokers import produce_confluent
from tests.support.debezium import avro_schema, avro_value, change_data, read_topic  # noqa: F401
from tests.support.spark_support import spark  # noqa: F401  (fixture)

TABLE = "cdc_items"
COLUMNS = "id, amount, ratio, at, atz, day, uid::text, doc::text, big, tags, nums"
BIG = "repeat('toast', 2000)"  # 10,000 bytes stored out of line (storage external)
# what each record of the script below is: c c c u d (tombstone) t c c c u
OPS = ["c", "c", "c", "u", "d", "t", "c", "c", "c", "u"]
RECORDS = len(OPS) + 1  # and the delete's tombstone
# the rows without schemas: the table's columns as a DDL (bare numeric: {scale, value})
DDL = (
    "id INT, amount DECIMAL(10,2), ratio STRUCT<scale: INT, value: BINARY>, "
    "at TIMESTAMP_NTZ, atz TIMESTAMP, day DATE, uid STRING, doc STRING, big STRING, "
    "tags ARRAY<STRING>, nums ARRAY<INT>, note STRING"
)


@pytest.fixture(scope="module")
def events(change_data, kafka_broker):  # noqa: F811
    """Both topics written, with PostgreSQL's rows after the inserts and at the end."""
    change_data.execute(
        f"CREATE TABLE {TABLE} (id int PRIMARY KEY, amount numeric(10,2), ratio numeric, "
        "at timestamp, atz timestamptz, day date, uid uuid, doc jsonb, big text, "
        "tags text[], nums int[])",
        f"ALTER TABLE {TABLE} ALTER COLUMN big SET STORAGE EXTERNAL",
    )
    with_schemas = change_data.capture(TABLE, schemas=True)
    without = change_data.capture(TABLE, schemas=False)
    change_data.execute(
        f"INSERT INTO {TABLE} VALUES "
        "(1, 12.34, 3.14159, '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05.5+02', "
        f"'2024-02-29', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{{\"a\": [1, 2]}}', {BIG}, "
        "'{a,b}', '{1,2,3}'), "
        "(2, -99999999.99, -0.000001, '1969-12-31 23:59:59.999999', "
        "'1900-01-01 00:00:00+00', '0001-01-01', '00000000-0000-0000-0000-000000000000', "
        "'[]', 'short', '{}', '{-2147483648,NULL}'), "
        "(3, NULL, 123456789012345678.123456789012345678, NULL, NULL, NULL, NULL, NULL, "
        "NULL, NULL, NULL)"
    )
    inserted = change_data.query(f"SELECT {COLUMNS} FROM {TABLE} ORDER BY id")
    change_data.execute(
        f"UPDATE {TABLE} SET amount = 0.01 WHERE id = 1",  # big unchanged: TOASTed, not sent
        f"DELETE FROM {TABLE} WHERE id = 2",
        f"TRUNCATE {TABLE}",
        f"INSERT INTO {TABLE} (id, amount, tags) VALUES (4, 4.00, '{{x}}')",
        f"INSERT INTO {TABLE} (id, ratio) VALUES (5, 5)",
        f"ALTER TABLE {TABLE} ADD COLUMN note text",
        f"INSERT INTO {TABLE} (id, note) VALUES (6, 'added')",
        f"UPDATE {TABLE} SET note = 'four' WHERE id = 4",
    )
    final = change_data.query(f"SELECT {COLUMNS}, note FROM {TABLE} ORDER BY id")
    for topic in (with_schemas, without):
        read_topic(kafka_broker.bootstrap_servers, topic, RECORDS)
    return {"schemas": with_schemas, "plain": without, "inserted": inserted, "final": final}


def read(spark, broker, topic, **options):  # noqa: F811
    reader = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("valueFormat", "debezium-json")
    )
    for name, value in options.items():
        reader = reader.option(name.replace("_", "."), value)
    return reader.load()


def test_typed_changes_equal_postgres_rows(spark, kafka_broker, events):  # noqa: F811
    df = read(spark, kafka_broker, events["schemas"], keyFormat="debezium-json").orderBy("offset")
    rows = df.select("key.id", "value.op", "offset").collect()
    assert [r.op for r in rows] == OPS  # the tombstone after the delete reads as no row
    assert [r.id for r in rows] == [1, 2, 3, 1, 2, None, 4, 5, 6, 4]
    after = df.schema["value"].dataType["after"].dataType
    assert after.simpleString() == (
        "struct<id:int,amount:decimal(10,2),ratio:decimal(38,18),at:timestamp_ntz,"
        "atz:timestamp,day:date,uid:string,doc:string,big:string,tags:array<string>,"
        "nums:array<int>,note:string>"
    )
    inserted = df.where("value.op = 'c' AND key.id <= 3").select("value.after.*").drop("note")
    expected = spark.createDataFrame(events["inserted"], inserted.schema)
    assert_df_equality(inserted, expected, ignore_row_order=True)
    # the last change of each key still in the table (after the truncate) is its row in
    # PostgreSQL
    last = {r.id: r.offset for r in rows if r.op in ("c", "u") and r.offset > 5}
    final = df.where(df["offset"].isin(list(last.values()))).select("value.after.*")
    assert_df_equality(
        final, spark.createDataFrame(events["final"], final.schema), ignore_row_order=True
    )


def test_an_update_leaving_a_toasted_column_reads_it_as_null_and_names_it(
    spark,  # noqa: F811
    kafka_broker,
    events,
):
    df = read(spark, kafka_broker, events["schemas"])
    update = df.where("value.op = 'u' AND value.after.id = 1").select("value.*").first()
    assert update.after.amount == Decimal("0.01")
    assert update.after.big is None and update.unavailable == ["big"]
    assert update.source.table == TABLE and update.source.lsn > 0
    inserts = df.where("value.op = 'c'").select("value.unavailable").collect()
    assert all(r.unavailable == [] for r in inserts)


def test_without_schemas_the_ddl_reads_what_the_schemas_read(
    spark,  # noqa: F811
    kafka_broker,
    events,
):
    typed = read(spark, kafka_broker, events["schemas"]).select("offset", "value.*")
    plain = read(
        spark,
        kafka_broker,
        events["plain"],
        valueSchema=DDL,
        keyFormat="debezium-json",
        keySchema="id INT",
    ).select("offset", "key.id", "value.*")
    assert [r.op for r in plain.orderBy("offset").collect()] == OPS
    columns = [
        "op",
        "after.id",
        "after.amount",
        "after.at",
        "after.atz",
        "after.day",
        "after.uid",
        "after.doc",
        "after.big",
        "after.tags",
        "after.nums",
        "after.note",
        "unavailable",
    ]
    assert_df_equality(
        plain.select(*columns),
        typed.select(*columns),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    # a bare numeric without a schema is its {scale, value}: the same number
    ratios = {
        r.id: r.ratio for r in plain.where("op = 'c'").select("after.id", "after.ratio").collect()
    }
    assert int.from_bytes(ratios[1].value, "big", signed=True) == 314159
    assert ratios[1].scale == 5


def test_flat_form_and_kept_tombstones(spark, kafka_broker, events):  # noqa: F811
    flat = read(
        spark, kafka_broker, events["schemas"], debezium_flatten="true", debezium_tombstones="keep"
    ).orderBy("offset")
    rows = flat.select("value.*").collect()
    assert [r and r["__op"] for r in rows] == OPS[:5] + [None] + OPS[5:]
    assert rows[4]["id"] == 2 and rows[4]["__op"] == "d"  # a delete: before's columns
    assert rows[3]["__unavailable"] == ["big"]
    assert flat.schema["value"].dataType.names[-3:] == ["note", "__op", "__unavailable"]


def test_a_stream_reads_the_same_changes(spark, kafka_broker, events, tmp_path):  # noqa: F811
    stream = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap_servers)
        .option("subscribe", events["schemas"])
        .option("startingOffsets", "earliest")
        .option("valueFormat", "debezium-json")
        .option("debezium.flatten", "true")
        .option("maxOffsetsPerTrigger", 4)
        .load()
        .selectExpr("offset", "value.*")
    )
    query = (
        stream.writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    streamed = spark.read.parquet(str(tmp_path / "out"))
    batch = read(spark, kafka_broker, events["schemas"], debezium_flatten="true").selectExpr(
        "offset", "value.*"
    )
    assert_df_equality(streamed, batch, ignore_row_order=True, ignore_nullable=True)


def test_avro_change_events_read_as_the_json_ones(
    spark,  # noqa: F811
    kafka_broker,
    events,
    apicurio_registry,  # noqa: F811
    new_topic,
):
    """The events in Avro, keys and values, as Connect's AvroConverter writes them
    (AvroData's schema, framed for the registry by confluent-kafka's AvroSerializer; two
    writer schemas, the second with the added column), read with debezium-avro: the same
    rows as debezium-json's."""
    client = SchemaRegistryClient({"url": apicurio_registry.url, "timeout": 30})
    topic = new_topic()
    serializers: dict = {}
    records = []
    key_serializer = None
    for _, key, value in read_topic(kafka_broker.bootstrap_servers, events["schemas"], RECORDS):
        if key is not None:  # the key as Connect's AvroConverter writes it too
            key_document = json.loads(key)
            if key_serializer is None:
                key_serializer = AvroSerializer(
                    client, json.dumps(avro_schema(key_document["schema"]))
                )
            key = key_serializer(
                avro_value(key_document["schema"], key_document["payload"]),
                SerializationContext(topic, MessageField.KEY),
            )
        if value is None:
            records.append({"key": key, "value": None})
            continue
        document = json.loads(value)
        text = json.dumps(avro_schema(document["schema"]))
        if text not in serializers:
            serializers[text] = AvroSerializer(client, text)
        encoded = serializers[text](
            avro_value(document["schema"], document["payload"]),
            SerializationContext(topic, MessageField.VALUE),
        )
        records.append({"key": key, "value": encoded})
    assert len(serializers) == 2  # before and after the column was added
    produce_confluent(kafka_broker.bootstrap_servers, topic, records)
    avro = read(
        spark,
        kafka_broker,
        topic,
        valueFormat="debezium-avro",
        keyFormat="debezium-avro",
        schema_registry_url=apicurio_registry.url,
    ).select("offset", "key", "value")
    typed = read(spark, kafka_broker, events["schemas"], keyFormat="debezium-json").select(
        "offset", "key", "value"
    )
    assert_df_equality(avro, typed, ignore_row_order=True, ignore_nullable=True)
    flat = read(
        spark,
        kafka_broker,
        topic,
        valueFormat="debezium-avro",
        schema_registry_url=apicurio_registry.url,
        debezium_flatten="true",
    )
    assert [r["__op"] for r in flat.orderBy("offset").select("value.*").collect()] == OPS


def test_a_corrupt_change_names_topic_partition_and_offset(
    spark,  # noqa: F811
    kafka_broker,
    events,
    new_topic,
):
    good = read_topic(kafka_broker.bootstrap_servers, events["schemas"], 1)[0][2]
    topic = new_topic()
    produce_confluent(
        kafka_broker.bootstrap_servers, topic, [b'{"schema": {}, "payload": {"op": 5', good]
    )  # the type comes from the newest record, the good one
    with pytest.raises(Exception, match=rf"{topic}-0 at offset 0 as debezium-json"):
        read(spark, kafka_broker, topic).collect()
    permissive = read(spark, kafka_broker, topic, mode="PERMISSIVE").orderBy("offset").collect()
    assert permissive[0].value is None and permissive[1].value.op == "c"
    assert "not a change event" in permissive[0].valueError.reason


def test_wrong_options_fail_at_planning(spark, kafka_broker, events, new_topic):  # noqa: F811
    with pytest.raises(Exception, match="carries no schema.*'valueSchema'"):
        read(spark, kafka_broker, events["plain"]).schema  # noqa: B018
    with pytest.raises(Exception, match="has no such record yet.*'valueSchema'"):
        read(spark, kafka_broker, new_topic()).schema  # noqa: B018
    with pytest.raises(Exception, match="is not a DDL of the table's columns"):
        read(spark, kafka_broker, events["plain"], valueSchema="id INT,, x").schema  # noqa: B018
