"""Helpers for the codec tests and benchmarks (no sockets): Protobuf file descriptors built
in code, SchemaLookups over confluent-kafka's in-memory MockSchemaRegistryClient and over
dicts. The registry served over real sockets is ``schema_registry.py`` (its state in
``registry_store.py``)."""

from __future__ import annotations

import itertools

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from kafka_ds.registry.errors import RegistryUnavailableError
from kafka_ds.registry.schema import RegisteredSchema, SchemaLookup, SchemaReference

try:
    # the pre-2.10 path (pyproject allows >= 2.6); absent from the installed release
    from confluent_kafka.schema_registry.mock_schema_registry_client import (  # type: ignore[import-not-found]
        MockSchemaRegistryClient,
    )
except ImportError:
    try:  # confluent-kafka >= 2.10 keeps it in the sync package
        from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
            MockSchemaRegistryClient,
        )
    except ImportError:  # older confluent-kafka: the test modules skip
        MockSchemaRegistryClient = None

_F = descriptor_pb2.FieldDescriptorProto
TYPES = {
    "int32": _F.TYPE_INT32,
    "sint32": _F.TYPE_SINT32,
    "sfixed32": _F.TYPE_SFIXED32,
    "uint32": _F.TYPE_UINT32,
    "fixed32": _F.TYPE_FIXED32,
    "int64": _F.TYPE_INT64,
    "sint64": _F.TYPE_SINT64,
    "sfixed64": _F.TYPE_SFIXED64,
    "uint64": _F.TYPE_UINT64,
    "fixed64": _F.TYPE_FIXED64,
    "float": _F.TYPE_FLOAT,
    "double": _F.TYPE_DOUBLE,
    "bool": _F.TYPE_BOOL,
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
}


def _add_field(message, name, number, spec):
    """spec: a scalar name, ".pkg.Message" / "enum:.pkg.Enum", "repeated X",
    "optional X" (proto3 presence), "map<K,V>" or "oneof:<group> X"."""
    field = message.field.add(name=name, number=number, label=_F.LABEL_OPTIONAL)
    if spec.startswith("repeated "):
        field.label = _F.LABEL_REPEATED
        spec = spec[len("repeated ") :]
    elif spec.startswith("optional "):
        spec = spec[len("optional ") :]
        field.proto3_optional = True
        field.oneof_index = len(message.oneof_decl)
        message.oneof_decl.add(name=f"_{name}")
    elif spec.startswith("oneof:"):
        group, spec = spec[len("oneof:") :].split(" ", 1)
        names = [o.name for o in message.oneof_decl]
        if group not in names:
            message.oneof_decl.add(name=group)
            names.append(group)
        field.oneof_index = names.index(group)
    if spec.startswith("map<"):
        key, value = spec[4:-1].split(",")
        entry_name = "".join(p.capitalize() for p in name.split("_")) + "Entry"
        entry = message.nested_type.add(name=entry_name)
        entry.options.map_entry = True
        _add_field(entry, "key", 1, key)
        _add_field(entry, "value", 2, value)
        field.label = _F.LABEL_REPEATED
        field.type = _F.TYPE_MESSAGE
        field.type_name = entry_name  # resolved relative to the message
        return
    if spec.startswith("enum:"):
        field.type = _F.TYPE_ENUM
        field.type_name = spec[len("enum:") :]
    elif spec.startswith("."):
        field.type = _F.TYPE_MESSAGE
        field.type_name = spec
    else:
        field.type = TYPES[spec]


def file_proto(name, messages, *, package="test", deps=(), enums=None, syntax="proto3"):
    """messages: {message name: [(field name, spec), ...]} (numbers 1, 2, ...), or
    (fields, {nested name: fields}) for nested messages."""
    proto = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax=syntax)
    proto.dependency.extend(deps)
    for enum_name, values in (enums or {}).items():
        enum = proto.enum_type.add(name=enum_name)
        for number, value in enumerate(values):
            enum.value.add(name=value, number=number)
    for message_name, fields in messages.items():
        nested = {}
        if isinstance(fields, tuple):
            fields, nested = fields
        message = proto.message_type.add(name=message_name)
        for nested_name, nested_fields in nested.items():
            inner = message.nested_type.add(name=nested_name)
            for number, (field_name, spec) in enumerate(nested_fields, 1):
                _add_field(inner, field_name, number, spec)
        for number, (field_name, spec) in enumerate(fields, 1):
            _add_field(message, field_name, number, spec)
    return proto


