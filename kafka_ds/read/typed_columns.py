"""Typed keys and values in the source and the sink: ``valueFormat``/``keyFormat``.

On the driver, :func:`resolve_for_read` turns the options (:mod:`kafka_ds.options.formats`)
into a :class:`TypedColumns`: each typed column's reader schema is looked up once (the
subject's version, or the inline schema) and a codec built from it
(:mod:`kafka_ds.formats`). The source's schema comes from it, and the same object travels
to the executors inside the read options, so every task decodes with the schema fixed when
the query was planned (a streaming query: when it started).

On the executors, :meth:`TypedColumns.decode_batch` replaces the binary ``key``/``value``
columns of each Arrow batch by the decoded ones. A record that does not decode fails the
task (``mode=FAILFAST``) with a :class:`RecordDecodeError` naming topic, partition, offset,
schema id and reason, or (``PERMISSIVE``) reads as null with the reason, schema id and raw
bytes in the ``valueError``/``keyError`` column. Nothing is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..columns import output_columns
from ..errors import ConfigurationError, RecordDecodeError
from ..formats.codecs import SCHEMA_TYPES, make_codec
from ..options.formats import ColumnFormatSpec, TypedColumnsSpec
from ..registry.client import registry_for

#: PERMISSIVE mode: what is kept of a record that did not decode
ERROR_TYPE = "struct<reason:string,schemaId:int,raw:binary>"


def error_column(column: str) -> str:
    return f"{column}Error"


@dataclass
class TypedColumn:
    spec: ColumnFormatSpec
    #: a codec of formats/ (the contract in formats/__init__.py); None for ``string``
    codec: Any
    #: Spark type (simpleString) of the decoded column
    spark_type: str
    #: ``valueMemberNames=type``: the union struct's field names (else the codec's)
    field_names: tuple | None = None

    @property
    def name(self) -> str:
        return self.spec.column


@dataclass
class TypedColumns:
    columns: tuple  # TypedColumn, key first
    mode: str = "FAILFAST"

    @property
    def permissive(self) -> bool:
        return self.mode == "PERMISSIVE"

    def by_name(self) -> dict:
        return {c.name: c for c in self.columns}

    # --- schema --------------------------------------------------------------------------

    def _fields(self, include_headers: bool) -> list[tuple[str, str]]:
        """``(name, Spark type)`` of the source's columns, the typed ones decoded."""
        typed = self.by_name()
        fields = [
            (c.name, typed[c.name].spark_type if c.name in typed else c.spark_type)
            for c in output_columns(include_headers)
        ]
        if self.permissive:
            fields += [(error_column(c.name), ERROR_TYPE) for c in self.columns]
        return fields

    def spark_ddl(self, include_headers: bool) -> str:
        return ", ".join(f"{name} {kind}" for name, kind in self._fields(include_headers))

    def simple_string(self, include_headers: bool) -> str:
        """The source schema's ``StructType.simpleString()``."""
        return (
            "struct<"
            + ",".join(f"{name}:{kind}" for name, kind in self._fields(include_headers))
            + ">"
        )

    # --- executors -----------------------------------------------------------------------

    def decode_batch(self, batch, topic: str, partition: int):
        """``batch`` (the source's Arrow batch with binary key/value) with the typed
        columns decoded; raises :class:`RecordDecodeError` on a bad record in FAILFAST."""
        import pyarrow as pa

        names = batch.schema.names
        typed_value = self.by_name().get("value")
        if typed_value is not None and getattr(typed_value.codec, "drop_tombstones", False):
            values = batch.column(names.index("value"))
            if values.null_count:  # debezium.tombstones=drop: no row for a tombstone
                batch = batch.filter(values.is_valid())
        arrays = list(batch.columns)
        errors = []
        for typed in self.columns:
            index = names.index(typed.name)
            raw = arrays[index]
            decoded, bad_rows, reasons, schema_ids = decode_column(typed, raw)
            if len(bad_rows) and not self.permissive:
                row = int(bad_rows[0])
                offset = batch.column("offset")[row].as_py()
                schema_id = int(schema_ids[0])
                raise RecordDecodeError(
                    f"Cannot decode the {typed.name} of {topic}-{partition} at offset {offset} "
                    f"as {typed.spec.format}"
                    + (f" (schema id {schema_id})" if schema_id >= 0 else "")
                    + f": {reasons[0]}. {len(bad_rows)} record(s) of this batch of "
                    f'{batch.num_rows} failed. .option("mode", "PERMISSIVE") reads such '
                    f"records as null and keeps their bytes in the '{error_column(typed.name)}' "
                    "column."
                )
            arrays[index] = decoded
            if self.permissive:
                errors.append(
                    (error_column(typed.name), _error_array(raw, bad_rows, reasons, schema_ids))
                )
        fields = [pa.field(name, array.type) for name, array in zip(names, arrays, strict=True)]
        fields += [pa.field(name, array.type) for name, array in errors]
        return pa.RecordBatch.from_arrays(
            arrays + [array for _, array in errors], schema=pa.schema(fields)
        )


