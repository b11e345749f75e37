"""Protobuf message objects <-> Arrow, column by column.

``column_builder(writer_field_or_desc, reader...)`` walks the writer and reader descriptors
once and returns a plan: a function from a list of Python values (messages, containers or
scalars, ``None`` where absent) to one Arrow array of the reader's type. Reader fields are
matched to writer fields by NAME: a writer field the reader lacks is skipped, a reader field
the writer lacks reads as null. The per-record work is attribute reads; Arrow arrays are
built per column.
"""

from __future__ import annotations

from datetime import timezone
from operator import attrgetter

import pyarrow as pa
from google.protobuf.descriptor import FieldDescriptor

from kafka_ds.formats.protobuf.schema import (
    DURATION,
    SCALAR_TYPES,
    TIMESTAMP,
    UNSIGNED,
    WRAPPERS,
    ProtobufSchemaError,
    field_types,
    is_map,
    message_types,
    repeated,
)

_T = FieldDescriptor
#: writer scalar Arrow type -> reader Arrow types it widens to without loss
_WIDENS_TO = {
    pa.int32(): (pa.int64(), pa.float64()),
    pa.float32(): (pa.float64(),),
}


def _scalar_builder(field, reader_arrow, where: str):
    """Plan for scalar values (ints, strings, enum numbers, ...) of the writer field."""
    _, writer_arrow = SCALAR_TYPES[field.type]
    if field.type == _T.TYPE_ENUM:
        names = {value.number: value.name for value in field.enum_type.values}

        def build(values):
            # an open (proto3) enum keeps numbers it has no name for: keep them, as digits
            return pa.array(
                [None if v is None else names.get(v) or str(v) for v in values], pa.string()
            )
    elif field.type in UNSIGNED:
        unsigned = UNSIGNED[field.type]

        def build(values):
            return pa.array(values, unsigned).view(writer_arrow)
    else:

        def build(values):
            return pa.array(values, writer_arrow)

    if reader_arrow == writer_arrow:
        return build
    if reader_arrow in _WIDENS_TO.get(writer_arrow, ()):
        return lambda values: build(values).cast(reader_arrow)
    raise ProtobufSchemaError(
        f"field {where}: the writer's {writer_arrow} cannot be read as the reader's {reader_arrow}"
    )


