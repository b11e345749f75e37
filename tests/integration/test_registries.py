"""The same REST-level checks on the suite's two Schema Registries: the fake
(tests/support/schema_registry.py, this project's own) and Apicurio Registry 3.3
(tests/support/apicurio.py, another team's, through its Confluent-compatible API). No Spark:
each check is a few requests.

The expectation of every check is Confluent Schema Registry's documented behaviour (its REST
API reference, docs.confluent.io/platform/current/schema-registry/develop/api.html). A
registry that does otherwise is marked with a strict xfail that says what it does instead:
the differences are recorded here, and an xfail that starts passing fails the run.

Also: TLS with a private CA and HTTP basic auth on a real server, through kafka_ds's
``schema.registry.*`` options (a second Apicurio for this module, started with both)."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
import uuid

import pytest
from google.protobuf import descriptor_pb2

from kafka_ds.registry.client import SchemaRegistry
from kafka_ds.registry.errors import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    RegistryAuthenticationError,
    SchemaRegistryError,
    SubjectNotFoundError,
)
from kafka_ds.registry.schema import RegisteredSchema, SchemaReference
from kafka_ds.registry.settings import RegistrySettings
from tests.support import apicurio
from tests.support.apicurio import apicurio_registry  # noqa: F401  (fixture)
from tests.support.schema_registry import schema_registry  # noqa: F401  (fixture)
from tests.unit.test_schema_registry import USER_NO_DEFAULT, USER_V1, USER_V2, record

pytestmark = pytest.mark.integration

REGISTRIES = ["fake", "apicurio"]


@pytest.fixture(params=REGISTRIES)
def registry(request):
    """The registry under test: ``.url`` is its Confluent-compatible base URL."""
    name = "schema_registry" if request.param == "fake" else "apicurio_registry"
    return request.getfixturevalue(name)


def deviation(registry_name: str, reason: str):
    """A strict xfail for one registry's case of a parametrized check."""
    return pytest.param(
        registry_name, marks=pytest.mark.xfail(strict=True, reason=f"{registry_name}: {reason}")
    )


def on(*deviations, of=REGISTRIES):
    """Parametrize ``registry`` (indirectly) with the given deviations marked."""
    marked = {d.values[0]: d for d in deviations}
    return pytest.mark.parametrize(
        "registry", [marked.get(name, name) for name in of], indirect=True
    )


def subject(prefix: str) -> str:
    """A subject no other test (or worker: Apicurio is shared by the run) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def client(registry, **settings) -> SchemaRegistry:
    settings.setdefault("retry_budget_ms", 3000)
    return SchemaRegistry(RegistrySettings(urls=(registry.url,), **settings))


def rest(registry, method: str, path: str, body=None) -> tuple[int, object]:
    """One raw request: (status, decoded JSON body)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        registry.url + path,
        data=data,
        method=method,
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def avro(text: str) -> RegisteredSchema:
    return RegisteredSchema("AVRO", text)


# --- what a registry keeps and gives back -------------------------------------------------------


@on(deviation("apicurio", "the default compatibility level is NONE (Confluent's: BACKWARD)"))
def test_the_default_compatibility_level_is_backward(registry):
    status, answer = rest(registry, "GET", "/config")
    assert status == 200
    assert answer["compatibilityLevel"] == "BACKWARD"


def test_a_schema_registered_again_keeps_its_id_and_version(registry):
    orders = subject("again")
    first = client(registry).register(orders, avro(USER_V1))
    # a new client: kafka_ds's own cache of registered ids must not answer
    assert client(registry).register(orders, avro(USER_V1)) == first
    assert client(registry).versions(orders) == [1]


def test_one_schema_under_two_subjects_has_one_id(registry):
    schema = avro(record("Shared" + uuid.uuid4().hex[:6], {"name": "id", "type": "long"}))
    first = client(registry).register(subject("one"), schema)
    assert client(registry).register(subject("two"), schema) == first


@on(
    deviation(
        "fake",
        "schemas are compared as given (JSON re-serialized compactly); the order of a "
        "record's attributes makes another schema",
    )
)
def test_an_avro_schema_differing_in_layout_and_attribute_order_is_the_same_schema(registry):
    """Confluent compares Avro schemas in their parsed form: whitespace and the order of the
    JSON attributes do not make a new version."""
    orders = subject("layout")
    compact = {"type": "record", "name": "Layout", "fields": [{"name": "id", "type": "long"}]}
    first = client(registry).register(orders, avro(json.dumps(compact)))
    reordered = {"fields": [{"type": "long", "name": "id"}], "name": "Layout", "type": "record"}
    again = client(registry).register(orders, avro(json.dumps(reordered, indent=2)))
    assert again == first
    assert client(registry).versions(orders) == [1]