def decode_column(typed: TypedColumn, raw):
    """``(array, bad_rows, reasons, schema_ids)`` of one column."""
    import numpy as np
    import pyarrow as pa

    if typed.codec is None:  # string: UTF-8 text
        return _decode_utf8(raw)
    result = typed.codec.decode(raw)
    bad_rows = (
        np.asarray(result.bad_rows, dtype=np.int64)
        if result.bad_rows is not None
        else np.empty(0, np.int64)
    )
    schema_ids = (
        np.asarray(result.schema_ids, dtype=np.int32)
        if result.schema_ids is not None
        else np.full(len(bad_rows), -1, np.int32)
    )
    array = result.array
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if typed.field_names is not None:
        from ..formats.avro.members import renamed

        array = renamed(array, typed.field_names)
    return array, bad_rows, list(result.reasons), schema_ids


def _decode_utf8(raw):
    import numpy as np
    import pyarrow as pa

    try:
        return (raw.cast(pa.string()), np.empty(0, np.int64), [], np.empty(0, np.int32))
    except pa.ArrowInvalid:
        pass
    # Only when the batch holds invalid UTF-8: find the rows, one by one.
    values = raw.to_pylist()
    bad: list[int] = []
    reasons: list[str] = []
    text: list[str | None] = []
    for row, value in enumerate(values):
        if value is None:
            text.append(None)
            continue
        try:
            text.append(value.decode("utf-8"))
        except UnicodeDecodeError as exc:
            bad.append(row)
            reasons.append(f"not UTF-8 text ({exc.reason} at byte {exc.start})")
            text.append(None)
    return (
        pa.array(text, pa.string()),
        np.asarray(bad, np.int64),
        reasons,
        np.full(len(bad), -1, np.int32),
    )


def _error_array(raw, bad_rows, reasons, schema_ids):
    """PERMISSIVE: ``struct<reason, schemaId, raw>`` per row, null where the row decoded."""
    import numpy as np
    import pyarrow as pa

    n = len(raw)
    mask = np.ones(n, dtype=bool)  # True = null
    mask[bad_rows] = False
    reason_list = [None] * n
    id_values = np.zeros(n, dtype=np.int32)
    for row, reason, schema_id in zip(bad_rows.tolist(), reasons, schema_ids.tolist(), strict=True):
        reason_list[row] = reason
        id_values[row] = schema_id
    ids = pa.array(id_values, pa.int32(), mask=mask | (id_values < 0))
    raw_kept = pa.array(raw.to_pylist() if len(bad_rows) else [None] * n, pa.binary(), mask=mask)
    return pa.StructArray.from_arrays(
        [pa.array(reason_list, pa.string()), ids, raw_kept],
        names=["reason", "schemaId", "raw"],
        mask=pa.array(mask),
    )


# --- driver: resolving the reader schemas ------------------------------------------------


def topic_of(spec: ColumnFormatSpec, topics: list | None) -> str:
    """The one topic TopicNameStrategy names the subject after."""
    if topics and len(topics) == 1:
        return topics[0]
    raise ConfigurationError(
        f"Option '{spec.option('Format')}'='{spec.format}' reads the schema of subject "
        f"'<topic>-{spec.column}', which needs exactly one topic (got "
        f"{'the topics ' + ', '.join(topics) if topics else 'a topic pattern'}): name the "
        f"subject with '{spec.option('Subject')}' or give the schema in "
        f"'{spec.option('Schema')}'"
    )


