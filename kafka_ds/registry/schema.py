"""What the registry stores, as the codecs and the client both see it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SchemaReference:
    #: the import name (Protobuf: the .proto file name; Avro: the full type name)
    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    #: "AVRO", "PROTOBUF" or "JSON" (the registry omits schemaType for AVRO)
    schema_type: str
    #: Avro/JSON: the schema's JSON text. Protobuf: as the registry returned it (``.proto``
    #: text, or base64 of a serialized FileDescriptorProto with ``format=serialized``)
    schema_str: str
    references: tuple = ()
    #: set when the schema came from the registry
    schema_id: int | None = None
    subject: str | None = None
    version: int | None = None


class SchemaLookup:
    """What a codec needs from a registry on the executors (``registry.client.SchemaRegistry``
    implements it): the writer schema of a framed record, by id, cached per process, and the
    schemas its references name."""

    def schema_by_id(self, schema_id: int, fmt: str | None = None) -> RegisteredSchema:
        raise NotImplementedError

    def schema_version(
        self, subject: str, version: int | str, fmt: str | None = None
    ) -> RegisteredSchema:
        raise NotImplementedError
