"""The read fast path for flat Protobuf messages: the wire format decoded for all rows at once.

A :class:`FlatMessageDecoder` is built once per (writer message, reader message) pair when
every field of the writer message is a singular scalar (integers of every encoding,
float, double, bool, string, bytes; proto3 ``optional`` included -- not enums, messages,
repeated fields, maps or real oneofs) and every reader field it fills is one too. Others
take the general path (the protobuf runtime parses each record into a message object,
:mod:`kafka_ds.formats.protobuf_arrow` maps the objects to Arrow).

Decoding keeps a position per row and reads one field of every unfinished row per step
(a message has its fields in any order, each possibly more than once): the tag varint,
then by its wire type a varint, 8 or 4 bytes, or a length and that many bytes. A field of
the writer met with its own wire type is kept (a later occurrence replaces an earlier one,
as the runtime's "last one wins"); anything else -- unknown field numbers, known numbers
with another wire type -- is skipped, as the runtime keeps them as unknown fields. Fields
never met read as the proto3 default (0, "", false), or null when the field has presence.

A row is bad, with the runtime's verdict and a reason, when a read passes its end
(truncated), a varint is longer than 10 bytes, the tag's field number is 0 or its wire
type is not one of 0, 1, 2, 5, or a string field holds invalid UTF-8. Records holding
groups (wire types 3 and 4, from proto2 writers) raise :class:`NeedsRuntime`: the general
path parses those.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from google.protobuf.descriptor import FieldDescriptor

from .framing import slice_positions
from .protobuf_schema import SCALAR_TYPES, repeated

_T = FieldDescriptor
_VARINT, _FIXED64, _LENGTH, _START_GROUP, _END_GROUP, _FIXED32 = 0, 1, 2, 3, 4, 5
_WIRE_TYPE = {
    _T.TYPE_INT32: _VARINT, _T.TYPE_INT64: _VARINT, _T.TYPE_UINT32: _VARINT,
    _T.TYPE_UINT64: _VARINT, _T.TYPE_SINT32: _VARINT, _T.TYPE_SINT64: _VARINT,
    _T.TYPE_BOOL: _VARINT, _T.TYPE_FIXED32: _FIXED32, _T.TYPE_SFIXED32: _FIXED32,
    _T.TYPE_FLOAT: _FIXED32, _T.TYPE_FIXED64: _FIXED64, _T.TYPE_SFIXED64: _FIXED64,
    _T.TYPE_DOUBLE: _FIXED64, _T.TYPE_STRING: _LENGTH, _T.TYPE_BYTES: _LENGTH,
}
_WIDENS_TO = {pa.int32(): (pa.int64(), pa.float64()), pa.float32(): (pa.float64(),)}
_MAX_VARINT = 10


class NeedsRuntime(Exception):
    """The records hold something the column-wise decoder leaves to the runtime (groups)."""


class _Field:
    """One writer field: where its last value per row is kept, and its reader column."""

    def __init__(self, desc, output: int):
        self.desc = desc
        self.wire_type = _WIRE_TYPE[desc.type]
        self.output = output
        self.presence = desc.has_presence


class FlatMessageDecoder:
    def __init__(self, fields: dict, arrow_type: pa.StructType):
        self.fields = fields                  # field number -> _Field
        self.arrow_type = arrow_type
        self.by_output = {f.output: f for f in fields.values()}

    def decode(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray):
        """``(struct array, bad bool[n], reasons object[n])`` for the messages
        ``data[starts:ends]``."""
        n = len(starts)
        rows = _Rows(data, starts, ends)
        seen = {number: np.zeros(n, bool) for number in self.fields}
        values = {number: np.zeros(n, np.uint64) for number in self.fields}
        begins = {number: np.zeros(n, np.int64) for number, f in self.fields.items()
                  if f.wire_type == _LENGTH}
        strings = {number: [] for number, f in self.fields.items()
                   if f.desc.type == _T.TYPE_STRING}    # every occurrence is checked
        active = rows.unfinished()
        while active.size:
            tag = rows.varint(active, "tag")
            active = active[~rows.bad[active]]
            tag = tag[~rows.bad_lanes]
            wire = (tag & np.uint64(7)).astype(np.int64)
            number = (tag >> np.uint64(3)).astype(np.int64)
            rows.fail(active[(number == 0) | (tag > np.uint64(0xFFFFFFFF))],
                      "invalid Protobuf payload: invalid tag")
            rows.fail(active[(wire == 6) | (wire == 7)], "invalid Protobuf payload: invalid wire type")
            if np.any(((wire == _START_GROUP) | (wire == _END_GROUP)) & ~rows.bad[active]):
                raise NeedsRuntime("groups")
            for wire_type in (_VARINT, _FIXED64, _LENGTH, _FIXED32):
                lanes = active[(wire == wire_type) & ~rows.bad[active]]
                if not lanes.size:
                    continue
                lane_numbers = number[np.searchsorted(active, lanes)]
                if wire_type == _VARINT:
                    read = rows.varint(lanes, "a varint")
                elif wire_type == _LENGTH:
                    read = rows.length_delimited(lanes)
                else:
                    read = rows.fixed(lanes, 8 if wire_type == _FIXED64 else 4)
                ok = ~rows.bad[lanes]
                for field_number, f in self.fields.items():
                    if f.wire_type != wire_type:
                        continue
                    mine = ok & (lane_numbers == field_number)
                    if not mine.any():
                        continue
                    at = lanes[mine]
                    seen[field_number][at] = True
                    if wire_type == _LENGTH:
                        begins[field_number][at] = read[0][mine]
                        values[field_number][at] = read[1][mine].astype(np.uint64)
                        if field_number in strings:
                            strings[field_number].append((at, read[0][mine], read[1][mine]))
                    else:
                        values[field_number][at] = read[mine]
            active = rows.unfinished()
        for field_number, occurrences in strings.items():
            for at, where, length in occurrences:
                rows.check_utf8(at, where, length, self.fields[field_number].desc.name)
        children = []
        for index, field in enumerate(self.arrow_type):
            f = self.by_output.get(index)
            if f is None:
                children.append(pa.nulls(n, field.type))
                continue
            number = f.desc.number
            children.append(_column(f, field.type, seen[number], values[number],
                                    begins.get(number), rows))
        mask = pa.array(rows.bad) if rows.bad.any() else None
        struct = pa.StructArray.from_arrays(children, fields=list(self.arrow_type), mask=mask)
        return struct, rows.bad, rows.reasons


def _column(f, arrow_type, seen, raw, begins, rows) -> pa.Array:
    """The reader column of one writer field from its last raw value per row."""
    kind = f.desc.type
    valid = seen | (not f.presence)
    valid &= ~rows.bad
    raw = np.where(seen, raw, np.uint64(0))       # unseen: the proto3 default
    if kind in (_T.TYPE_STRING, _T.TYPE_BYTES):
        lengths = np.where(seen & ~rows.bad, raw, 0).astype(np.int64)
        starts = np.where(seen, begins, 0)
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if offsets[-1] >= (1 << 31):
            raise NeedsRuntime("strings of more than 2 GiB in one batch")
        body = rows.data[slice_positions(starts, lengths)]
        column_type = pa.string() if kind == _T.TYPE_STRING else pa.binary()
        return pa.Array.from_buffers(column_type, len(lengths), [
            _validity(valid), pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(body)],
            null_count=int((~valid).sum()))
    if kind == _T.TYPE_BOOL:
        values = raw != 0
        array = pa.Array.from_buffers(pa.bool_(), len(values), [
            _validity(valid), pa.py_buffer(np.packbits(values, bitorder="little"))],
            null_count=int((~valid).sum()))
    else:
        if kind in (_T.TYPE_INT32, _T.TYPE_UINT32, _T.TYPE_FIXED32, _T.TYPE_SFIXED32):
            values = raw.astype(np.uint32).view(np.int32)           # the low 32 bits
        elif kind == _T.TYPE_SINT32:
            low = raw.astype(np.uint32)
            values = (low >> np.uint32(1)).view(np.int32) ^ -(low & np.uint32(1)).view(np.int32)
        elif kind == _T.TYPE_SINT64:
            values = (raw >> np.uint64(1)).view(np.int64) ^ -(raw & np.uint64(1)).view(np.int64)
        elif kind == _T.TYPE_FLOAT:
            values = raw.astype(np.uint32).view(np.float32)
        elif kind == _T.TYPE_DOUBLE:
            values = raw.view(np.float64)
        else:                                                        # 64-bit integers
            values = raw.view(np.int64)
        writer_arrow = SCALAR_TYPES[kind][1]
        array = pa.Array.from_buffers(writer_arrow, len(values), [
            _validity(valid), pa.py_buffer(np.ascontiguousarray(values))],
            null_count=int((~valid).sum()))
    return array if array.type == arrow_type else array.cast(arrow_type)


def _validity(valid):
    return None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


class _Rows:
    """Per-row positions of one decode, and the first failure of each row."""

    def __init__(self, data, starts, ends):
        self.data = data if data.size else np.zeros(1, np.uint8)
        self.pos = starts.astype(np.int64, copy=True)
        self.ends = ends.astype(np.int64, copy=False)
        n = len(starts)
        self.bad = np.zeros(n, bool)
        self.reasons = np.empty(n, dtype=object)
        self.bad_lanes = np.zeros(0, bool)

    def unfinished(self):
        return np.flatnonzero(~self.bad & (self.pos < self.ends))

    def fail(self, rows, reason):
        rows = rows[~self.bad[rows]]
        if rows.size:
            self.bad[rows] = True
            self.reasons[rows] = reason
            self.pos[rows] = self.ends[rows]

    def _truncated(self, lanes):
        over = self.pos[lanes] > self.ends[lanes]
        self.fail(lanes[over], "invalid Protobuf payload (truncated or corrupt): the "
                               "record ends inside a field")

    def varint(self, lanes, what):
        """Unsigned varints at the lanes' positions; ``bad_lanes``: lanes that failed."""
        pos = self.pos[lanes]
        ends = self.ends[lanes]
        byte = self.data.take(pos, mode="clip")
        value = (byte & 0x7F).astype(np.uint64)
        size = np.ones(len(lanes), np.int64)
        going = np.flatnonzero(byte >= 0x80)
        k = 1
        while going.size:
            if k >= _MAX_VARINT:
                self.fail(lanes[going], f"invalid Protobuf payload: {what} longer than 10 bytes")
                break
            byte = self.data.take(pos[going] + k, mode="clip")
            value[going] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)
            size[going] += 1
            going = going[byte >= 0x80]
            k += 1
        over = pos + size > ends
        self.fail(lanes[over], "invalid Protobuf payload (truncated or corrupt): the record "
                               f"ends inside {what}")
        self.pos[lanes] += np.where(self.bad[lanes], 0, size)
        self.bad_lanes = self.bad[lanes]
        return value

    def fixed(self, lanes, width):
        pos = self.pos[lanes]
        raw = self.data.take(pos[:, None] + np.arange(width), mode="clip")
        self.pos[lanes] += width
        self._truncated(lanes)
        return raw.view(np.uint64 if width == 8 else np.uint32).reshape(len(lanes)).astype(np.uint64)

    def length_delimited(self, lanes):
        lengths = self.varint(lanes, "a length")
        lengths = np.where(self.bad[lanes], 0, lengths)
        room = (self.ends[lanes] - self.pos[lanes]).astype(np.uint64)
        over = lengths > room
        self.fail(lanes[over], "invalid Protobuf payload (truncated or corrupt): the record "
                               "ends inside a field")
        lengths = np.where(over, 0, lengths).astype(np.int64)
        begins = self.pos[lanes].copy()
        self.pos[lanes] += np.where(self.bad[lanes], 0, lengths)
        return begins, lengths

    def check_utf8(self, rows, begins, lengths, name):
        keep = ~self.bad[rows]
        rows, begins, lengths = rows[keep], begins[keep], lengths[keep]
        if not rows.size:
            return
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        body = self.data[slice_positions(begins, lengths)]
        array = pa.Array.from_buffers(pa.string(), len(rows), [
            None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(body)])
        try:
            array.validate(full=True)
            return
        except pa.ArrowInvalid:
            pass
        wrong = [i for i in range(len(rows)) if not _is_utf8(body[offsets[i]:offsets[i + 1]])]
        self.fail(rows[wrong], f"invalid Protobuf payload: invalid UTF-8 in string field {name}")