def test_lookup_finds_the_version_and_names_what_is_missing(registry):
    orders = subject("lookup")
    schema_id = client(registry).register(orders, avro(USER_V1))
    found = client(registry).lookup(orders, avro(USER_V1))
    assert found is not None and (found.schema_id, found.version) == (schema_id, 1)
    assert client(registry).lookup(orders, avro(USER_V2)) is None  # 40403
    assert client(registry).lookup(subject("none"), avro(USER_V1)) is None  # 40401
    with pytest.raises(SubjectNotFoundError):
        client(registry).latest(subject("none"))


def test_latest_after_the_latest_version_is_soft_deleted_is_the_one_before(registry):
    orders = subject("softdel")
    first = client(registry).register(orders, avro(USER_V1))
    second = client(registry).register(orders, avro(USER_V2))
    assert second != first
    status, answer = rest(registry, "DELETE", f"/subjects/{orders}/versions/2")
    assert (status, answer) == (200, 2)
    latest = client(registry).latest(orders)
    assert (latest.version, latest.schema_id) == (1, first)
    assert client(registry).versions(orders) == [1]
    # an id stays readable after its version is soft-deleted (records still name it)
    assert client(registry).schema_by_id(second).schema_str
    assert json.loads(client(registry).schema_by_id(second).schema_str) == json.loads(USER_V2)


def test_a_reference_resolves_to_the_version_it_names(registry):
    namespace = "ref" + uuid.uuid4().hex[:8]
    address = subject("address")
    v1 = record("Address", {"name": "street", "type": "string"}).replace('"test"', f'"{namespace}"')
    v2 = record(
        "Address",
        {"name": "street", "type": "string"},
        {"name": "city", "type": "string", "default": ""},
    ).replace('"test"', f'"{namespace}"')
    client(registry).register(address, avro(v1))
    client(registry).register(address, avro(v2))
    user = json.dumps(
        {
            "type": "record",
            "name": "Customer",
            "namespace": namespace,
            "fields": [{"name": "home", "type": f"{namespace}.Address"}],
        }
    )
    reference = SchemaReference(f"{namespace}.Address", address, 1)
    customer = subject("customer")
    customer_id = client(registry).register(
        customer, RegisteredSchema("AVRO", user, references=(reference,))
    )
    read = client(registry).schema_by_id(customer_id)
    assert read.references == (reference,)
    named = client(registry).schema_version(address, read.references[0].version)
    assert json.loads(named.schema_str) == json.loads(v1)


def test_an_incompatible_schema_is_refused_with_409(registry):
    orders = subject("compat")
    status, _ = rest(registry, "PUT", f"/config/{orders}", {"compatibility": "BACKWARD"})
    assert status == 200
    client(registry).register(orders, avro(USER_V1))
    assert not client(registry).compatibility(orders, avro(USER_NO_DEFAULT))[0]
    with pytest.raises(IncompatibleSchemaError) as caught:
        client(registry).register(orders, avro(USER_NO_DEFAULT))
    assert caught.value.http_status == 409 and caught.value.error_code == 409
    assert client(registry).compatibility(orders, avro(USER_V2)) == (True, [])


@on(deviation("apicurio", "verbose=true gives no messages: is_compatible false, messages []"))
def test_a_verbose_compatibility_check_says_why(registry):
    orders = subject("verbose")
    rest(registry, "PUT", f"/config/{orders}", {"compatibility": "BACKWARD"})
    client(registry).register(orders, avro(USER_V1))
    compatible, messages = client(registry).compatibility(orders, avro(USER_NO_DEFAULT))
    assert not compatible
    assert messages and any("age" in str(message) for message in messages), messages


@on(
    deviation(
        "fake",
        "it accepts an Avro record without 'fields' (fastavro's parser does; Avro's Java "
        "parser, Confluent's, refuses it)",
    )
)
def test_an_invalid_schema_is_refused_with_42201(registry):
    with pytest.raises(InvalidSchemaError) as caught:
        client(registry).register(subject("invalid"), avro('{"type": "record", "name": "X"}'))
    assert caught.value.http_status == 422 and caught.value.error_code == 42201


