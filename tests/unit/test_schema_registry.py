"""The fake Schema Registry's Avro compatibility check (tests/support/avro_compat.py) against
fastavro's own resolution, and kafka_ds's registry settings. The fake proven with
confluent-kafka's client, and kafka_ds's client against it:
tests/integration/test_schema_registry.py."""

import json
import pickle
import time

import fastavro
import pytest

from kafka_ds.errors import ConfigurationError
from kafka_ds.registry.client import SchemaRegistry
from kafka_ds.registry.settings import RegistrySettings
from tests.support import avro_compat


def record(name, *fields):
    return json.dumps(
        {"type": "record", "name": name, "namespace": "test", "fields": [dict(f) for f in fields]}
    )


USER_V1 = record("User", {"name": "id", "type": "long"}, {"name": "name", "type": "string"})
USER_V2 = record(
    "User",
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "email", "type": ["null", "string"], "default": None},
)
USER_NO_DEFAULT = record(
    "User",
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "age", "type": "int"},
)
USER_DROPS_NAME = record("User", {"name": "id", "type": "long"})


# --- the Avro resolution check, against fastavro's own resolution --------------------------------

RESOLUTION_CASES = [
    # (reader, writer, datum written, readable)
    ("long", "int", 5, True),
    ("double", "float", 1.5, True),
    ("int", "long", 5, False),
    ("bytes", "string", "x", True),
    ("string", "bytes", b"x", True),
    ("string", "int", 1, False),
    (USER_V2, USER_V1, {"id": 1, "name": "a"}, True),
    (USER_NO_DEFAULT, USER_V1, {"id": 1, "name": "a"}, False),
    (USER_DROPS_NAME, USER_V1, {"id": 1, "name": "a"}, True),
    (["null", "long"], "int", 3, True),
    ("long", ["null", "int"], 3, False),
    (["null", "string", "long"], ["int", "string"], "s", True),
    (
        {"type": "enum", "name": "E", "symbols": ["A", "B"]},
        {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]},
        "A",
        False,
    ),
    (
        {"type": "enum", "name": "E", "symbols": ["A", "B"], "default": "A"},
        {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]},
        "C",
        True,
    ),
    ({"type": "array", "items": "double"}, {"type": "array", "items": "int"}, [1, 2], True),
    ({"type": "map", "values": "int"}, {"type": "map", "values": "string"}, {"k": "v"}, False),
    (
        {"type": "fixed", "name": "F", "size": 4},
        {"type": "fixed", "name": "F", "size": 8},
        b"12345678",
        False,
    ),
    (record("Other", {"name": "id", "type": "long"}), USER_V1, {"id": 1, "name": "a"}, False),
    ({"type": "int", "logicalType": "date"}, "int", 3, True),
]


@pytest.mark.parametrize("reader, writer, datum, readable", RESOLUTION_CASES)
def test_avro_resolution_agrees_with_fastavro(reader, writer, datum, readable):
    def load(schema):
        return json.loads(schema) if isinstance(schema, str) and schema.startswith("{") else schema

    problems = avro_compat.incompatibilities(json.dumps(load(reader)), json.dumps(load(writer)))
    assert (not problems) == readable, problems
    import io

    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(load(writer)), datum)
    buffer.seek(0)
    try:
        fastavro.schemaless_reader(
            buffer, fastavro.parse_schema(load(writer)), fastavro.parse_schema(load(reader))
        )
        fastavro_reads = True
    except Exception:
        fastavro_reads = False
    if readable:
        assert fastavro_reads
    elif fastavro_reads:
        # fastavro resolves lazily (only the branch or symbol written); ours is the static
        # check, so only unions/enums may differ: the written value avoided the gap
        assert any(p.startswith(("MISSING_UNION_BRANCH", "MISSING_ENUM")) for p in problems)


