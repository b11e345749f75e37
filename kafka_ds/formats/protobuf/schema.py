"""Protobuf schemas from the registry: descriptor pools, Confluent message indexes, Spark types.

Registry schemas are read with ``format=serialized``: ``schema_str`` is the base64 of a
serialized ``FileDescriptorProto`` and each reference names an imported file (by its import
path) plus the subject/version holding it. The google/protobuf well-known files are not
registered; they come from the protobuf runtime's own pool.

Type mapping (spark-protobuf defaults, see docs/sql-data-sources-protobuf.md in Spark):
int32/sint32/sfixed32 -> int, uint32/fixed32 -> int (bits reinterpreted, as spark-protobuf
does without ``upcast.unsigned.ints``), int64/sint64/sfixed64 -> bigint, uint64/fixed64 ->
bigint (bits reinterpreted), float, double, bool -> boolean, string, bytes -> binary,
enum -> string (the value's name), message -> struct, repeated -> array, map -> map,
oneof -> its fields as nullable struct fields, google.protobuf.Timestamp -> timestamp,
google.protobuf.Duration -> interval day to second. Deviation asked for by the project:
the wrappers (Int32Value, StringValue, ...) read as nullable scalars, as spark-protobuf does
only with ``unwrap.well.known.types``. Recursive messages are rejected (spark-protobuf's
default ``recursive.fields.max.depth=-1``).

Values: a scalar field without presence (proto3 without ``optional``) that is not on the wire
reads as its default (0, "", false, the enum's first name), as the message object reports it;
spark-protobuf renders those as null unless ``emit.default.values`` is set. Message fields
and fields with presence that are not set read as null, as do reader fields the writer's
message does not have. Enum numbers without a name (open proto3 enums) read as their digits.
"""

from __future__ import annotations

import base64
import binascii

import numpy as np
import pyarrow as pa

# imported for their side effect: the well-known files land in the runtime's default pool
from google.protobuf import (  # noqa: F401
    any_pb2,
    api_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    source_context_pb2,
    struct_pb2,
    timestamp_pb2,
    type_pb2,
    wrappers_pb2,
)
from google.protobuf.descriptor import FieldDescriptor

from kafka_ds.registry.schema import RegisteredSchema

TIMESTAMP = "google.protobuf.Timestamp"
DURATION = "google.protobuf.Duration"
WRAPPERS = frozenset(
    f"google.protobuf.{name}"
    for name in (
        "DoubleValue",
        "FloatValue",
        "Int64Value",
        "UInt64Value",
        "Int32Value",
        "UInt32Value",
        "BoolValue",
        "StringValue",
        "BytesValue",
    )
)

_T = FieldDescriptor
#: protobuf scalar type -> (Spark type, Arrow type)
SCALAR_TYPES = {
    _T.TYPE_INT32: ("int", pa.int32()),
    _T.TYPE_SINT32: ("int", pa.int32()),
    _T.TYPE_SFIXED32: ("int", pa.int32()),
    _T.TYPE_UINT32: ("int", pa.int32()),
    _T.TYPE_FIXED32: ("int", pa.int32()),
    _T.TYPE_INT64: ("bigint", pa.int64()),
    _T.TYPE_SINT64: ("bigint", pa.int64()),
    _T.TYPE_SFIXED64: ("bigint", pa.int64()),
    _T.TYPE_UINT64: ("bigint", pa.int64()),
    _T.TYPE_FIXED64: ("bigint", pa.int64()),
    _T.TYPE_FLOAT: ("float", pa.float32()),
    _T.TYPE_DOUBLE: ("double", pa.float64()),
    _T.TYPE_BOOL: ("boolean", pa.bool_()),
    _T.TYPE_STRING: ("string", pa.string()),
    _T.TYPE_BYTES: ("binary", pa.binary()),
    _T.TYPE_ENUM: ("string", pa.string()),
}
#: unsigned types whose Python values are read as the signed type of the same width
UNSIGNED = {
    _T.TYPE_UINT32: pa.uint32(),
    _T.TYPE_FIXED32: pa.uint32(),
    _T.TYPE_UINT64: pa.uint64(),
    _T.TYPE_FIXED64: pa.uint64(),
}


class ProtobufSchemaError(ValueError):
    pass


# -- Confluent message indexes ---------------------------------------------------------------


def _zigzag_varint(value: int) -> bytes:
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while encoded > 0x7F:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)
    return bytes(out)