@pytest.mark.parametrize("strategy", ["topic", "record", "topic_record"])
def test_the_subject_name_strategies_names_are_subjects_in_the_path(registry, strategy):
    """TopicNameStrategy ``orders-value``, RecordNameStrategy ``shop.Order``,
    TopicRecordNameStrategy ``orders-shop.Order``: dots and dashes in the path."""
    topic, record_name = subject("orders"), f"shop{uuid.uuid4().hex[:6]}.Order"
    name = {
        "topic": f"{topic}-value",
        "record": record_name,
        "topic_record": f"{topic}-{record_name}",
    }[strategy]
    schema_id = client(registry).register(name, avro(USER_V1))
    assert client(registry).latest(name).schema_id == schema_id
    assert name in client(registry).subjects()


@on(
    deviation(
        "apicurio",
        "GET /contexts lists only its default context (as ':.:'), not the context of a "
        "subject registered as ':.ctx:name' (the name is kept apart from the plain one)",
    ),
    deviation(
        "fake",
        "contexts are not modelled: ':.ctx:name' is one more subject name, and there is no "
        "GET /contexts (404)",
    ),
)
def test_a_subject_in_a_context_is_apart_from_the_default_context(registry):
    """Confluent: ``:.tenant:orders-value`` is subject ``orders-value`` in context
    ``.tenant``, with ids of its own; ``GET /subjects`` of the default context does not list
    it as the plain name."""
    plain = subject("ctx")
    qualified = f":.tenant{uuid.uuid4().hex[:6]}:{plain}"
    client(registry).register(qualified, avro(USER_V1))
    assert client(registry).latest(qualified).schema_str
    with pytest.raises(SubjectNotFoundError):
        client(registry).latest(plain)
    status, contexts = rest(registry, "GET", "/contexts")
    assert status == 200 and qualified.split(":")[1] in contexts


# --- Protobuf: what format=serialized gives -----------------------------------------------------


def _descriptor(package: str, fields: int) -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(name="order.proto", package=package)
    proto.syntax = "proto3"
    message = proto.message_type.add(name="Order")
    for number in range(1, fields + 1):
        message.field.add(
            name=f"field_number_{number}_with_a_long_name",
            number=number,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        )
    return proto


def _proto_text(package: str, fields: int) -> str:
    lines = [f"  string field_number_{n}_with_a_long_name = {n};" for n in range(1, fields + 1)]
    return 'syntax = "proto3";\npackage {};\n\nmessage Order {{\n{}\n}}\n'.format(
        package, "\n".join(lines)
    )


@on(
    deviation(
        "apicurio",
        "format=serialized of a schema registered as base64 of its FileDescriptorProto is "
        "HTTP 500: it parses the base64 as .proto text",
    )
)
def test_format_serialized_of_a_schema_registered_serialized(registry):
    """The form confluent-kafka's ProtobufSerializer registers. kafka_ds no longer asks
    for it this way (it reads the stored base64 as it is: the next test)."""
    package = "ser" + uuid.uuid4().hex[:8]
    encoded = base64.b64encode(_descriptor(package, 3).SerializeToString()).decode()
    orders = subject("pbser")
    client(registry).register(orders, RegisteredSchema("PROTOBUF", encoded))
    status, answer = rest(registry, "GET", f"/subjects/{orders}/versions/latest?format=serialized")
    assert status == 200, answer
    parsed = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(answer["schema"]))
    assert [m.name for m in parsed.message_type] == ["Order"]


def test_kafka_ds_reads_a_schema_registered_serialized_on_both(registry):
    package = "ser" + uuid.uuid4().hex[:8]
    encoded = base64.b64encode(_descriptor(package, 3).SerializeToString()).decode()
    orders = subject("pbread")
    schema_id = client(registry).register(orders, RegisteredSchema("PROTOBUF", encoded))
    for read in (
        client(registry).schema_by_id(schema_id, fmt="serialized"),
        client(registry).schema_version(orders, "latest", fmt="serialized"),
    ):
        parsed = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(read.schema_str))
        assert parsed.package == package and len(parsed.message_type[0].field) == 3


@on(
    deviation("fake", "it cannot render .proto text as format=serialized (42201)"),
    deviation(
        "apicurio",
        "format=serialized of .proto text is the descriptor's bytes as a JSON string, not "
        "base64; bytes above 0x7f come back as U+FFFD",
    ),
)
def test_format_serialized_of_a_schema_registered_as_proto_text(registry):
    """How a Java producer (Confluent's KafkaProtobufSerializer) registers: .proto text.
    Confluent renders it as base64 of its FileDescriptorProto; 40 fields make the message
    longer than 127 bytes (a length of two bytes, one above 0x7f)."""
    package = "txt" + uuid.uuid4().hex[:8]
    orders = subject("pbtext")
    schema_id = client(registry).register(
        orders, RegisteredSchema("PROTOBUF", _proto_text(package, 40))
    )
    read = client(registry).schema_by_id(schema_id, fmt="serialized")
    parsed = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(read.schema_str))
    assert parsed.package == package and len(parsed.message_type[0].field) == 40