def _micros(seconds_nanos):
    return [None if m is None else m.seconds * 1_000_000 + m.nanos // 1000 for m in seconds_nanos]


def _value_builder(writer_field, reader_field, where: str, ancestors):
    """Plan for single values of a field (repeated fields: for one element)."""
    reader_arrow = field_types_value(reader_field, ancestors)
    w_msg = writer_field.message_type if writer_field.type == _T.TYPE_MESSAGE else None
    r_msg = reader_field.message_type if reader_field.type == _T.TYPE_MESSAGE else None
    w_name = w_msg.full_name if w_msg else None
    r_name = r_msg.full_name if r_msg else None
    if w_name in (TIMESTAMP, DURATION) or r_name in (TIMESTAMP, DURATION):
        if w_name != r_name:
            raise ProtobufSchemaError(
                f"field {where}: writer {w_name or 'scalar'} cannot be "
                f"read as {r_name or 'a scalar'}"
            )
        return lambda values: pa.array(_micros(values), pa.int64()).cast(reader_arrow)
    if w_name in WRAPPERS or r_name in WRAPPERS:
        inner_w = (
            w_msg.fields_by_name["value"]
            if w_msg is not None and w_name in WRAPPERS
            else writer_field
        )
        inner_r = (
            r_msg.fields_by_name["value"]
            if r_msg is not None and r_name in WRAPPERS
            else reader_field
        )
        if inner_w.type == _T.TYPE_MESSAGE or inner_r.type == _T.TYPE_MESSAGE:
            raise ProtobufSchemaError(f"field {where}: {w_name} cannot be read as {r_name}")
        scalar = _scalar_builder(inner_w, reader_arrow, where)
        if w_name in WRAPPERS:
            return lambda values: scalar([None if v is None else v.value for v in values])
        return scalar
    if w_msg is not None or r_msg is not None:
        if w_msg is None or r_msg is None:
            raise ProtobufSchemaError(
                f"field {where}: writer {w_name or 'scalar'} cannot be "
                f"read as {r_name or 'a scalar'}"
            )
        return struct_builder(w_msg, r_msg, where, ancestors)
    return _scalar_builder(writer_field, reader_arrow, where)


def field_types_value(field, ancestors):
    """Arrow type of one value of a (reader) field."""
    _, arrow = field_types(field, ancestors)
    if is_map(field):
        return arrow
    return arrow.value_type if repeated(field) else arrow


def _offsets(containers):
    offsets = [0]
    total = 0
    for c in containers:
        if c is not None:
            total += len(c)
        offsets.append(total)
    return pa.array(offsets, pa.int32())


def _mask(values):
    return pa.array([v is None for v in values], pa.bool_())


def _field_builder(writer_field, reader_field, where: str, ancestors):
    """Plan for the field's column: values as read from the parent messages."""
    if is_map(writer_field) != is_map(reader_field) or repeated(writer_field) != repeated(
        reader_field
    ):
        raise ProtobufSchemaError(f"field {where}: repeated/map in one schema and not in the other")
    if is_map(reader_field):
        w_entry, r_entry = writer_field.message_type, reader_field.message_type
        keys = _value_builder(
            w_entry.fields_by_name["key"], r_entry.fields_by_name["key"], where + ".key", ancestors
        )
        items = _value_builder(
            w_entry.fields_by_name["value"],
            r_entry.fields_by_name["value"],
            where + ".value",
            ancestors,
        )

        def build(maps):
            flat_keys, flat_items = [], []
            for m in maps:
                if m is not None:
                    for key, item in m.items():
                        flat_keys.append(key)
                        flat_items.append(item)
            return pa.MapArray.from_arrays(
                _offsets(maps), keys(flat_keys), items(flat_items), mask=_mask(maps)
            )

        return build
    element = _value_builder(writer_field, reader_field, where, ancestors)
    if not repeated(reader_field):
        return element

    def build_list(lists):
        flat = [item for items in lists if items is not None for item in items]
        return pa.ListArray.from_arrays(_offsets(lists), element(flat), mask=_mask(lists))

    return build_list


def _getter(field):
    """Reads the field from one message; None where a message field (or a scalar with
    presence, e.g. proto3 ``optional``) is unset. Scalars without presence read as their
    default (0, "", false)."""
    name = field.name
    if repeated(field) or not field.has_presence:
        return attrgetter(name)  # C-level: the hot path of flat messages
    return lambda m: getattr(m, name) if m.HasField(name) else None


def _is_not_none(value) -> bool:
    return value is not None


def struct_builder(writer_desc, reader_desc, where: str = "", ancestors=()):
    """Plan for a column of messages of ``writer_desc`` (None: null) read as ``reader_desc``."""
    _, arrow_type = message_types(reader_desc, ancestors)  # also rejects recursion
    ancestors = ancestors + (reader_desc.full_name,)
    if reader_desc.fields and not any(
        f.name in writer_desc.fields_by_name for f in reader_desc.fields
    ):
        raise ProtobufSchemaError(
            f"writer message {writer_desc.full_name} shares no field "
            f"with reader message {reader_desc.full_name}"
        )
    children = []
    for reader_field in reader_desc.fields:
        path = f"{where}.{reader_field.name}" if where else reader_field.name
        writer_field = writer_desc.fields_by_name.get(reader_field.name)
        child_type = arrow_type.field(reader_field.name).type
        if writer_field is None:
            children.append((None, None, child_type))
        else:
            children.append(
                (
                    _getter(writer_field),
                    _field_builder(writer_field, reader_field, path, ancestors),
                    child_type,
                )
            )

    def build(messages):
        has_null = not all(map(_is_not_none, messages))
        arrays = []
        for getter, builder, child_type in children:
            if getter is None:
                arrays.append(pa.nulls(len(messages), child_type))
            elif has_null:
                arrays.append(builder([None if m is None else getter(m) for m in messages]))
            else:
                arrays.append(builder(list(map(getter, messages))))
        return pa.StructArray.from_arrays(
            arrays, fields=list(arrow_type), mask=_mask(messages) if has_null else None
        )

    return build


# -- Arrow rows -> messages (encode) ---------------------------------------------------------


def _to_scalar(field, value, where):
    if field.type == _T.TYPE_ENUM:
        number = field.enum_type.values_by_name.get(value)
        if number is None:
            if isinstance(value, str) and value.lstrip("-").isdigit():
                return int(value)
            raise ValueError(
                f"{where}: {value!r} is not a value of enum {field.enum_type.full_name}"
            )
        return number.number
    if field.type in (_T.TYPE_UINT32, _T.TYPE_FIXED32):
        return value & 0xFFFFFFFF
    if field.type in (_T.TYPE_UINT64, _T.TYPE_FIXED64):
        return value & 0xFFFFFFFFFFFFFFFF
    return value


def _set_value(message, field, value, where):
    """Set a singular field (or fill a message-typed one) from its Arrow Python value."""
    if field.type != _T.TYPE_MESSAGE:
        setattr(message, field.name, _to_scalar(field, value, where))
        return
    fill_message(getattr(message, field.name), value, where)


def fill_message(message, value, where=""):
    """Fill ``message`` from a ``to_pylist`` value of its Arrow type."""
    desc = message.DESCRIPTOR
    name = desc.full_name
    if name == TIMESTAMP:
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        message.FromDatetime(value)
        return
    if name == DURATION:
        message.FromTimedelta(value)
        return
    if name in WRAPPERS:
        message.value = _to_scalar(desc.fields_by_name["value"], value, where)
        return
    message.SetInParent()
    for field in desc.fields:
        item = value.get(field.name)
        if item is None:
            continue
        path = f"{where}.{field.name}" if where else field.name
        if is_map(field):
            container = getattr(message, field.name)
            value_field = field.message_type.fields_by_name["value"]
            key_field = field.message_type.fields_by_name["key"]
            for key, entry in item:
                key = _to_scalar(key_field, key, path)
                if value_field.type == _T.TYPE_MESSAGE:
                    fill_message(container[key], entry, path)
                elif entry is not None:
                    container[key] = _to_scalar(value_field, entry, path)
        elif repeated(field):
            container = getattr(message, field.name)
            for entry in item:
                if entry is None:
                    raise ValueError(f"{path}: a repeated field cannot hold null")
                if field.type == _T.TYPE_MESSAGE:
                    fill_message(container.add(), entry, path)
                else:
                    container.append(_to_scalar(field, entry, path))
        else:
            _set_value(message, field, item, path)