def _is_utf8(view) -> bool:
    try:
        bytes(view).decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _flat_scalar(field) -> bool:
    if field.type not in _WIRE_TYPE or repeated(field):
        return False
    oneof = field.containing_oneof
    return oneof is None or _is_synthetic(oneof)


def _is_synthetic(oneof) -> bool:
    synthetic = getattr(oneof, "is_synthetic", None)
    if synthetic is not None:
        return bool(synthetic)
    return len(oneof.fields) == 1 and oneof.name.startswith("_")


def build_message_decoder(writer_desc, reader_desc, arrow_type) -> FlatMessageDecoder | None:
    """A FlatMessageDecoder from ``writer_desc`` records to ``reader_desc``'s Arrow type
    (``arrow_type``), or None when the pair takes the general path. The pair has already
    been resolved (protobuf_arrow.struct_builder): unresolvable pairs never come here."""
    if not all(_flat_scalar(f) for f in writer_desc.fields):
        return None
    names = [f.name for f in arrow_type]
    fields = {}
    for reader_field in reader_desc.fields:
        writer_field = writer_desc.fields_by_name.get(reader_field.name)
        if writer_field is None:
            continue
        if not _flat_scalar(reader_field):
            return None
        reader_arrow = SCALAR_TYPES[reader_field.type][1]
        writer_arrow = SCALAR_TYPES[writer_field.type][1]
        if reader_arrow != writer_arrow and reader_arrow not in _WIDENS_TO.get(writer_arrow, ()):
            return None
        fields[writer_field.number] = _Field(writer_field, names.index(reader_field.name))
    return FlatMessageDecoder(fields, arrow_type)


__all__ = ["FlatMessageDecoder", "NeedsRuntime", "build_message_decoder"]