def test_apicurio_s_500_is_raised_at_once_with_its_message(apicurio_registry):  # noqa: F811
    """Apicurio's HTTP 500 to format=serialized of a base64 schema carries its own error:
    kafka_ds raises it after three answers, naming the URL and the message (it retried for
    the whole 60 s budget and said only 'no answer' before)."""
    package = "ser" + uuid.uuid4().hex[:8]
    encoded = base64.b64encode(_descriptor(package, 3).SerializeToString()).decode()
    orders = subject("pb500")
    registry_client = SchemaRegistry(RegistrySettings(urls=(apicurio_registry.url,)))
    schema_id = registry_client.register(orders, RegisteredSchema("PROTOBUF", encoded))
    with pytest.raises(SchemaRegistryError) as caught:
        # the request kafka_ds made before it read the stored form first
        registry_client._request(
            "GET",
            f"/schemas/ids/{schema_id}",
            {"format": "serialized"},
            what=f"schema id {schema_id}",
        )
    text = str(caught.value)
    assert caught.value.http_status == 500, text
    assert f"{apicurio_registry.url}/schemas/ids/{schema_id}?format=serialized" in text, text
    assert "Syntax error" in text and "3 answers in a row" in text, text


# --- TLS with a private CA and basic auth, on a real server -------------------------------------


@pytest.fixture(scope="module")
def secured_apicurio(tmp_path_factory):
    """An Apicurio of this module's own: HTTPS with a certificate of a private CA, and HTTP
    basic auth (Quarkus's embedded users; no Keycloak)."""
    tls, certificate = apicurio.server_tls(tmp_path_factory.mktemp("apicurio-tls"))
    registry = apicurio.Apicurio(
        tls=tls, server_certificate=certificate, basic_auth="reader:s3cret-pw"
    )
    yield registry
    registry.stop()


def test_tls_and_basic_auth_through_the_options(secured_apicurio):
    options = {
        "schema.registry.url": secured_apicurio.https_url,
        "schema.registry.ssl.ca.location": secured_apicurio.tls.ca,
        "schema.registry.basic.auth.user.info": "reader:s3cret-pw",
        "schema.registry.retry.budget.ms": "3000",
    }
    good = SchemaRegistry(RegistrySettings.from_options(options))
    orders = subject("secure")
    schema_id = good.register(orders, avro(USER_V1))
    assert good.latest(orders).schema_id == schema_id

    wrong = {**options, "schema.registry.basic.auth.user.info": "reader:wrong"}
    with pytest.raises(RegistryAuthenticationError) as caught:
        SchemaRegistry(RegistrySettings.from_options(wrong)).subjects()
    assert caught.value.http_status == 401 and "wrong" not in str(caught.value)

    no_ca = {k: v for k, v in options.items() if k != "schema.registry.ssl.ca.location"}
    with pytest.raises(SchemaRegistryError, match="did not verify"):
        SchemaRegistry(RegistrySettings.from_options(no_ca)).subjects()


# --- outages of the real server (benchmarks/soak.py) ---------------------------------------------


def test_an_outage_proxy_in_front_of_apicurio_takes_it_away_and_back(
    apicurio_registry,  # noqa: F811
):
    """The soak's registry outages: Apicurio keeps its schemas in memory, so an outage is
    the proxy's (connections cut, new ones closed), not a stopped JVM."""
    from kafka_ds.registry.errors import RegistryUnavailableError
    from tests.support.outage_proxy import OutageProxy

    proxy = OutageProxy("127.0.0.1", apicurio_registry.port)
    try:
        url = f"http://127.0.0.1:{proxy.port}{apicurio.CCOMPAT_PATH}"
        through = SchemaRegistry(RegistrySettings(urls=(url,), retry_budget_ms=600))
        orders = subject("outage")
        schema_id = through.register(orders, avro(USER_V1))
        assert proxy.connections == 1  # one connection per request
        proxy.down()
        with pytest.raises(RegistryUnavailableError):
            through.latest(orders)
        assert proxy.connections == 1  # refused ones are not counted
        proxy.up()
        assert through.latest(orders).schema_id == schema_id  # the schemas stayed
        assert proxy.connections == 2
    finally:
        proxy.close()
