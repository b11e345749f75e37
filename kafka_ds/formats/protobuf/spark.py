"""Writes with ``valueFormat=protobuf``: a Protobuf schema made from a Spark type (registered,
as confluent-kafka's serializer registers its schemas, as base64 of a serialized
``FileDescriptorProto``) and the check that a Spark type fits a subject's message.

Derived schemas are proto3: a struct is a message (nested structs nested messages), its
fields numbered 1, 2, ... in column order; arrays are repeated fields, maps map fields with
string or integer keys. Types without a plain Protobuf scalar (decimal, date, timestamp,
interval) are refused with the field's name: register a schema for them yourself (e.g.
with google.protobuf.Timestamp) and write with it.
"""

from __future__ import annotations

import base64

PACKAGE = "kafka_ds.generated"
MESSAGE = "TopLevelRecord"

_SCALARS = {  # Spark typeName -> FieldDescriptorProto type name
    "integer": "TYPE_INT32",
    "short": "TYPE_INT32",
    "byte": "TYPE_INT32",
    "long": "TYPE_INT64",
    "float": "TYPE_FLOAT",
    "double": "TYPE_DOUBLE",
    "string": "TYPE_STRING",
    "binary": "TYPE_BYTES",
    "boolean": "TYPE_BOOL",
}


def _camel(name: str) -> str:
    return (
        "".join(part[:1].upper() + part[1:] for part in name.replace("-", "_").split("_") if part)
        or "Field"
    )


def _add_field(message, name: str, number: int, data_type, path: str):
    from google.protobuf import descriptor_pb2
    from pyspark.sql.types import ArrayType, MapType, StructType

    field = message.field.add(name=name, number=number)
    field.label = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    if isinstance(data_type, ArrayType):
        if isinstance(data_type.elementType, (ArrayType, MapType)):
            raise ValueError(f"{path}: an array of arrays or maps has no Protobuf form")
        field.label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
        _set_type(message, field, data_type.elementType, name, path + "[]")
    elif isinstance(data_type, MapType):
        entry = message.nested_type.add(name=_camel(name) + "Entry")
        entry.options.map_entry = True
        key_name = data_type.keyType.typeName()
        if key_name not in ("string", "integer", "long", "boolean"):
            raise ValueError(
                f"{path}: a Protobuf map key must be a string, integer or "
                f"boolean, not {data_type.keyType.simpleString()}"
            )
        _add_field(entry, "key", 1, data_type.keyType, path + ".key")
        _add_field(entry, "value", 2, data_type.valueType, path + ".value")
        field.label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
        field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
        field.type_name = entry.name
    elif isinstance(data_type, StructType):
        _set_type(message, field, data_type, name, path)
    else:
        _set_type(message, field, data_type, name, path)


def _set_type(message, field, data_type, name, path):
    from google.protobuf import descriptor_pb2
    from pyspark.sql.types import StructType

    if isinstance(data_type, StructType):
        nested = message.nested_type.add(name=_camel(name))
        _fill_message(nested, data_type, path)
        field.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
        field.type_name = nested.name
        return
    scalar = _SCALARS.get(data_type.typeName())
    if scalar is None:
        raise ValueError(
            f"{path} is {data_type.simpleString()}, which has no plain Protobuf "
            "scalar: register a schema for it (e.g. google.protobuf.Timestamp) "
            "and write with it"
        )
    field.type = getattr(descriptor_pb2.FieldDescriptorProto, scalar)


def _fill_message(message, struct, path):
    for number, spark_field in enumerate(struct.fields, start=1):
        _add_field(
            message,
            spark_field.name,
            number,
            spark_field.dataType,
            f"{path}.{spark_field.name}" if path else spark_field.name,
        )


def descriptor_for(spark_type) -> str:
    """base64 of the serialized FileDescriptorProto of ``spark_type`` (a pyspark struct)."""
    from google.protobuf import descriptor_pb2
    from pyspark.sql.types import StructType

    if not isinstance(spark_type, StructType):
        raise ValueError(
            f"a Protobuf value is a message: the column must be a struct, not "
            f"{spark_type.simpleString()}"
        )
    proto = descriptor_pb2.FileDescriptorProto(
        name="kafka_ds_generated.proto", package=PACKAGE, syntax="proto3"
    )
    _fill_message(proto.message_type.add(name=MESSAGE), spark_type, "")
    return base64.b64encode(proto.SerializeToString()).decode("ascii")


