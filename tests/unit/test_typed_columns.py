"""valueFormat/keyFormat without a registry: the option checks at planning (``string`` read
in Spark, FAILFAST versus PERMISSIVE on invalid UTF-8: tests/spark/test_typed_columns.py;
the schema formats: tests/spark/test_typed_registry.py)."""

import pytest

from kafka_ds.errors import ConfigurationError
from kafka_ds.options import parse_read_options

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            {"valueSubject": "s"},
            "Option 'valueSubject' has no effect while 'valueFormat' is 'binary'",
        ),
        (
            {"keyFormat": "string", "keySchema": "{}"},
            "Option 'keySchema' has no effect while 'keyFormat' is 'string'",
        ),
        ({"valueFormat": "avro"}, "needs a schema: set 'schema.registry.url'"),
        ({"valueFormat": "protobuf", "valueSchema": "x"}, "needs 'schema.registry.url'"),
        (
            {
                "valueFormat": "json",
                "valueSchema": "{}",
                "valueSubject": "s",
                "schema.registry.url": "http://127.0.0.1:9",
            },
            "both name the value schema",
        ),
        (
            {
                "valueFormat": "avro",
                "valueMessageName": "a.B",
                "schema.registry.url": "http://127.0.0.1:9",
            },
            "applies to valueFormat=protobuf only",
        ),
        ({"valueFormat": "avor"}, "did you mean 'avro'"),
        (
            {
                "valueFormat": "avro",
                "valueSchemaVersion": "0",
                "schema.registry.url": "http://127.0.0.1:9",
            },
            "a version number (1 or more)",
        ),
        ({"mode": "lenient"}, "Option 'mode' must be 'FAILFAST' or 'PERMISSIVE'"),
    ],
)
def test_typed_options_fail_at_planning_naming_the_option(extra, message):
    with pytest.raises(ConfigurationError, match=None) as caught:
        parse_read_options({**BASE, **extra}, streaming=False)
    assert message in str(caught.value)


def test_binary_columns_parse_to_no_typed_spec():
    assert parse_read_options(BASE, streaming=False).typed_spec is None
    spec = parse_read_options({**BASE, "keyFormat": "STRING"}, streaming=False).typed_spec
    assert (spec.key.format, spec.value.format, spec.mode) == ("string", "binary", "FAILFAST")