def encode_message_indexes(indexes) -> bytes:
    """The message-index prefix of a Confluent Protobuf frame: a zigzag varint count, then
    each index as a zigzag varint; the first message ([0]) is the single byte 0."""
    indexes = list(indexes)
    if indexes == [0]:
        return b"\x00"
    return _zigzag_varint(len(indexes)) + b"".join(_zigzag_varint(i) for i in indexes)


def _read_zigzag_varint(data: bytes, pos: int, end: int):
    result = shift = 0
    while True:
        if pos >= end:
            raise ValueError("truncated message indexes")
        if shift > 63:
            raise ValueError("message index varint longer than 10 bytes")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos


def decode_message_indexes(data: bytes, pos: int, end: int):
    """(indexes tuple, position after them); a count of 0 means [0]."""
    count, pos = _read_zigzag_varint(data, pos, end)
    if count == 0:
        return (0,), pos
    # each index takes at least one byte: a larger count cannot be honest
    if count < 0 or count > end - pos:
        raise ValueError(f"invalid message index count {count}")
    indexes = []
    for _ in range(count):
        index, pos = _read_zigzag_varint(data, pos, end)
        indexes.append(index)
    return tuple(indexes), pos


def read_message_indexes(data, starts, ends, raw):
    """Every row's Confluent message indexes, the row's bytes being ``data[starts[i]:
    ends[i]]`` (numpy: ``data`` uint8, ``starts``/``ends`` int64 per row). The two forms
    writers use for a file's top-level messages are found for all rows at once -- [0], the
    one byte 0, and [k] (k < 64), the bytes 2, 2k --; any other row is read on its own
    from ``raw()`` (the data as bytes, asked for only then).

    Returns ``(code, paths, after, errors)``: ``code`` int64 per row, an index into
    ``paths`` (index tuples; ``paths[0]`` is (0,)), -1 where the indexes do not read;
    ``after`` int64 per row, where the payload starts; ``errors`` {row: reason}."""
    n = len(starts)
    first = np.full(n, 0xFF, np.uint8)
    second = np.full(n, 0xFF, np.uint8)
    has = starts < ends
    two = has & (starts + 1 < ends)
    if len(data):
        first[has] = data[starts[has]]
        second[two] = data[starts[two] + 1]
    code = np.full(n, -1, np.int64)
    after = starts.copy()
    paths = [(0,)]
    simple = first == 0
    code[simple] = 0
    after[simple] += 1
    top = two & (first == 2) & ((second & 0x81) == 0)
    after[top] += 2
    for value in np.unique(second[top]).tolist():
        path = (value >> 1,)
        if path not in paths:
            paths.append(path)
        code[top & (second == value)] = paths.index(path)
    errors = {}
    rest = np.flatnonzero(~simple & ~top)
    if len(rest):
        buffer = raw()
        for i in rest.tolist():
            try:
                path, after[i] = decode_message_indexes(buffer, int(starts[i]), int(ends[i]))
            except ValueError as exc:
                errors[i] = str(exc)
                continue
            if path not in paths:
                paths.append(path)
            code[i] = paths.index(path)
    return code, paths, after, errors


def message_at(file_desc, indexes):
    """The message a Confluent index path names: top-level message, then nested ones."""
    candidates = file_desc.message_types_by_name.values()
    desc = None
    for index in indexes:
        candidates = list(candidates)
        if not 0 <= index < len(candidates):
            raise ProtobufSchemaError(
                f"message index path {list(indexes)} not found in {file_desc.name}"
            )
        desc = candidates[index]
        candidates = desc.nested_types
    return desc


def indexes_of(desc):
    path = []
    while desc.containing_type is not None:
        parent = desc.containing_type
        path.append(list(parent.nested_types).index(desc))
        desc = parent
    path.append(list(desc.file.message_types_by_name.values()).index(desc))
    return tuple(reversed(path))


# -- descriptor pools ------------------------------------------------------------------------


def _file_proto(schema: RegisteredSchema, name: str):
    if schema.schema_type.upper() != "PROTOBUF":
        raise ProtobufSchemaError(f"schema is {schema.schema_type}, not PROTOBUF")
    try:
        raw = base64.b64decode(schema.schema_str, validate=True)
        proto = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, Exception) as exc:
        raise ProtobufSchemaError(
            "Protobuf schemas must be read from the registry with format=serialized (base64 "
            f"of a FileDescriptorProto); could not read it: {exc}"
        ) from exc
    proto.name = name
    return proto


