"""valueFormat/keyFormat without a registry in Spark: ``string``, and FAILFAST versus
PERMISSIVE on invalid UTF-8 (the option checks: tests/unit/test_typed_columns.py; the
schema formats: tests/spark/test_typed_registry.py)."""

import pytest
from chispa import assert_df_equality

from tests.support.brokers import produce_confluent
from tests.support.spark_support import spark  # noqa: F401  (fixture)


def _rows(spark, bootstrap, topic, **options):
    reader = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_string_format_reads_text_and_names_the_offset_of_invalid_utf8(spark, broker, new_topic):
    topic = new_topic(partitions=1)
    records = [
        {"key": "k\u00e9", "value": "caf\u00e9"},
        {"key": None, "value": None},
        {"key": "k2", "value": b"\xff\xfe"},
        {"key": "k3", "value": "ok"},
    ]
    produce_confluent(broker.bootstrap_servers, topic, records, partition=0)
    df = _rows(spark, broker.bootstrap_servers, topic, keyFormat="string")
    assert df.schema.simpleString().startswith("struct<key:string,value:binary,")
    assert [r.key for r in df.orderBy("offset").collect()] == ["k\u00e9", None, "k2", "k3"]

    failing = _rows(spark, broker.bootstrap_servers, topic, valueFormat="string")
    with pytest.raises(Exception) as caught:
        failing.collect()
    text = str(caught.value)
    assert f"Cannot decode the value of {topic}-0 at offset 2 as string" in text, text[-2000:]
    assert "not UTF-8 text" in text

    permissive = _rows(
        spark, broker.bootstrap_servers, topic, valueFormat="string", mode="PERMISSIVE"
    )
    assert permissive.schema.simpleString().endswith(
        "valueError:struct<reason:string,schemaId:int,raw:binary>>"
    )
    got = permissive.selectExpr(
        "offset", "value", "valueError.raw AS raw", "valueError.reason IS NOT NULL AS failed"
    )
    expected = spark.createDataFrame(
        [
            (0, "caf\u00e9", None, False),
            (1, None, None, False),
            (2, None, b"\xff\xfe", True),
            (3, "ok", None, False),
        ],
        got.schema,
    )
    assert_df_equality(got, expected, ignore_row_order=True)