def reader_schema(spec: ColumnFormatSpec, registry_settings, topics):
    """The reader schema of one column: inline, or the subject's version from the registry."""
    from ..registry.schema import RegisteredSchema

    if spec.inline_schema is not None:
        return RegisteredSchema(SCHEMA_TYPES[spec.format], spec.inline_schema)
    if spec.subjects is not None:  # several record types, one subject each
        from ..formats.avro.subjects import union_reader_schema

        return union_reader_schema(registry_for(registry_settings), spec)
    subject = spec.subject or f"{topic_of(spec, topics)}-{spec.column}"
    fmt = "serialized" if spec.format == "protobuf" else None
    found = registry_for(registry_settings).schema_version(subject, spec.version, fmt=fmt)
    if found.schema_type != SCHEMA_TYPES[spec.format]:
        raise ConfigurationError(
            f"Option '{spec.option('Format')}' is '{spec.format}' but subject '{subject}' "
            f"version {found.version} holds a {found.schema_type} schema: set "
            f"{spec.option('Format')} to {found.schema_type.lower()}, or name another subject "
            f"with '{spec.option('Subject')}'"
        )
    return found


def resolve_for_read(spec: TypedColumnsSpec, topics: list | None, newest=None) -> TypedColumns:
    """Look up the reader schemas (driver, once per query) and build the codecs.
    ``newest(column)``: the newest record's key or value, where debezium-json finds the
    type of records that carry their schema (None: such a read needs the DDL option)."""
    columns = []
    for column_spec in (spec.key, spec.value):
        if column_spec.format == "binary":
            continue
        if column_spec.format == "debezium-json":
            from ..formats.debezium import debezium_codec

            sample = None
            if column_spec.inline_schema is None and newest is not None:
                sample = newest(column_spec.column)
            codec = debezium_codec(
                column_spec,
                sample,
                flatten=spec.debezium_flatten,
                tombstones=spec.debezium_tombstones,
                topics=topics,
            )
            columns.append(TypedColumn(column_spec, codec, codec.spark_type))
            continue
        if column_spec.format == "debezium-avro":
            columns.append(_debezium_avro(column_spec, spec, topics))
            continue
        if column_spec.format == "string":
            columns.append(TypedColumn(column_spec, None, "string"))
            continue
        if column_spec.subjects is not None and column_spec.format != "avro":
            columns.append(_several_subjects(column_spec, spec))
            continue
        schema = reader_schema(column_spec, spec.registry, topics)
        codec = make_codec(
            column_spec,
            schema,
            framed=spec.registry is not None,
            lookup=registry_for(spec.registry) if spec.registry else None,
            schema_id=schema.schema_id,
        )
        if column_spec.member_names == "type":
            columns.append(_named_by_type(column_spec, codec))
        else:
            columns.append(TypedColumn(column_spec, codec, codec.spark_type))
    return TypedColumns(tuple(columns), spec.mode)


def _debezium_avro(spec: ColumnFormatSpec, typed: TypedColumnsSpec, topics) -> TypedColumn:
    """Debezium's Avro change events: kafka_ds's Avro codec of the subject's schema, its
    envelope and logical types read as debezium-json reads them."""
    from dataclasses import replace

    from ..formats.debezium import debezium_avro_codec

    avro_spec = replace(spec, format="avro")
    schema = reader_schema(avro_spec, typed.registry, topics)
    avro = make_codec(
        avro_spec,
        schema,
        framed=True,
        lookup=registry_for(typed.registry),
        schema_id=schema.schema_id,
    )
    codec = debezium_avro_codec(
        spec, avro, flatten=typed.debezium_flatten, tombstones=typed.debezium_tombstones
    )
    return TypedColumn(spec, codec, codec.spark_type)


def _several_subjects(spec: ColumnFormatSpec, typed: TypedColumnsSpec) -> TypedColumn:
    """Protobuf/JSON ``valueSubjects``: records routed to their subject by type."""
    from ..formats.record_subjects import member_type_names, subjects_codec

    codec = subjects_codec(spec, registry_for(typed.registry))
    if spec.member_names == "type":
        codec = codec.renamed(member_type_names(codec.type_names))
    return TypedColumn(spec, codec, codec.spark_type)


def _named_by_type(spec: ColumnFormatSpec, codec) -> TypedColumn:
    """``valueMemberNames=type``: the union struct's fields named by their types."""
    from ..formats.avro.members import renamed_spark_type, type_member_names

    node = codec.reader_node
    names = type_member_names(node)
    if names is None:
        raise ConfigurationError(
            f"Option '{spec.option('MemberNames')}'='type' names the fields of a union of "
            f"several record types, but the {spec.column} schema is {codec.spark_type}: "
            "remove the option"
        )
    return TypedColumn(spec, codec, renamed_spark_type(node, names), names)