def test_avro_resolution_recursive_and_referenced():
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}],
    }
    wider = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "v", "type": "long"}, {"name": "next", "type": ["null", "Node"]}],
    }
    assert avro_compat.incompatibilities(json.dumps(wider), json.dumps(node)) == []
    assert avro_compat.incompatibilities(json.dumps(node), json.dumps(wider))
    _, named = avro_compat.parse(json.dumps({"type": "fixed", "name": "test.Id", "size": 16}))
    holder = record("H", {"name": "id", "type": "test.Id"})
    assert avro_compat.incompatibilities(holder, holder, named, named) == []
    with pytest.raises(avro_compat.AvroSchemaError):
        avro_compat.parse(holder)


# --- kafka_ds's client settings -----------------------------------------------------------------


def test_settings_from_options_and_redaction():
    settings = RegistrySettings.from_options(
        {
            "schema.registry.url": "https://a:8081/, https://b:8081",
            "schema.registry.basic.auth.user.info": "key:s3cret",
            "schema.registry.ssl.ca.location": "/ca.pem",
            "schema.registry.ssl.certificate.location": "/c.pem",
            "schema.registry.ssl.key.location": "/c.key",
        }
    )
    assert settings.urls == ("https://a:8081", "https://b:8081")
    assert (
        settings.ssl_ca_location,
        settings.ssl_certificate_location,
        settings.ssl_key_location,
    ) == ("/ca.pem", "/c.pem", "/c.key")
    assert "s3cret" not in repr(settings) and "key:***" in repr(settings)
    assert "s3cret" not in repr(SchemaRegistry(settings))
    assert pickle.loads(pickle.dumps(settings)) == settings
    bearer = RegistrySettings.from_options(
        {"schema.registry.url": "http://r:1", "schema.registry.bearer.auth.token": "tok123"}
    )
    assert "tok123" not in repr(bearer) and bearer.bearer_auth_token == "tok123"


@pytest.mark.parametrize(
    "options, words",
    [
        ({}, "'schema.registry.url' is required"),
        ({"schema.registry.url": "ftp://r"}, "not an http"),
        ({"schema.registry.url": "http://u:pw@r:1"}, "carries credentials"),
        (
            {"schema.registry.url": "http://r", "schema.registry.basic.auth.user.info": "nocolon"},
            "must be 'key:secret'",
        ),
        (
            {
                "schema.registry.url": "http://r",
                "schema.registry.basic.auth.user.info": "a:b",
                "schema.registry.bearer.auth.token": "t",
            },
            "not both",
        ),
        (
            {"schema.registry.url": "http://r", "schema.registry.ssl.key.location": "/k"},
            "needs 'schema.registry.ssl.certificate.location'",
        ),
        (
            {"schema.registry.url": "http://r", "schema.registry.retry.budget.ms": "soon"},
            "whole number",
        ),
    ],
)
def test_bad_settings_are_named(options, words):
    with pytest.raises(ConfigurationError, match=words) as caught:
        RegistrySettings.from_options(options)
    assert "pw" not in str(caught.value) and "nocolon" not in str(caught.value)


# --- kafka_ds's client against the fake's injected answers (a local server, no broker) ----------


@pytest.fixture
def fake_registry():
    from tests.support.schema_registry import start_registry

    registry = start_registry()
    yield registry
    registry.stop()


def test_a_registry_error_500_is_asked_three_times_then_raised_with_its_message(fake_registry):
    """Apicurio 3.3 answered a Protobuf look-up it could not render with HTTP 500 and its
    JSON error; kafka_ds asked again for the whole 60 s budget and then reported only 'no
    answer within the retry budget'. A 500 with the registry's own error body is asked three
    times (as confluent-kafka's client retries), then raised with the registry's message."""
    from kafka_ds.registry.errors import RegistryUnavailableError, SchemaRegistryError

    client = SchemaRegistry(RegistrySettings(urls=(fake_registry.url,)))  # budget 60 s
    fake_registry.fail_next(10, 500)
    started = time.monotonic()
    with pytest.raises(SchemaRegistryError) as caught:
        client.versions("orders-value")
    assert time.monotonic() - started < 3
    assert not isinstance(caught.value, RegistryUnavailableError)
    text = str(caught.value)
    assert f"{fake_registry.url}/subjects/orders-value/versions" in text, text
    assert "subject 'orders-value'" in text and "injected failure" in text, text
    assert caught.value.http_status == 500 and caught.value.error_code == 50001
    assert fake_registry.count("GET", "/subjects/orders-value/versions") == 3


