"""JSON Schema ``$ref`` to other subjects (#30): the self-contained document the codec and
the writer's fit check compile, against the fake registry (real HTTP); the bytes side is
proven with confluent-kafka's JSONSerializer in tests/spark/test_schema_references.py."""

import json

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient

from kafka_ds.formats.json.codec import JsonCodec
from kafka_ds.formats.json.references import REFERENCES_KEY, self_contained
from kafka_ds.formats.json.schema import JsonSchemaError
from kafka_ds.registry.client import SchemaRegistry
from kafka_ds.registry.settings import RegistrySettings
from tests.support.schema_registry import schema_registry  # noqa: F401  (fixture)

GEO = {
    "type": "object",
    "$id": "https://acme.example/geo.json",
    "definitions": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
    "properties": {"at": {"$ref": "#/definitions/Point"}},
}


def registry_with(registry, root, references):
    client = SchemaRegistryClient({"url": registry.url})
    client.register_schema("shared/geo", Schema(json.dumps(GEO), "JSON"))
    client.register_schema("root", Schema(json.dumps(root), "JSON", references))
    lookup = SchemaRegistry(RegistrySettings.from_options({"schema.registry.url": registry.url}))
    return lookup, lookup.schema_version("root", "latest")


def test_refs_with_fragments_ids_and_slashes_resolve(schema_registry):  # noqa: F811
    root = {
        "type": "object",
        "properties": {
            "where": {"$ref": "shared/geo.json"},  # the whole document
            "point": {"$ref": "shared/geo.json#/definitions/Point"},  # a fragment of it
            "by_id": {"$ref": "https://acme.example/geo.json#/definitions/Point"},
        },
    }
    lookup, registered = registry_with(
        schema_registry, root, [SchemaReference("shared/geo.json", "shared/geo", 1)]
    )
    contained = self_contained(registered, lookup)
    assert contained.references == () and contained.schema_id == registered.schema_id
    text = json.loads(contained.schema_str)
    assert (
        text["properties"]["point"]["$ref"]
        == f"#/{REFERENCES_KEY}/shared~1geo.json/definitions/Point"
    )
    # the referenced document's own "#/..." refs now point into its copy
    assert (
        text[REFERENCES_KEY]["shared/geo.json"]["properties"]["at"]["$ref"]
        == f"#/{REFERENCES_KEY}/shared~1geo.json/definitions/Point"
    )
    codec = JsonCodec(registered, framed=False, lookup=lookup)
    assert codec.spark_type == (
        "struct<where:struct<at:struct<x:double>>,point:struct<x:double>,by_id:struct<x:double>>"
    )
    value = {"where": {"at": {"x": 1.5}}, "point": {"x": 2.0}, "by_id": None}
    assert codec.decode(pa.array([json.dumps(value).encode()])).array.to_pylist() == [value]


def test_a_ref_no_reference_names_is_an_error_listing_the_references(schema_registry):  # noqa: F811
    root = {"type": "object", "properties": {"a": {"$ref": "elsewhere.json"}}}
    lookup, registered = registry_with(
        schema_registry, root, [SchemaReference("shared/geo.json", "shared/geo", 1)]
    )
    with pytest.raises(
        JsonSchemaError,
        match=r"'elsewhere.json' names no schema reference "
        r"of the subject \(its references: shared/geo.json",
    ):
        JsonCodec(registered, framed=True, lookup=lookup)
    with pytest.raises(JsonSchemaError, match="no registry to fetch it from"):
        JsonCodec(registered, framed=True)
