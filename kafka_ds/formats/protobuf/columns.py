"""The read fast path for flat Protobuf messages: the wire format decoded for all rows at once.

A :class:`FlatMessageDecoder` is built once per (writer message, reader message) pair when
every field of the writer message is a singular scalar (integers of every encoding,
float, double, bool, string, bytes; proto3 ``optional`` included -- not enums, messages,
repeated fields, maps or real oneofs) and every reader field it fills is one too. Others
take the general path (the protobuf runtime parses each record into a message object,
:mod:`kafka_ds.formats.protobuf.arrow` maps the objects to Arrow).

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

from ...protocol.primitives import uvarint_bytes
from ...protocol.records_arrays import is_utf8, peek_uvarints
from ..framing import slice_positions
from .schema import SCALAR_TYPES, repeated

_T = FieldDescriptor
_VARINT, _FIXED64, _LENGTH, _START_GROUP, _END_GROUP, _FIXED32 = 0, 1, 2, 3, 4, 5
_WIRE_TYPE = {
    _T.TYPE_INT32: _VARINT,
    _T.TYPE_INT64: _VARINT,
    _T.TYPE_UINT32: _VARINT,
    _T.TYPE_UINT64: _VARINT,
    _T.TYPE_SINT32: _VARINT,
    _T.TYPE_SINT64: _VARINT,
    _T.TYPE_BOOL: _VARINT,
    _T.TYPE_FIXED32: _FIXED32,
    _T.TYPE_SFIXED32: _FIXED32,
    _T.TYPE_FLOAT: _FIXED32,
    _T.TYPE_FIXED64: _FIXED64,
    _T.TYPE_SFIXED64: _FIXED64,
    _T.TYPE_DOUBLE: _FIXED64,
    _T.TYPE_STRING: _LENGTH,
    _T.TYPE_BYTES: _LENGTH,
}
_WIDENS_TO = {pa.int32(): (pa.int64(), pa.float64()), pa.float32(): (pa.float64(),)}


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
        self.fields = fields  # field number -> _Field
        self.arrow_type = arrow_type
        self.by_output = {f.output: f for f in fields.values()}
        self.slot = {number: i for i, number in enumerate(fields)}  # row of the 2-D stores
        top = max(fields, default=0)
        # per wire type: field number -> slot of the field read with it, -1: skipped
        self.slots_by_wire = {}
        for wire_type in (_VARINT, _FIXED64, _LENGTH, _FIXED32):
            table = np.full(top + 2, -1, np.int64)
            for number, f in fields.items():
                if f.wire_type == wire_type:
                    table[number] = self.slot[number]
            self.slots_by_wire[wire_type] = table
        self.is_string = np.array(
            [fields[number].desc.type == _T.TYPE_STRING for number in fields], bool
        )

    def _in_number_order(self, rows, seen, values, begins) -> np.ndarray:
        """Reads the rows that hold the writer's fields in number order, each at most once
        and nothing else (what the runtimes write), a field at a time: the rows whose
        next tag is that field's read its value. Returns the other rows (their stores are
        to be reset), and makes no row bad."""
        data, pos, ends = rows.data, rows.pos, rows.ends
        going = np.ones(len(pos), bool)
        for number, f in sorted(self.fields.items()):
            tag = uvarint_bytes(number << 3 | f.wire_type)
            candidates = np.flatnonzero(going & (pos + len(tag) < ends))  # tag + a byte
            if not candidates.size:
                continue
            if len(tag) == 1:
                match = data.take(pos[candidates], mode="clip") == tag[0]
            else:
                got = data.take(pos[candidates, None] + np.arange(len(tag)), mode="clip")
                match = (got == np.frombuffer(tag, np.uint8)).all(axis=1)
            lanes = candidates[match]
            if not lanes.size:
                continue
            start = pos[lanes] + len(tag)
            slot = self.slot[number]
            if f.wire_type in (_FIXED32, _FIXED64):
                width = 4 if f.wire_type == _FIXED32 else 8
                raw = data.take(start[:, None] + np.arange(width), mode="clip")
                value = raw.view(np.uint64 if width == 8 else np.uint32).reshape(len(lanes))
                size = np.full(len(lanes), width, np.int64)
            else:
                value, size = peek_uvarints(data, start)
            end = start + size
            fits = (end <= ends[lanes]) & (size > 0)
            if f.wire_type == _LENGTH:
                room = np.maximum(ends[lanes] - end, 0).astype(np.uint64)
                fits &= value <= room
                begins[slot][lanes] = end
                end = end + np.where(fits, value, 0).astype(np.int64)
            if len(lanes) == len(pos) and fits.all():  # every row has it: no gathers
                values[slot] = value
                seen[slot] = True
                pos[:] = end
                continue
            going[lanes[~fits]] = False
            lanes, value, end = lanes[fits], value[fits], end[fits]
            values[slot][lanes] = value
            seen[slot][lanes] = True
            pos[lanes] = end
        return np.flatnonzero(~going | (pos != ends))

    def decode(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray):
        """``(struct array, bad bool[n], reasons object[n])`` for the messages
        ``data[starts:ends]``."""
        n = len(starts)
        rows = _Rows(data, starts, ends)
        count = len(self.fields)
        seen = np.zeros((count, n), bool)
        values = np.zeros((count, n), np.uint64)  # lengths for length-delimited fields
        begins = np.zeros((count, n), np.int64)
        replaced = []  # earlier occurrences of string fields: their UTF-8 is checked too
        irregular = self._in_number_order(rows, seen, values, begins)
        if irregular.size:  # the rest, from their start, tag by tag
            seen[:, irregular] = False
            rows.pos[irregular] = starts[irregular]
        active = irregular[rows.pos[irregular] < rows.ends[irregular]]
        while active.size:
            tag = rows.varint(active, "tag")
            tag = tag[~rows.bad_lanes]
            active = active[~rows.bad_lanes]
            wire = (tag & np.uint64(7)).astype(np.int64)
            number = tag >> np.uint64(3)
            rows.fail(
                active[(number == 0) | (tag > np.uint64(0xFFFFFFFF))],
                "invalid Protobuf payload: invalid tag",
            )
            rows.fail(
                active[(wire == 6) | (wire == 7)], "invalid Protobuf payload: invalid wire type"
            )
            if np.any(((wire == _START_GROUP) | (wire == _END_GROUP)) & ~rows.bad[active]):
                raise NeedsRuntime("groups")
            for wire_type, table in self.slots_by_wire.items():
                picked = (wire == wire_type) & ~rows.bad[active]
                lanes = active[picked]
                if not lanes.size:
                    continue
                lane_numbers = np.minimum(number[picked], np.uint64(len(table) - 1)).astype(
                    np.int64
                )
                if wire_type == _VARINT:
                    read = rows.varint(lanes, "a varint")
                elif wire_type == _LENGTH:
                    read = rows.length_delimited(lanes)
                else:
                    read = rows.fixed(lanes, 8 if wire_type == _FIXED64 else 4)
                slots = table[lane_numbers]
                keep = (slots >= 0) & ~rows.bad[lanes]
                if not keep.any():
                    continue
                slots, at = slots[keep], lanes[keep]
                if wire_type == _LENGTH:
                    again = seen[slots, at] & self.is_string[slots]
                    if again.any():
                        replaced.append(
                            (
                                slots[again],
                                at[again],
                                begins[slots[again], at[again]],
                                values[slots[again], at[again]].astype(np.int64),
                            )
                        )
                    begins[slots, at] = read[0][keep]
                    values[slots, at] = read[1][keep].astype(np.uint64)
                else:
                    values[slots, at] = read[keep]
                seen[slots, at] = True
            active = rows.unfinished()
        numbers = list(self.fields)
        for slots, at, where, length in replaced:
            for slot in np.unique(slots).tolist():
                mine = slots == slot
                rows.check_utf8(
                    at[mine], where[mine], length[mine], self.fields[numbers[slot]].desc.name
                )
        children = []
        for index, field in enumerate(self.arrow_type):
            f = self.by_output.get(index)
            if f is None:
                children.append(pa.nulls(n, field.type))
                continue
            slot = self.slot[f.desc.number]
            children.append(_column(f, field.type, seen[slot], values[slot], begins[slot], rows))
        mask = pa.array(rows.bad) if rows.bad.any() else None
        struct = pa.StructArray.from_arrays(children, fields=list(self.arrow_type), mask=mask)
        return struct, rows.bad, rows.reasons


def _column(f, arrow_type, seen, raw, begins, rows) -> pa.Array:
    """The reader column of one writer field from its last raw value per row."""
    kind = f.desc.type
    valid = seen | (not f.presence)
    valid &= ~rows.bad
    raw = np.where(seen, raw, np.uint64(0))  # unseen: the proto3 default
    if kind in (_T.TYPE_STRING, _T.TYPE_BYTES):
        lengths = np.where(seen & ~rows.bad, raw, 0).astype(np.int64)
        starts = np.where(seen, begins, 0)
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if offsets[-1] >= (1 << 31):
            raise NeedsRuntime("strings of more than 2 GiB in one batch")
        body = rows.data[slice_positions(starts, lengths)]
        column_type = pa.string() if kind == _T.TYPE_STRING else pa.binary()
        array = pa.Array.from_buffers(
            column_type,
            len(lengths),
            [_validity(valid), pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(body)],
            null_count=int((~valid).sum()),
        )
        if kind == _T.TYPE_STRING:
            try:
                array.validate(full=True)
            except pa.ArrowInvalid:
                checked = np.flatnonzero(seen & ~rows.bad)
                before = int(rows.bad.sum())
                rows.check_utf8(checked, starts[checked], lengths[checked], f.desc.name)
                if int(rows.bad.sum()) == before:
                    raise NeedsRuntime("Arrow refused a string the UTF-8 check accepted") from None
                return _column(f, arrow_type, seen, np.where(rows.bad, 0, raw), begins, rows)
        return array
    if kind == _T.TYPE_BOOL:
        values = raw != 0
        array = pa.Array.from_buffers(
            pa.bool_(),
            len(values),
            [_validity(valid), pa.py_buffer(np.packbits(values, bitorder="little"))],
            null_count=int((~valid).sum()),
        )
    else:
        if kind in (_T.TYPE_INT32, _T.TYPE_UINT32, _T.TYPE_FIXED32, _T.TYPE_SFIXED32):
            values = raw.astype(np.uint32).view(np.int32)  # the low 32 bits
        elif kind == _T.TYPE_SINT32:
            low = raw.astype(np.uint32)
            values = (low >> np.uint32(1)).view(np.int32) ^ -(low & np.uint32(1)).view(np.int32)
        elif kind == _T.TYPE_SINT64:
            values = (raw >> np.uint64(1)).view(np.int64) ^ -(raw & np.uint64(1)).view(np.int64)
        elif kind == _T.TYPE_FLOAT:
            values = raw.astype(np.uint32).view(np.float32)
        elif kind == _T.TYPE_DOUBLE:
            values = raw.view(np.float64)
        else:  # 64-bit integers
            values = raw.view(np.int64)
        writer_arrow = SCALAR_TYPES[kind][1]
        array = pa.Array.from_buffers(
            writer_arrow,
            len(values),
            [_validity(valid), pa.py_buffer(np.ascontiguousarray(values))],
            null_count=int((~valid).sum()),
        )
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
        self.fail(
            lanes[over],
            "invalid Protobuf payload (truncated or corrupt): the record ends inside a field",
        )

    def varint(self, lanes, what):
        """Unsigned varints at the lanes' positions; ``bad_lanes``: lanes that failed."""
        pos = self.pos[lanes]
        value, size = peek_uvarints(self.data, pos)
        self.fail(lanes[size == 0], f"invalid Protobuf payload: {what} longer than 10 bytes")
        over = pos + size > self.ends[lanes]
        self.fail(
            lanes[over],
            f"invalid Protobuf payload (truncated or corrupt): the record ends inside {what}",
        )
        self.pos[lanes] += np.where(self.bad[lanes], 0, size)
        self.bad_lanes = self.bad[lanes]
        return value

    def fixed(self, lanes, width):
        pos = self.pos[lanes]
        raw = self.data.take(pos[:, None] + np.arange(width), mode="clip")
        self.pos[lanes] += width
        self._truncated(lanes)
        return (
            raw.view(np.uint64 if width == 8 else np.uint32).reshape(len(lanes)).astype(np.uint64)
        )

    def length_delimited(self, lanes):
        lengths = self.varint(lanes, "a length")
        lengths = np.where(self.bad[lanes], 0, lengths)
        room = (self.ends[lanes] - self.pos[lanes]).astype(np.uint64)
        over = lengths > room
        self.fail(
            lanes[over],
            "invalid Protobuf payload (truncated or corrupt): the record ends inside a field",
        )
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
        array = pa.Array.from_buffers(
            pa.string(),
            len(rows),
            [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(body)],
        )
        try:
            array.validate(full=True)
            return
        except pa.ArrowInvalid:
            pass
        wrong = [i for i in range(len(rows)) if not is_utf8(body[offsets[i] : offsets[i + 1]])]
        self.fail(rows[wrong], f"invalid Protobuf payload: invalid UTF-8 in string field {name}")


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
    been resolved (arrow.struct_builder): unresolvable pairs never come here."""
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
