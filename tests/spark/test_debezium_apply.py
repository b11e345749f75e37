"""Changes applied in one call (kafka_ds.functions.apply_changes, last_changes,
latest_values): a PostgreSQL table carried into a Parquet table by a stream of Debezium's
change events, one snapshot per micro-batch, compared with PostgreSQL's own rows (chispa)
after the stream caught up, and again after the query was restarted with more changes (a
column added, a truncate, TOASTed values an update left unchanged)."""

import os

from chispa import assert_df_equality
from pyspark.sql import functions as F

from kafka_ds.functions import apply_changes, last_changes, latest_values
from tests.support.debezium import change_data, read_topic  # noqa: F401  (fixture)
from tests.support.spark_support import spark  # noqa: F401  (fixture)

TABLE = "cdc_orders"
BIG = "repeat('toast', 2000)"  # stored out of line (storage external): an update leaves it


def snapshots(root):
    return sorted(
        (int(name.split("-")[1]), os.path.join(root, name))
        for name in os.listdir(root)
        if name.startswith("snap-") and os.path.exists(os.path.join(root, name, "_SUCCESS"))
    )


def carry(spark, broker, topic, root):  # noqa: F811
    """One run of the query to its end (availableNow), 6 records a micro-batch, each
    batch's changes applied to the snapshot before it."""

    def apply(batch, batch_id):
        earlier = [path for number, path in snapshots(root) if number < batch_id]
        table = spark.read.parquet(earlier[-1]) if earlier else None
        apply_changes(table, batch, "id").write.mode("overwrite").parquet(
            os.path.join(root, f"snap-{batch_id}")
        )

    changes = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("valueFormat", "debezium-json")
        .option("debezium.flatten", "true")
        .option("maxOffsetsPerTrigger", 6)
        .load()
        .select("offset", "value.*")
    )
    query = (
        changes.writeStream.foreachBatch(apply)
        .option("checkpointLocation", os.path.join(root, "_checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "the availableNow query did not finish"
    assert query.exception() is None
    return spark.read.parquet(snapshots(root)[-1][1])


def postgres_rows(spark, change_data, table):  # noqa: F811
    columns = ", ".join(table.columns)
    rows = change_data.query(f"SELECT {columns} FROM {TABLE} ORDER BY id")
    return spark.createDataFrame(rows, table.schema)


def test_a_stream_carries_a_table_into_parquet_across_a_restart(
    spark,  # noqa: F811
    change_data,  # noqa: F811
    kafka_broker,
    tmp_path,
):
    change_data.execute(
        f"CREATE TABLE {TABLE} (id int PRIMARY KEY, name text, amount numeric(10,2), big text)",
        f"ALTER TABLE {TABLE} ALTER COLUMN big SET STORAGE EXTERNAL",
    )
    topic = change_data.capture(TABLE)
    change_data.execute(
        f"INSERT INTO {TABLE} VALUES (1, 'one', 1.00, {BIG}), (2, 'two', 2.00, NULL), "
        "(3, 'three', 3.00, 'x'), (4, 'four', 4.00, NULL)",
        f"UPDATE {TABLE} SET name = 'zwei' WHERE id = 2",
        f"DELETE FROM {TABLE} WHERE id = 3",
        f"UPDATE {TABLE} SET amount = 1.50 WHERE id = 1",  # big TOASTed, not sent
    )
    read_topic(kafka_broker.bootstrap_servers, topic, 8)  # c c c c u d (tombstone) u
    root = str(tmp_path)
    table = carry(spark, kafka_broker, topic, root)
    assert_df_equality(table, postgres_rows(spark, change_data, table), ignore_row_order=True)

    # the topic as a table: each key's latest value, the deleted key's tombstone left out
    records = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("keyFormat", "debezium-json")
        .option("valueFormat", "debezium-json")
        .option("debezium.tombstones", "keep")
        .load()
    )
    latest = latest_values(records).select("key.id", "value.op")
    assert sorted(latest.collect()) == [(1, "u"), (2, "u"), (4, "c")]

    # more changes while the query is stopped: a column added, a truncate, a TOASTed value
    change_data.execute(
        f"ALTER TABLE {TABLE} ADD COLUMN note text",
        f"INSERT INTO {TABLE} (id, name, note) VALUES (5, 'five', 'added')",
        f"UPDATE {TABLE} SET note = 'noted' WHERE id = 4",
        f"TRUNCATE {TABLE}",
        f"INSERT INTO {TABLE} VALUES (6, 'six', 6.00, {BIG}, 'n6'), (7, 'seven', 7.00, NULL, NULL)",
        f"UPDATE {TABLE} SET amount = 6.50 WHERE id = 6",
        f"DELETE FROM {TABLE} WHERE id = 7",
        f"INSERT INTO {TABLE} (id, name) VALUES (8, 'eight')",
    )
    read_topic(kafka_broker.bootstrap_servers, topic, 17)
    table = carry(spark, kafka_broker, topic, root)  # the same checkpoint: goes on
    assert table.columns == ["id", "name", "amount", "big", "note"]
    assert_df_equality(table, postgres_rows(spark, change_data, table), ignore_row_order=True)


def test_last_changes_keeps_each_key_s_last_change_deletes_included(spark):  # noqa: F811
    changes = spark.createDataFrame(
        [
            (0, 1, "a", "c", []),
            (1, 2, "b", "c", []),
            (2, 1, "a2", "u", []),
            (3, 2, "b", "d", []),
            (4, 3, "c", "c", []),
            (5, None, None, "t", []),
            (6, 3, "c2", "c", []),
            (7, 4, "d", "c", []),
            (8, 4, None, "u", ["name"]),
        ],
        "offset long, id int, name string, __op string, __unavailable array<string>",
    )
    last = last_changes(changes, "id").select("id", "name", "__op", "__unavailable", "offset")
    # nothing before the truncate at offset 5 counts; key 4's update left its name
    # unavailable, and its insert before it in the batch had it
    assert sorted(last.collect()) == [(3, "c2", "c", [], 6), (4, "d", "u", [], 8)]
    table = spark.createDataFrame([(4, "stored"), (9, "kept")], "id int, name string")
    # the update alone: its name is the table's
    alone = last_changes(changes.where("offset = 8"), "id").select("name", "__unavailable")
    assert alone.collect() == [(None, ["name"])]
    after = apply_changes(table, changes.where("offset = 8"), "id")
    assert sorted(after.collect()) == [(4, "stored"), (9, "kept")]
    emptied = apply_changes(table, changes, "id").orderBy("id")
    assert emptied.collect() == [(3, "c2"), (4, "d")]
    assert emptied.where(F.col("id") == 9).count() == 0