def _message_of(schema_text: str):
    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema_text))
    if not proto.message_type:
        raise ValueError("the schema defines no message")
    return proto, proto.message_type[0]


#: the well-known wrappers and the Spark type (typeName) each is read as and written from
_WRAPPED = {
    f".google.protobuf.{name}": spark
    for name, spark in (
        ("DoubleValue", "double"),
        ("FloatValue", "float"),
        ("Int64Value", "long"),
        ("UInt64Value", "long"),
        ("Int32Value", "integer"),
        ("UInt32Value", "integer"),
        ("BoolValue", "boolean"),
        ("StringValue", "string"),
        ("BytesValue", "binary"),
    )
}


def descriptor_misfit(
    spark_type, schema_text: str, imported=(), message_name: str | None = None
) -> str | None:
    """The first field of ``spark_type`` that is not a field of the message written (the
    one ``message_name`` names, as ``<column>MessageName`` does, else the schema's first),
    by name, with a compatible kind, or None. Messages of the ``imported`` files (base64
    FileDescriptorProtos of the schema's references) are checked too; those of files not
    given (the well-known ones) are taken as fitting."""
    from google.protobuf import descriptor_pb2
    from pyspark.sql.types import StructType

    if not isinstance(spark_type, StructType):
        return f"the column is {spark_type.simpleString()}, a Protobuf value is a message"
    proto, message = _message_of(schema_text)
    messages = {}

    def collect(prefix, msgs):
        for msg in msgs:
            full = f"{prefix}.{msg.name}"
            messages[full] = msg
            collect(full, msg.nested_type)

    for text in imported:
        other = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text))
        collect("." + other.package if other.package else "", other.message_type)
    collect("." + proto.package if proto.package else "", proto.message_type)
    if message_name:
        package = proto.package
        full = (
            message_name
            if not package or message_name.startswith(package + ".")
            else f"{package}.{message_name}"
        )
        message = messages.get("." + full)
        if message is None:
            return f"message {message_name!r} is not in the schema"
    return _message_misfit(spark_type, message, messages, "")


def _message_misfit(struct, message, messages, path):
    from google.protobuf import descriptor_pb2
    from pyspark.sql.types import ArrayType, MapType, StructType

    by_name = {f.name: f for f in message.field}
    for spark_field in struct.fields:
        where = f"{path}.{spark_field.name}" if path else spark_field.name
        field = by_name.get(spark_field.name)
        if field is None:
            return f"field {where} is not a field of message {message.name}"
        data_type = spark_field.dataType
        repeated = field.label == descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
        target = messages.get(field.type_name) if field.type_name else None
        is_map = target is not None and target.options.map_entry
        if isinstance(data_type, MapType) != (repeated and is_map):
            return f"{where}: map in one and not in the other"
        if isinstance(data_type, ArrayType) != (repeated and not is_map):
            return f"{where}: repeated in one and not in the other"
        element = data_type.elementType if isinstance(data_type, ArrayType) else data_type
        if isinstance(element, MapType) or is_map:
            continue
        if isinstance(element, StructType):
            if field.type != descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE:
                return f"{where} is a struct, the schema's field is not a message"
            if target is None:
                continue  # a message of another file (a reference): not checked
            problem = _message_misfit(element, target, messages, where)
            if problem:
                return problem
            continue
        if field.type == descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE:
            if field.type_name in (".google.protobuf.Timestamp",) and element.typeName() in (
                "timestamp",
                "timestamp_ntz",
            ):
                continue
            if _WRAPPED.get(field.type_name) == element.typeName():
                continue  # a wrapper (Int32Value, ...) is written from its scalar
            return f"{where} is {element.simpleString()}, the schema's field is a message"
        wanted = _SCALARS.get(element.typeName(), "")
        field_type = descriptor_pb2.FieldDescriptorProto.Type.Name(field.type)
        compatible = {
            "TYPE_INT32": {
                "TYPE_INT32",
                "TYPE_SINT32",
                "TYPE_SFIXED32",
                "TYPE_INT64",
                "TYPE_SINT64",
                "TYPE_SFIXED64",
            },
            "TYPE_INT64": {"TYPE_INT64", "TYPE_SINT64", "TYPE_SFIXED64"},
            "TYPE_STRING": {"TYPE_STRING", "TYPE_ENUM"},
        }.get(wanted, {wanted})
        if field_type not in compatible:
            return (
                f"{where} is {element.simpleString()}, the schema's field is "
                f"{field_type[5:].lower()}"
            )
    return None