def test_two_registry_errors_500_then_an_answer_is_the_answer(fake_registry):
    client = SchemaRegistry(RegistrySettings(urls=(fake_registry.url,)))
    fake_registry.fail_next(2, 500)
    assert client.subjects() == []
    assert fake_registry.count("GET", "/subjects") == 3


@pytest.mark.parametrize("status", [503, 502, 429])
def test_an_outage_is_still_asked_for_the_whole_budget(fake_registry, status):
    """503/502/429 say 'not now' (a registry starting, a proxy without a backend): kept
    asking until the budget is spent, then RegistryUnavailableError."""
    from kafka_ds.registry.errors import RegistryUnavailableError

    # a budget that a loaded machine's first answers fit in (the cause must be the status)
    client = SchemaRegistry(RegistrySettings(urls=(fake_registry.url,), retry_budget_ms=1500))
    fake_registry.fail_next(1000, status)
    try:
        with pytest.raises(RegistryUnavailableError, match=f"HTTP {status}"):
            client.subjects()
    finally:
        fake_registry._failures.clear()
    assert fake_registry.count("GET", "/subjects") > 3


def _base64_descriptor(name: str) -> str:
    import base64

    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto(name=name, package="acme", syntax="proto3")
    proto.message_type.add(name="Order").field.add(
        name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64
    )
    return base64.b64encode(proto.SerializeToString()).decode()


def test_a_protobuf_schema_registered_serialized_is_read_as_stored(fake_registry):
    """The form confluent-kafka's ProtobufSerializer registers (base64 of the descriptor) is
    asked for without ``format=serialized`` (Apicurio 3.3 answers that with HTTP 500), by id
    and by version, once each."""
    from kafka_ds.registry.schema import RegisteredSchema

    client = SchemaRegistry(RegistrySettings(urls=(fake_registry.url,)))
    text = _base64_descriptor("order.proto")
    schema_id = client.register("orders-value", RegisteredSchema("PROTOBUF", text))
    for _ in range(2):  # the second time from the cache
        assert client.schema_by_id(schema_id, fmt="serialized").schema_str == text
        latest = client.schema_version("orders-value", "latest", fmt="serialized")
        assert latest.schema_str == text and latest.version == 1
    asked = [r for r in fake_registry.requests if r.method == "GET"]
    assert [(r.path, r.query) for r in asked] == [
        (f"/schemas/ids/{schema_id}", {}),
        ("/subjects/orders-value/versions/latest", {}),
        ("/subjects/orders-value/versions/latest", {}),  # 'latest' is never cached
    ]


def test_a_protobuf_schema_stored_as_text_is_asked_again_serialized(fake_registry):
    """``.proto`` text is asked for again with ``format=serialized``, by the version just read
    (a new 'latest' cannot slip in between). The fake cannot render text (42201): that
    error is what comes back."""
    from kafka_ds.registry.errors import InvalidSchemaError
    from kafka_ds.registry.schema import RegisteredSchema

    client = SchemaRegistry(RegistrySettings(urls=(fake_registry.url,)))
    proto_text = 'syntax = "proto3";\nmessage Order { int64 id = 1; }\n'
    client.register("texts-value", RegisteredSchema("PROTOBUF", proto_text))
    with pytest.raises(InvalidSchemaError, match="cannot render"):
        client.schema_version("texts-value", "latest", fmt="serialized")
    asked = [(r.path, r.query) for r in fake_registry.requests if r.method == "GET"]
    assert asked == [
        ("/subjects/texts-value/versions/latest", {}),
        ("/subjects/texts-value/versions/1", {"format": "serialized"}),
    ]
