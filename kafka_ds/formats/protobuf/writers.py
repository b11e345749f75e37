"""The writer message types a Protobuf codec meets while decoding, each resolved onto the
reader's once per process: the writer schema fetched by id (none for the reader's own),
the message its indexes name, and how its records become the reader's Arrow type (the
column-wise decoder, or the runtime's parse with ``arrow.struct_builder``)."""

from __future__ import annotations

from google.protobuf import message_factory

from kafka_ds.formats.protobuf.arrow import struct_builder
from kafka_ds.formats.protobuf.schema import ProtobufSchemaError, build_pool, message_at
from kafka_ds.registry.errors import RegistryUnavailableError


class Writer:
    """One writer message type and its plan onto the reader type (or why it has none)."""

    __slots__ = ("parse", "build", "error", "columns")

    def __init__(self, parse=None, build=None, error=None, columns=None):
        self.parse, self.build, self.error = parse, build, error
        self.columns = columns  # the column-wise decoder of flat messages, or None


class WriterTypes:
    """The :class:`Writer` of each (schema id, message indexes) met, made once.
    ``column_decoder(writer_desc, reader_desc)`` is the codec's choice of decoder."""

    def __init__(self, reader_schema, lookup, reader_desc, column_decoder):
        self.reader_schema = reader_schema
        self.lookup = lookup
        self.reader_desc = reader_desc
        self.column_decoder = column_decoder
        self._files = {}  # schema id -> FileDescriptor (or the exception)
        self._writers = {}  # (schema id, indexes) -> Writer

    def get(self, schema_id: int, indexes: tuple) -> Writer:
        key = (schema_id, indexes)
        writer = self._writers.get(key)
        if writer is None:
            writer = self._writers[key] = self._resolve(schema_id, indexes)
        return writer

    def _resolve(self, schema_id, indexes) -> Writer:
        reader_desc = self.reader_desc
        if schema_id < 0:  # not framed: the records are the reader's message
            desc = reader_desc
        else:
            file_desc = self._files.get(schema_id)
            if file_desc is None:
                try:
                    if schema_id == self.reader_schema.schema_id:
                        schema = self.reader_schema  # no registry round trip for our own
                    elif self.lookup is None:
                        raise LookupError("no schema registry configured")
                    else:
                        schema = self.lookup.schema_by_id(schema_id, fmt="serialized")
                    _, file_desc = build_pool(schema, self.lookup, f"schema_{schema_id}.proto")
                except ProtobufSchemaError as exc:
                    file_desc = ProtobufSchemaError(f"writer schema id {schema_id}: {exc}")
                except RegistryUnavailableError:
                    raise  # the registry, not the record: the task fails, nothing cached
                except Exception as exc:  # the registry said no
                    file_desc = LookupError(f"unknown schema id {schema_id}: {exc}")
                self._files[schema_id] = file_desc
            if isinstance(file_desc, Exception):
                return Writer(error=str(file_desc))
            try:
                desc = message_at(file_desc, indexes)
            except ProtobufSchemaError as exc:
                return Writer(error=f"schema id {schema_id}: {exc}")
        try:
            build = struct_builder(desc, reader_desc)
        except ProtobufSchemaError as exc:
            return Writer(error=f"cannot be resolved to the reader schema: {exc}")
        return Writer(
            message_factory.GetMessageClass(desc).FromString,
            build,
            columns=self.column_decoder(desc, reader_desc),
        )