_pool_ids = itertools.count()


def message_classes(*protos):
    """{full message name: generated class} for file protos (dependencies first), each
    call in a pool of its own."""
    pool = descriptor_pool.DescriptorPool()
    from google.protobuf import duration_pb2, timestamp_pb2, wrappers_pb2  # noqa: F401

    default = descriptor_pool.Default()
    for proto in protos:
        for dep in proto.dependency:
            if dep.startswith("google/protobuf/"):
                try:
                    pool.FindFileByName(dep)
                except KeyError:
                    pool.AddSerializedFile(default.FindFileByName(dep).serialized_pb)
        pool.Add(proto)
    classes = {}
    for proto in protos:
        file_desc = pool.FindFileByName(proto.name)

        def walk(desc):
            classes[desc.full_name] = message_factory.GetMessageClass(desc)
            for inner in desc.nested_types:
                walk(inner)

        for desc in file_desc.message_types_by_name.values():
            walk(desc)
    return classes


class MockLookup(SchemaLookup):
    """kafka_ds's SchemaLookup over confluent-kafka's in-memory registry client."""

    def __init__(self, client):
        self.client = client
        self.calls = []

    @staticmethod
    def _convert(schema, schema_id=None, subject=None, version=None):
        refs = tuple(
            SchemaReference(r.name, r.subject, r.version) for r in (schema.references or [])
        )
        return RegisteredSchema(
            schema.schema_type or "AVRO", schema.schema_str, refs, schema_id, subject, version
        )

    def schema_by_id(self, schema_id, fmt=None):
        self.calls.append(("id", schema_id, fmt))
        return self._convert(self.client.get_schema(schema_id, fmt=fmt), schema_id)

    def schema_version(self, subject, version, fmt=None):
        self.calls.append(("version", subject, version, fmt))
        registered = self.client.get_version(subject, version, fmt=fmt)
        return self._convert(registered.schema, registered.schema_id, subject, registered.version)


class DictLookup(SchemaLookup):
    """A picklable SchemaLookup over schemas held in dicts."""

    def __init__(self, by_id=None, by_version=None):
        self.by_id = dict(by_id or {})
        self.by_version = dict(by_version or {})
        self.calls = []  # the ids asked for, in order

    def schema_by_id(self, schema_id, fmt=None):
        self.calls.append(schema_id)
        try:
            return self.by_id[schema_id]
        except KeyError:
            raise LookupError(f"schema {schema_id} not found") from None

    def schema_version(self, subject, version, fmt=None):
        return self.by_version[(subject, version)]


class DownLookup(SchemaLookup):
    """Another SchemaLookup behind a registry that is down while ``down`` is true: every
    look-up then raises RegistryUnavailableError, as the registry client does once its retry
    budget (``schema.registry.retry.budget.ms``) is spent."""

    def __init__(self, lookup):
        self.lookup = lookup
        self.down = True

    def _check(self, what):
        if self.down:
            raise RegistryUnavailableError(
                f"schema registry unavailable for {what}: no answer within the retry budget "
                "of 20000 ms from http://127.0.0.1:1; last cause: ConnectionRefusedError"
            )

    def schema_by_id(self, schema_id, fmt=None):
        self._check(f"schema id {schema_id}")
        return self.lookup.schema_by_id(schema_id, fmt)

    def schema_version(self, subject, version, fmt=None):
        self._check(f"subject {subject!r} version {version}")
        return self.lookup.schema_version(subject, version, fmt)


def assert_decode_contract(result, values):
    """The codec contract on any input: one output row per input row, null exactly where
    the input is null or the row is reported bad (once, with a reason and a schema id).
    Returns the decoded values as Python objects."""
    decoded = result.array.to_pylist()
    assert len(decoded) == len(values)
    bad = result.bad_rows.tolist()
    assert len(set(bad)) == len(bad) == len(result.reasons) == len(result.schema_ids)
    for row, (value, out) in enumerate(zip(values, decoded, strict=True)):
        assert (out is None) == (value is None or row in bad), (row, value, out)
    return decoded
