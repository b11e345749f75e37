"""Typed keys and values in the sink: ``valueFormat``/``keyFormat`` on write.

On the driver (:func:`resolve_for_write`, at planning, before any task runs), each typed
column gets its writer schema:

* with ``valueSchema``: that schema (registered under the subject when a registry is set,
  or, for Avro/JSON without one, written unframed);
* else the subject's version (``latest`` by default) when the column's Spark type fits it;
* else, with ``schema.registry.auto.register.schemas`` (the default, as Confluent's
  serializers), the schema derived from the Spark type is registered and the registry's
  compatibility check decides; without it the write fails naming the subject and the first
  field that does not fit.

The tasks then encode each Arrow batch's column with the codec and frame it with the
schema id (:meth:`TypedWriteColumns.encode`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigurationError
from ..formats.codecs import SCHEMA_TYPES, make_codec
from ..options.formats import ColumnFormatSpec, TypedColumnsSpec
from ..registry.client import registry_for


@dataclass
class TypedWriteColumns:
    #: column name ("key"/"value") -> codec; None for ``string`` (UTF-8 as is)
    codecs: dict
    #: columns written with ``<column>MemberNames=type``: renamed to member0, ... to encode
    by_position: frozenset = frozenset()

    def encode(self, name: str, array):
        """The Kafka bytes of one column of an Arrow batch."""
        import pyarrow as pa

        codec = self.codecs[name]
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        if codec is None:
            return array.cast(pa.binary())
        if name in self.by_position:  # a union struct: its fields taken by position
            from ..formats.avro.members import renamed

            array = renamed(array, [f"member{i}" for i in range(array.type.num_fields)])
        return codec.encode(array)


@dataclass
class DeferredTypedColumns:
    """A streaming sink's typed columns whose writer schemas the driver could not look up
    (the registry was unavailable when pyspark built the writer): the task resolves them
    at its first batch, as the driver would have (``plan_columns(streaming=True)``)."""

    spec: TypedColumnsSpec
    topic: str | None
    fields: dict  # column name -> pyspark StructField
    resolved: TypedWriteColumns | None = None

    def _columns(self) -> TypedWriteColumns:
        if self.resolved is None:
            self.resolved = resolve_for_write(self.spec, self.topic, self.fields)
        return self.resolved

    @property
    def codecs(self) -> dict:
        return self._columns().codecs

    def encode(self, name: str, array):
        return self._columns().encode(name, array)


def _schema_support(fmt: str):
    """``(misfit, derive)`` of a format: ``misfit(spark_type, schema_text)`` -> the first
    field that does not fit (None: fits); ``derive(spark_type)`` -> schema text."""
    if fmt == "avro":
        import json

        from ..formats.avro.spark import spark_to_avro, spark_type_misfit

        def misfit(spark_type, schema_text):
            return spark_type_misfit(spark_type, json.loads(schema_text))

        def derive(spark_type):
            return json.dumps(spark_to_avro(spark_type))

        return misfit, derive
    if fmt == "json":
        from ..formats.json.spark import json_schema_for, json_schema_misfit

        return json_schema_misfit, json_schema_for
    from ..formats.protobuf.spark import descriptor_for, descriptor_misfit

    return descriptor_misfit, descriptor_for


def _subject(spec: ColumnFormatSpec, topic: str | None) -> str:
    if spec.subject:
        return spec.subject
    if topic:
        return f"{topic}-{spec.column}"
    raise ConfigurationError(
        f"Option '{spec.option('Format')}'='{spec.format}' writes with the schema of subject "
        f"'<topic>-{spec.column}', which needs the option 'topic' (rows that carry their own "
        f"topic column may go to several topics): set 'topic', or name the subject with "
        f"'{spec.option('Subject')}'"
    )


def writer_schema(spec: ColumnFormatSpec, typed: TypedColumnsSpec, topic, spark_type):
    """``(RegisteredSchema, schema id or None)`` the column is written with."""
    from ..registry.errors import (
        RegistryUnavailableError,
        SchemaRegistryError,
        SubjectNotFoundError,
        VersionNotFoundError,
    )
    from ..registry.schema import RegisteredSchema

    schema_type = SCHEMA_TYPES[spec.format]
    misfit, derive = _schema_support(spec.format)
    if spec.message_name:  # Protobuf: the message written is the one checked
        from functools import partial

        misfit = partial(misfit, message_name=spec.message_name)
    if typed.registry is None:  # inline Avro/JSON, written without the registry frame
        if spec.inline_schema is None:
            raise ConfigurationError(
                f"Option '{spec.option('Schema')}' or "
                "'schema.registry.url' is needed to write typed values"
            )
        schema = RegisteredSchema(schema_type, spec.inline_schema)
        _check_fit(spec, misfit, spark_type, schema, f"the schema in '{spec.option('Schema')}'")
        return schema, None
    client = registry_for(typed.registry)
    subject = _subject(spec, topic)
    try:
        if spec.inline_schema is not None:
            schema = RegisteredSchema(schema_type, spec.inline_schema)
            _check_fit(spec, misfit, spark_type, schema, f"the schema in '{spec.option('Schema')}'")
            return schema, register_or_find(client, typed, spec, subject, schema)
        try:
            current = client.schema_version(
                subject, spec.version, fmt="serialized" if spec.format == "protobuf" else None
            )
        except (SubjectNotFoundError, VersionNotFoundError):
            current = None
        # references resolved here, once: the fit check and the tasks need no registry
        if current is not None and spec.format == "avro" and current.schema_type == "AVRO":
            from ..formats.avro.references import self_contained

            current = self_contained(current, client)
        elif current is not None and spec.format == "json" and current.schema_type == "JSON":
            from ..formats.json.references import self_contained as json_self_contained

            current = json_self_contained(current, client)
        elif current is not None and current.references and current.schema_type == "PROTOBUF":
            from functools import partial

            misfit = partial(misfit, imported=_imported_files(client, current))
        # The schema's type first: a fit check cannot read a schema of another format.
        if current is None:
            problem = "the subject has no schema"
        elif current.schema_type != schema_type:
            problem = f"it holds a {current.schema_type} schema, not {schema_type}"
        else:
            problem = misfit(spark_type, current.schema_str)
        if problem is None:
            return current, current.schema_id
        if spec.version != "latest" or not typed.auto_register:
            why = (
                f"version {spec.version} was asked for"
                if spec.version != "latest"
                else "schema.registry.auto.register.schemas is false"
            )
            raise ConfigurationError(
                f"Column '{spec.column}' does not fit subject '{subject}'"
                + (f" version {current.version}" if current is not None else "")
                + f": {problem}. It is not registered as a new version because {why}: make "
                "the column's type match the schema, or allow registration with "
                '.option("schema.registry.auto.register.schemas", "true")'
            )
        derived = RegisteredSchema(schema_type, derive(spark_type))
        return derived, register_or_find(client, typed, spec, subject, derived)
    except SchemaRegistryError as exc:
        if isinstance(exc, (ConfigurationError, RegistryUnavailableError)):
            raise  # an outage is no configuration problem: retriable, and it says so
        raise ConfigurationError(
            f"The {spec.column} schema of subject '{subject}' could not be resolved for "
            f"writing: {exc}"
        ) from exc


def _imported_files(client, schema, seen=None) -> list[str]:
    """The serialized files a Protobuf schema imports through references, transitively."""
    seen = set() if seen is None else seen
    out = []
    for ref in schema.references:
        if (ref.subject, ref.version) in seen:
            continue
        seen.add((ref.subject, ref.version))
        imported = client.schema_version(ref.subject, ref.version, fmt="serialized")
        out += _imported_files(client, imported, seen) + [imported.schema_str]
    return out


def _check_fit(spec, misfit, spark_type, schema, where):
    problem = misfit(spark_type, schema.schema_str)
    if problem is not None:
        raise ConfigurationError(f"Column '{spec.column}' does not fit {where}: {problem}")


def register_or_find(client, typed, spec, subject, schema) -> int:
    from ..registry.errors import IncompatibleSchemaError

    if not typed.auto_register:
        found = client.lookup(subject, schema)
        if found is None:
            raise ConfigurationError(
                f"The {spec.column} schema is not registered under subject '{subject}' and "
                "schema.registry.auto.register.schemas is false: register it first, or set "
                "the option to true"
            )
        return found.schema_id
    try:
        return client.register(subject, schema)
    except IncompatibleSchemaError as exc:
        raise ConfigurationError(
            f"The registry refused the {spec.column} schema for subject '{subject}' as "
            f"incompatible with its earlier versions: {exc}. Change the column so it is "
            "compatible (e.g. new fields nullable), or change the subject's compatibility "
            "level"
        ) from exc


def resolve_for_write(spec: TypedColumnsSpec, topic: str | None, fields: dict):
    """``fields``: column name -> pyspark StructField of the written DataFrame."""
    codecs: dict = {}
    for column_spec in spec.columns:
        field = fields.get(column_spec.column)
        if field is None:
            continue  # no key column: keys are null, nothing to encode
        if column_spec.format == "string":
            if field.dataType.simpleString() != "string":
                raise ConfigurationError(
                    f"Option '{column_spec.option('Format')}'='string' writes a string column, "
                    f"but '{field.name}' is {field.dataType.simpleString()}: cast it with "
                    f"col('{field.name}').cast('string')"
                )
            codecs[column_spec.column] = None
            continue
        if column_spec.subjects is not None:
            codecs[column_spec.column] = several_subjects_encoder(column_spec, spec, field)
            continue
        schema, schema_id = writer_schema(column_spec, spec, topic, field.dataType)
        # Protobuf imports stay references (Avro and JSON ones were resolved above): the
        # tasks' codec builds its pool through the registry, once per executor process
        lookup = registry_for(spec.registry) if schema.references else None
        codecs[column_spec.column] = make_codec(
            column_spec, schema, framed=schema_id is not None, lookup=lookup, schema_id=schema_id
        )
    return TypedWriteColumns(codecs, _written_by_position(spec, codecs))


def _written_by_position(spec: TypedColumnsSpec, codecs: dict) -> frozenset:
    """The columns with ``<column>MemberNames=type`` written with a union of several types
    (``<column>Subjects`` takes its fields by position anyway)."""
    from ..formats.avro.members import type_member_names

    return frozenset(
        c.column
        for c in spec.columns
        if c.member_names == "type"
        and c.subjects is None
        and codecs.get(c.column) is not None
        and type_member_names(codecs[c.column].reader_node) is not None
    )


def several_subjects_encoder(spec: ColumnFormatSpec, typed: TypedColumnsSpec, field):
    """``valueSubjects`` on write: field i of the struct column is written with subject i's
    latest schema (framed with its id; Protobuf with the message indexes of the subject's
    message); each field's type must fit its subject's schema."""
    from ..formats.avro.subjects import SeveralSubjectsEncoder
    from ..registry.errors import RegistryUnavailableError, SchemaRegistryError

    option = spec.option("Subjects")
    if typed.registry is None:
        raise ConfigurationError(f"Option '{option}' needs 'schema.registry.url'")
    client = registry_for(typed.registry)
    try:
        if spec.format == "avro":
            from ..formats.avro.subjects import subject_schemas

            listed = subject_schemas(client, spec)
        else:
            from ..formats.record_subjects import subject_types

            listed = subject_types(client, spec)
        members = list(getattr(field.dataType, "fields", None) or ())
        if len(members) != len(listed):
            raise ConfigurationError(
                f"Option '{option}' names {len(listed)} subjects "
                f"({', '.join(s for s, _, _ in listed)}), so column '{field.name}' must be a "
                f"struct of as many fields, one per subject in that order (it is "
                f"{field.dataType.simpleString()})"
            )
        codecs = []
        for member, (subject, name, schema) in zip(members, listed, strict=True):
            schema, problem, codec = _subject_member(spec, client, member, field.name, schema, name)
            if problem is not None:
                raise ConfigurationError(
                    f"Field '{field.name}.{member.name}' does not fit subject '{subject}' "
                    f"version {schema.version}: {problem}. '{option}' writes each field with "
                    "its subject's latest schema: make the field's type match it"
                )
            codecs.append(codec)
    except SchemaRegistryError as exc:
        if isinstance(exc, (ConfigurationError, RegistryUnavailableError)):
            raise  # an outage is no configuration problem: retriable, and it says so
        raise ConfigurationError(
            f"The subjects of '{option}' could not be resolved for writing: {exc}"
        ) from exc
    return SeveralSubjectsEncoder(codecs, [s for s, _, _ in listed], spec.column)


def _subject_member(spec, client, member, column, schema, type_name):
    """``(schema, misfit or None, codec)`` of one field written with one subject."""
    if spec.format == "avro":
        from ..formats.avro.references import self_contained
        from ..formats.avro.spark import spark_type_misfit

        schema = self_contained(schema, client)
        problem = spark_type_misfit(member.dataType, schema.schema_str, f"{column}.{member.name}")
        return (
            schema,
            problem,
            make_codec(spec, schema, framed=True, lookup=None, schema_id=schema.schema_id),
        )
    from ..formats.record_subjects import member_codec

    misfit, _derive = _schema_support(spec.format)
    if spec.format == "json":
        from ..formats.json.references import self_contained as json_self_contained

        schema = json_self_contained(schema, client)
        problem = misfit(member.dataType, schema.schema_str)
        lookup = None
    else:
        imported = _imported_files(client, schema) if schema.references else ()
        problem = misfit(
            member.dataType, schema.schema_str, imported=imported, message_name=type_name
        )
        # imports stay references: the tasks' codec builds its pool through the registry
        lookup = client if schema.references else None
    return schema, problem, member_codec(spec, schema, type_name, client, lookup=lookup)
