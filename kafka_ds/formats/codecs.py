"""Which codec a typed column gets (:func:`make_codec`), for the source
(``read/typed_columns.py``), the sink (``write/typed_writes.py``) and ``functions.py``.
The contract every codec keeps: the package's docstring (``formats/__init__.py``)."""

from __future__ import annotations

#: the registry's schemaType of each format
SCHEMA_TYPES = {"avro": "AVRO", "protobuf": "PROTOBUF", "json": "JSON"}


def make_codec(spec, reader_schema, *, framed: bool, lookup, schema_id):
    """The codec of ``spec.format`` (a :class:`kafka_ds.options.formats.ColumnFormatSpec`)
    for ``reader_schema`` (a :class:`kafka_ds.registry.schema.RegisteredSchema`).
    ``lookup`` finds writer schemas by id: the registry client of
    :func:`kafka_ds.registry.client.registry_for`, which unpickles to the executor
    process's own client, so each writer schema is fetched once per process."""
    if spec.format == "avro":
        from .avro.codec import AvroCodec

        return AvroCodec(reader_schema, framed=framed, lookup=lookup, schema_id=schema_id)
    if spec.format == "protobuf":
        from .protobuf.codec import ProtobufCodec

        return ProtobufCodec(
            reader_schema,
            framed=framed,
            lookup=lookup,
            schema_id=schema_id,
            message_name=spec.message_name,
        )
    if spec.format == "json":
        from .json.codec import JsonCodec

        return JsonCodec(reader_schema, framed=framed, lookup=lookup, schema_id=schema_id)
    raise ValueError(spec.format)
