"""valueFormat/keyFormat without a registry: ``string``, the option checks, and FAILFAST
versus PERMISSIVE on invalid UTF-8 (the schema formats: tests/spark/test_typed_registry.py)."""
import pytest
from chispa import assert_df_equality

from kafka_ds.options import parse_read_options
from kafka_ds.errors import ConfigurationError
from tests.support.brokers import produce_confluent
from tests.support.spark_support import spark  # noqa: F401  (fixture)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}


@pytest.mark.parametrize("extra, message", [
    ({"valueSubject": "s"}, "Option 'valueSubject' has no effect while 'valueFormat' is "
                            "'binary'"),
    ({"keyFormat": "string", "keySchema": "{}"}, "Option 'keySchema' has no effect while "
                                                 "'keyFormat' is 'string'"),
    ({"valueFormat": "avro"}, "needs a schema: set 'schema.registry.url'"),
    ({"valueFormat": "protobuf", "valueSchema": "x"}, "needs 'schema.registry.url'"),
    ({"valueFormat": "json", "valueSchema": "{}", "valueSubject": "s",
      "schema.registry.url": "http://127.0.0.1:9"}, "both name the value schema"),
    ({"valueFormat": "avro", "valueMessageName": "a.B",
      "schema.registry.url": "http://127.0.0.1:9"}, "applies to valueFormat=protobuf only"),
    ({"valueFormat": "avor"}, "did you mean 'avro'"),
    ({"valueFormat": "avro", "valueSchemaVersion": "0",
      "schema.registry.url": "http://127.0.0.1:9"}, "a version number (1 or more)"),
    ({"mode": "lenient"}, "Option 'mode' must be 'FAILFAST' or 'PERMISSIVE'"),
])
def test_typed_options_fail_at_planning_naming_the_option(extra, message):
    with pytest.raises(ConfigurationError, match=None) as caught:
        parse_read_options({**BASE, **extra}, streaming=False)
    assert message in str(caught.value)


def test_binary_columns_parse_to_no_typed_spec():
    assert parse_read_options(BASE, streaming=False).typed_spec is None
    spec = parse_read_options({**BASE, "keyFormat": "STRING"}, streaming=False).typed_spec
    assert (spec.key.format, spec.value.format, spec.mode) == ("string", "binary", "FAILFAST")


def _rows(spark, bootstrap, topic, **options):
    reader = (spark.read.format("pykafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_string_format_reads_text_and_names_the_offset_of_invalid_utf8(spark, broker,
                                                                          new_topic):
    topic = new_topic(partitions=1)
    records = [{"key": "k\u00e9", "value": "caf\u00e9"}, {"key": None, "value": None},
               {"key": "k2", "value": b"\xff\xfe"}, {"key": "k3", "value": "ok"}]
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

    permissive = _rows(spark, broker.bootstrap_servers, topic, valueFormat="string",
                       mode="PERMISSIVE")
    assert permissive.schema.simpleString().endswith(
        "valueError:struct<reason:string,schemaId:int,raw:binary>>")
    got = permissive.selectExpr("offset", "value", "valueError.raw AS raw",
                                "valueError.reason IS NOT NULL AS failed")
    expected = spark.createDataFrame(
        [(0, "caf\u00e9", None, False), (1, None, None, False), (2, None, b"\xff\xfe", True),
         (3, "ok", None, False)], got.schema)
    assert_df_equality(got, expected, ignore_row_order=True)