def build_pool(schema: RegisteredSchema, lookup, root_name: str):
    """A fresh DescriptorPool holding the schema's file (named ``root_name``) and everything
    it imports. One pool per schema: two versions of one file cannot share a pool."""
    pool = descriptor_pool.DescriptorPool()
    default_pool = descriptor_pool.Default()
    added = set()

    def add(sch: RegisteredSchema, name: str, chain: tuple):
        if name in added:
            return
        if name in chain:
            raise ProtobufSchemaError(f"import cycle: {' -> '.join(chain + (name,))}")
        proto = _file_proto(sch, name)
        by_name = {ref.name: ref for ref in sch.references}
        for dep in proto.dependency:
            if dep in added:
                continue
            if dep in by_name:
                ref = by_name[dep]
                if lookup is None:
                    raise ProtobufSchemaError(f"{name} imports {dep} but no registry is set")
                add(
                    lookup.schema_version(ref.subject, ref.version, fmt="serialized"),
                    dep,
                    chain + (name,),
                )
            elif dep.startswith("google/protobuf/"):
                try:
                    well_known = default_pool.FindFileByName(dep)
                except KeyError as exc:
                    raise ProtobufSchemaError(f"unknown well-known import {dep}") from exc
                pool.AddSerializedFile(well_known.serialized_pb)
                added.add(dep)
            else:
                raise ProtobufSchemaError(f"{name} imports {dep}, which no reference names")
        try:
            pool.Add(proto)
        except (TypeError, ValueError) as exc:  # upb says TypeError for a bad descriptor
            raise ProtobufSchemaError(f"{name}: {exc}") from exc
        added.add(name)

    add(schema, root_name, ())
    return pool, pool.FindFileByName(root_name)


# -- Spark and Arrow types -------------------------------------------------------------------


def repeated(field) -> bool:
    # FieldDescriptor.is_repeated is new (protobuf 7 dropped .label); older runtimes: label
    try:
        return field.is_repeated
    except AttributeError:
        return field.label == _T.LABEL_REPEATED


def is_map(field) -> bool:
    return (
        field.type == _T.TYPE_MESSAGE
        and repeated(field)
        and field.message_type.GetOptions().map_entry
    )


def _quote(name: str) -> str:
    return f"`{name}`" if not name.isidentifier() else name


def message_types(desc, ancestors=()):
    """(Spark simpleString, Arrow type) of a message read as a struct."""
    if desc.full_name in ancestors:
        path = " -> ".join(ancestors + (desc.full_name,))
        raise ProtobufSchemaError(
            f"recursive message type {desc.full_name} ({path}) is not "
            "supported (spark-protobuf's recursive.fields.max.depth=-1)"
        )
    ancestors = ancestors + (desc.full_name,)
    spark_fields, arrow_fields = [], []
    for field in desc.fields:
        spark, arrow = field_types(field, ancestors)
        spark_fields.append(f"{_quote(field.name)}:{spark}")
        arrow_fields.append(pa.field(field.name, arrow))
    return f"struct<{','.join(spark_fields)}>", pa.struct(arrow_fields)


def value_types(field, ancestors):
    """The types of one value of the field (an element when it is repeated)."""
    if field.type in SCALAR_TYPES:
        return SCALAR_TYPES[field.type]
    if field.type != _T.TYPE_MESSAGE:
        raise ProtobufSchemaError(f"field {field.full_name}: groups are not supported")
    name = field.message_type.full_name
    if name == TIMESTAMP:
        return "timestamp", pa.timestamp("us", tz="UTC")
    if name == DURATION:
        return "interval day to second", pa.duration("us")
    if name in WRAPPERS:
        return SCALAR_TYPES[field.message_type.fields_by_name["value"].type]
    return message_types(field.message_type, ancestors)


def field_types(field, ancestors=()):
    if is_map(field):
        entry = field.message_type
        key_spark, key_arrow = value_types(entry.fields_by_name["key"], ancestors)
        item_spark, item_arrow = value_types(entry.fields_by_name["value"], ancestors)
        return f"map<{key_spark},{item_spark}>", pa.map_(key_arrow, item_arrow)
    spark, arrow = value_types(field, ancestors)
    if repeated(field):
        return f"array<{spark}>", pa.list_(arrow)
    return spark, arrow
