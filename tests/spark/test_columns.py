"""One definition of the source/sink columns (kafka_ds/columns.py): the Arrow schema, the
Spark DDL, the simpleString of the custom-schema check and the sink's input check agree."""

from __future__ import annotations

import pyarrow as pa
import pytest

from kafka_ds import columns
from kafka_ds.columns import arrow_schema, spark_ddl
from kafka_ds.errors import ConfigurationError
from kafka_ds.options import parse_write_options
from kafka_ds.protocol.records_layout import HEADERS_TYPE, TIMESTAMP_TYPE, record_schema
from kafka_ds.source import _check_schema
from kafka_ds.write.plan import plan_columns
from tests.support.spark_support import spark  # noqa: F401  (fixture)

SPARK_KAFKA_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


@pytest.mark.parametrize("include_headers", [False, True])
def test_arrow_schema_ddl_and_simple_string_agree(spark, include_headers):  # noqa: F811
    from pyspark.sql.pandas.types import to_arrow_schema

    names = SPARK_KAFKA_COLUMNS + (["headers"] if include_headers else [])
    ddl = spark_ddl(include_headers)
    parsed = spark.createDataFrame([], ddl).schema  # what Spark makes of the DDL
    assert parsed.names == names
    assert parsed.simpleString() == columns.simple_string(include_headers)
    expected = arrow_schema(include_headers)
    assert expected.names == names
    # Spark's own Arrow mapping of the DDL is the schema the reader yields
    assert to_arrow_schema(parsed, timezone="UTC", prefers_large_types=False) == expected
    # the decoder fills the record's columns, with the same types
    assert record_schema(include_headers) == pa.schema(
        [f for f in expected if f.name not in ("topic", "partition")]
    )
    assert expected.field("timestamp").type == TIMESTAMP_TYPE
    if include_headers:
        assert expected.field("headers").type == HEADERS_TYPE


@pytest.mark.parametrize("include_headers", [False, True])
def test_custom_schema_check_accepts_exactly_the_source_schema(spark, include_headers):  # noqa: F811
    own = spark.createDataFrame([], spark_ddl(include_headers)).schema
    _check_schema(own, include_headers)
    _check_schema(None, include_headers)
    with pytest.raises(ConfigurationError, match="fixed schema"):
        _check_schema(own, not include_headers)
    other = spark.createDataFrame(
        [], spark_ddl(include_headers).replace("value binary", "value string")
    ).schema
    with pytest.raises(ConfigurationError, match="fixed schema"):
        _check_schema(other, include_headers)


@pytest.mark.parametrize("include_headers", [False, True])
def test_sink_accepts_what_the_source_produces(spark, include_headers):  # noqa: F811
    """A DataFrame read from Kafka can be written back as is (Spark's Kafka sink too):
    every sink column of the source schema is taken, offset/timestampType are ignored."""
    source = spark.createDataFrame([], spark_ddl(include_headers)).schema
    plan = plan_columns(source, parse_write_options({"kafka.bootstrap.servers": "h:1"}))
    assert (plan.key, plan.value, plan.topic, plan.partition, plan.timestamp) == (0, 1, 2, 3, 5)
    assert plan.headers == (7 if include_headers else -1)


def test_sink_types_from_the_definition(spark):  # noqa: F811
    opts = parse_write_options({"kafka.bootstrap.servers": "h:1"})

    def ddl(name, spark_type):
        fields = {"value": "binary", "topic": "string", name: spark_type}
        return ", ".join(f"{n} {t}" for n, t in fields.items())

    for column in columns.COLUMNS:
        if not column.sink_types:
            continue
        for spark_type in column.sink_types:
            plan = plan_columns(
                spark.createDataFrame([], ddl(column.name, spark_type)).schema, opts
            )
            assert getattr(plan, column.name) >= 0
        with pytest.raises(
            ConfigurationError,
            match=f"Column '{column.name}' must be {' or '.join(column.sink_types)}.*double",
        ):
            plan_columns(spark.createDataFrame([], ddl(column.name, "double")).schema, opts)
    # collated strings are strings
    collated = spark.createDataFrame([], "value string collate UTF8_LCASE, topic string").schema
    assert plan_columns(collated, opts).value == 0
    # offset and timestampType are not sink columns: ignored like any other column
    assert columns.sink_column("offset") is None and columns.sink_column("TIMESTAMPTYPE") is None
